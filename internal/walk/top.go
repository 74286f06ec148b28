package walk

import "slices"

// Match is an entry kept by a Top: its path relative to the walk's root
// and its kind.
type Match struct {
	Path string
	Kind Kind
}

// Top counts entries and keeps the first K of them in tree order (see
// Compare), whatever order they arrive in, in O(K) memory. A parallel walk
// visits folders in no fixed order, so "the first K" must be chosen like
// this to be the same from one run to the next. A Top is used by one
// goroutine; give each worker its own and Merge them at the end.
type Top struct {
	k       int
	count   int
	heap    []Match // a max-heap: heap[0] is the last of the kept entries
	scratch []byte
}

// NewTop returns a Top that keeps k entries.
func NewTop(k int) *Top { return &Top{k: k} }

// Offer counts the entry name in folder dir ("" for the root) and keeps it
// if it is among the first k seen so far. It allocates only for entries
// it keeps.
func (t *Top) Offer(dir string, name []byte, kind Kind) {
	t.count++
	if t.k <= 0 {
		return
	}
	b := t.scratch[:0]
	if dir != "" {
		b = append(append(b, dir...), '/')
	}
	b = append(b, name...)
	t.scratch = b
	if len(t.heap) < t.k {
		t.heap = append(t.heap, Match{Path: string(b), Kind: kind})
		t.up(len(t.heap) - 1)
		return
	}
	if compare(b, t.heap[0].Path) >= 0 {
		return
	}
	t.heap[0] = Match{Path: string(b), Kind: kind}
	t.down(0)
}

// Merge combines the Tops of several workers: the total count, and the
// first k entries of them all in tree order.
func Merge(k int, tops ...*Top) (count int, first []Match) {
	for _, t := range tops {
		count += t.count
		first = append(first, t.heap...)
	}
	slices.SortFunc(first, func(a, b Match) int { return Compare(a.Path, b.Path) })
	if len(first) > k {
		first = first[:k]
	}
	return count, first
}

// Compare orders slash-separated paths in tree order: component by
// component, byte-wise, so a folder's contents come right after it and
// before a sibling whose name extends the folder's ("a", "a/z", "a.go").
func Compare(a, b string) int { return compare(a, b) }

func compare[A, B ~string | ~[]byte](a A, b B) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		switch {
		case ca == '/':
			return -1
		case cb == '/':
			return 1
		case ca < cb:
			return -1
		}
		return 1
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// above reports whether entry i belongs above entry j in the max-heap.
func (t *Top) above(i, j int) bool { return Compare(t.heap[i].Path, t.heap[j].Path) > 0 }

func (t *Top) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.above(i, p) {
			return
		}
		t.heap[i], t.heap[p] = t.heap[p], t.heap[i]
		i = p
	}
}

func (t *Top) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(t.heap) {
			return
		}
		c := l
		if r := l + 1; r < len(t.heap) && t.above(r, l) {
			c = r
		}
		if !t.above(c, i) {
			return
		}
		t.heap[i], t.heap[c] = t.heap[c], t.heap[i]
		i = c
	}
}
