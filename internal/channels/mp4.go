package channels

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// mp4Duration reads an MP4's duration from its movie header (moov/mvhd,
// ISO/IEC 14496-12 section 8.2.2), walking box headers only: the media
// data is never read. DingTalk's video message wants the duration.
func mp4Duration(r io.ReaderAt, size int64) (time.Duration, error) {
	moov, n, err := findBox(r, 0, size, "moov")
	if err != nil {
		return 0, err
	}
	mvhd, n, err := findBox(r, moov, moov+n, "mvhd")
	if err != nil {
		return 0, err
	}
	// version(1) flags(3), then for version 0: creation(4) modification(4)
	// timescale(4) duration(4); for version 1 the times and duration are
	// 8 bytes each.
	var head [32]byte
	if n < 24 {
		return 0, errors.New("mvhd too short")
	}
	if _, err := r.ReadAt(head[:min(int64(len(head)), n)], mvhd); err != nil && err != io.EOF {
		return 0, err
	}
	var scale, dur uint64
	if head[0] == 1 {
		if n < 32 {
			return 0, errors.New("mvhd too short")
		}
		scale, dur = uint64(binary.BigEndian.Uint32(head[20:24])), binary.BigEndian.Uint64(head[24:32])
	} else {
		scale, dur = uint64(binary.BigEndian.Uint32(head[12:16])), uint64(binary.BigEndian.Uint32(head[16:20]))
	}
	if scale == 0 || dur/scale > 1<<31 {
		return 0, errors.New("mvhd has no usable duration")
	}
	return time.Duration(dur) * time.Second / time.Duration(scale), nil
}

// findBox returns the offset and length of the payload of the first box
// of type name among the boxes in [off, end).
func findBox(r io.ReaderAt, off, end int64, name string) (int64, int64, error) {
	for boxes := 0; off+8 <= end && boxes < 1000; boxes++ {
		var h [16]byte
		if _, err := r.ReadAt(h[:8], off); err != nil {
			return 0, 0, err
		}
		size, hdr := int64(binary.BigEndian.Uint32(h[:4])), int64(8)
		switch size {
		case 0: // to the end
			size = end - off
		case 1: // 64-bit size follows
			if _, err := r.ReadAt(h[8:16], off+8); err != nil {
				return 0, 0, err
			}
			size, hdr = int64(binary.BigEndian.Uint64(h[8:16])), 16
		}
		if size < hdr || off+size > end {
			return 0, 0, errors.New("broken box " + string(h[4:8]))
		}
		if string(h[4:8]) == name {
			return off + hdr, size - hdr, nil
		}
		off += size
	}
	return 0, 0, errors.New("no " + name + " box")
}
