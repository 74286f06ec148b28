package audit

import (
	"encoding/binary"
	"hash/crc32"
	"os"
)

// The head file: two slots of headSlot bytes, the record seq in slot
// seq%2, so that a write cut short by the process's death (a copy into
// the mapping can be) leaves the other slot, the record before, whole.
// A slot: seq (8 bytes, little-endian), the record's SHA-256, the one
// before it, the length of the record's path and the path, and a CRC-32
// of all that.
const (
	headSlot     = 512
	headSize     = 2 * headSlot
	headFileRoom = headSlot - 8 - 32 - 32 - 2 - 4
)

// headState is what a slot holds: the last record of the chain and the
// one before it, so that a process killed after writing the head but
// before its record appeared steps back.
type headState struct {
	Seq  uint64
	Hash [32]byte
	Prev [32]byte
	File string // the record's path under the audit folder; empty: unknown
}

// encodeSlot writes h into slot (headSlot bytes).
func encodeSlot(slot []byte, h headState) {
	clear(slot)
	binary.LittleEndian.PutUint64(slot, h.Seq)
	copy(slot[8:], h.Hash[:])
	copy(slot[40:], h.Prev[:])
	if len(h.File) <= headFileRoom { // else unknown: the next start keeps the record
		binary.LittleEndian.PutUint16(slot[72:], uint16(len(h.File)))
		copy(slot[74:], h.File)
	}
	binary.LittleEndian.PutUint32(slot[headSlot-4:], crc32.ChecksumIEEE(slot[:headSlot-4]))
}

func decodeSlot(slot []byte) (headState, bool) {
	var h headState
	if len(slot) < headSlot || crc32.ChecksumIEEE(slot[:headSlot-4]) != binary.LittleEndian.Uint32(slot[headSlot-4:]) {
		return h, false
	}
	h.Seq = binary.LittleEndian.Uint64(slot)
	copy(h.Hash[:], slot[8:40])
	copy(h.Prev[:], slot[40:72])
	n := int(binary.LittleEndian.Uint16(slot[72:]))
	if n > headFileRoom {
		return h, false
	}
	h.File = string(slot[74 : 74+n])
	return h, true
}

// readHeadFile returns the head file's newest whole slot.
func readHeadFile(path string) (headState, bool) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) < headSize {
		return headState{}, false
	}
	a, okA := decodeSlot(data[:headSlot])
	b, okB := decodeSlot(data[headSlot:])
	switch {
	case okA && (!okB || a.Seq >= b.Seq):
		return a, true
	case okB:
		return b, true
	}
	return headState{}, false
}
