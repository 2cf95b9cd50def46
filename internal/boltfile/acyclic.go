package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A branch page whose child is itself or one of its ancestors (one flipped
// byte in a page id makes one) sends bbolt's recursive search into an endless
// descent: the goroutine's stack overflows, which the Go runtime treats as
// fatal, beyond any recover. And an element whose key or value runs past its
// page (one flipped byte in a size) makes bbolt read, copy and allocate as
// many bytes as the size says, up to 4 GiB, before anything faults. So
// before bbolt maps a file, Open walks the page trees bbolt will search and
// refuses a file in which a descent could return to a page on its own path,
// or an element of a branch or leaf page runs past the page.
//
// The trees walked: the root bucket's, each top-level bucket's, and the
// nested ones lake opens (the datastore's namespaces, datastore.ns/NAME/*).
// The walk reads the element array of each page of those trees (one small
// read per page, never a value), and the leaves whole only where buckets
// are named: about 5 ms for a 10 MiB file.

// errCycle reports a cycle in a bucket's page tree.
var errCycle = errors.New("a cycle in the page tree")

// errElement reports an element that runs past its page.
var errElement = errors.New("an element runs past its page")

// nsBucket is the datastore's bucket of namespaces (datastore/boltfs): the
// one top-level bucket whose buckets hold buckets.
// NB: part of the file format; it must not change.
var nsBucket = "datastore.ns"

// holdsBuckets reports whether the bucket at path (names from the root)
// holds the buckets lake opens, so that its leaves are read to find them.
func holdsBuckets(path []string) bool {
	return len(path) == 0 || path[0] == nsBucket && len(path) <= 2
}

type treeReader struct {
	r        io.ReaderAt
	pageSize int64
	hwm      uint64
	color    map[uint64]uint8 // 1: on the current descent, 2: done
	// pages bounds the whole walk: no tree of a sound file visits more
	// pages than the file holds.
	pages uint64
	// scratch holds the first page of the page being read.
	scratch []byte
}

const (
	onPath = 1
	done   = 2
)

// checkAcyclic walks the trees of the file described by shape (see above)
// and returns an error wrapping errCycle if a descent can come back to a
// page on its own path, or errElement if an element runs past its page.
func checkAcyclic(r io.ReaderAt, shape fileShape) error {
	t := &treeReader{r: r, pageSize: int64(shape.pageSize), hwm: shape.active.hwm}
	return t.bucket(shape.active.root, nil)
}

// bucket walks the tree of the bucket at path rooted at page root, then the
// trees of the buckets it holds if holdsBuckets(path).
func (t *treeReader) bucket(root uint64, path []string) error {
	name := "(root)"
	if len(path) > 0 {
		name = fmt.Sprintf("%q", strings.Join(path, "/"))
	}
	// Trees of two buckets never share pages in a sound file, and a shared
	// page cannot start an endless descent by itself: a fresh colouring per
	// bucket keeps the check exact.
	t.color = map[uint64]uint8{}
	leaves, err := t.descend(root, name, holdsBuckets(path))
	if err != nil {
		return err
	}
	for _, leaf := range leaves {
		for _, b := range t.bucketRoots(leaf) {
			if err := t.bucket(b.root, append(slices.Clip(path), b.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// page reads the header and element array of page id, as bbolt reads them,
// and checks that every element lies inside the page's span (the page and
// its overflow). ok is false for a page bbolt would refuse or fault on by
// itself (outside the file, or naming another page), which needs no walk.
func (t *treeReader) page(id uint64, bucket string) (flags uint16, elems []byte, ok bool, err error) {
	if id < 2 || id >= t.hwm {
		return 0, nil, false, nil
	}
	if t.pages++; t.pages > t.hwm {
		return 0, nil, false, fmt.Errorf("%w of bucket %s: the walk reached more pages than the file holds", errCycle, bucket)
	}
	// One read of the first page holds the header and, nearly always, the
	// element array: one system call per page.
	if t.scratch == nil {
		t.scratch = make([]byte, t.pageSize)
	}
	n, _ := t.r.ReadAt(t.scratch, int64(id)*t.pageSize)
	if n < pageHeaderSize {
		return 0, nil, false, nil
	}
	h := t.scratch[:n]
	ne := binary.NativeEndian
	if ne.Uint64(h) != id {
		return 0, nil, false, nil
	}
	flags, count, overflow := ne.Uint16(h[8:]), uint64(ne.Uint16(h[10:])), uint64(ne.Uint32(h[12:]))
	if flags&(branchFlag|leafFlag) == 0 {
		return flags, nil, true, nil
	}
	// Divide rather than add: a forged overflow must not wrap.
	if overflow >= t.hwm-id {
		return 0, nil, false, fmt.Errorf("%w: page %d of bucket %s runs %d pages past the high-water mark", errElement, id, bucket, overflow-(t.hwm-id)+1)
	}
	span := (overflow + 1) * uint64(t.pageSize)
	end := pageHeaderSize + count*elementSize
	if end > span {
		return 0, nil, false, fmt.Errorf("%w: page %d of bucket %s: %d elements do not fit in %d bytes", errElement, id, bucket, count, span)
	}
	if end <= uint64(len(h)) {
		elems = h[:end]
	} else {
		elems = make([]byte, end)
		if _, err := t.r.ReadAt(elems, int64(id)*t.pageSize); err != nil {
			return 0, nil, false, nil
		}
	}
	for i := range count {
		e := pageHeaderSize + i*elementSize
		var need uint64
		if flags&branchFlag != 0 {
			need = e + uint64(ne.Uint32(elems[e:])) + uint64(ne.Uint32(elems[e+4:]))
		} else {
			need = e + uint64(ne.Uint32(elems[e+4:])) + uint64(ne.Uint32(elems[e+8:])) + uint64(ne.Uint32(elems[e+12:]))
		}
		if need > span {
			return 0, nil, false, fmt.Errorf("%w: page %d of bucket %s: element %d claims %d bytes, the page spans %d", errElement, id, bucket, i, need, span)
		}
	}
	return flags, elems, true, nil
}

// descend walks the pages under root without recursion. With wantLeaves it
// returns the ids of the leaves it reached.
func (t *treeReader) descend(root uint64, bucket string, wantLeaves bool) ([]uint64, error) {
	type frame struct {
		id    uint64
		elems []byte
		next  int
	}
	var leaves []uint64
	var stack []frame
	push := func(id uint64) error {
		switch t.color[id] {
		case onPath:
			return fmt.Errorf("%w of bucket %s: a descent returns to page %d", errCycle, bucket, id)
		case done:
			return nil
		}
		flags, elems, ok, err := t.page(id, bucket)
		if err != nil || !ok {
			return err
		}
		if flags&branchFlag == 0 {
			if wantLeaves && flags&leafFlag != 0 {
				leaves = append(leaves, id)
			}
			t.color[id] = done
			return nil
		}
		t.color[id] = onPath
		// elems may be the reader's scratch buffer: a branch keeps a copy.
		stack = append(stack, frame{id: id, elems: slices.Clone(elems)})
		return nil
	}
	if err := push(root); err != nil {
		return nil, err
	}
	ne := binary.NativeEndian
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		e := pageHeaderSize + f.next*elementSize
		if e+elementSize > len(f.elems) {
			t.color[f.id] = done
			stack = stack[:len(stack)-1]
			continue
		}
		f.next++
		if err := push(ne.Uint64(f.elems[e+8:])); err != nil {
			return nil, err
		}
	}
	return leaves, nil
}

type bucketRoot struct {
	name string
	root uint64
}

// bucketRoots returns the non-inline buckets named on leaf page id.
func (t *treeReader) bucketRoots(id uint64) []bucketRoot {
	// The whole page with its overflow: keys and bucket headers live after
	// the element array.
	var h [pageHeaderSize]byte
	if _, err := t.r.ReadAt(h[:], int64(id)*t.pageSize); err != nil {
		return nil
	}
	ne := binary.NativeEndian
	count, overflow := int(ne.Uint16(h[10:])), uint64(ne.Uint32(h[12:]))
	if id+overflow >= t.hwm {
		return nil
	}
	p := make([]byte, int64(overflow+1)*t.pageSize)
	if _, err := t.r.ReadAt(p, int64(id)*t.pageSize); err != nil {
		return nil
	}
	var roots []bucketRoot
	for i := range count {
		e := pageHeaderSize + i*elementSize
		if e+elementSize > len(p) {
			break
		}
		flags, pos := ne.Uint32(p[e:]), uint64(ne.Uint32(p[e+4:]))
		ksize, vsize := uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		k := uint64(e) + pos
		if flags&bucketLeafFlag == 0 || vsize < bucketHeader || k+ksize+vsize > uint64(len(p)) {
			continue
		}
		if root := ne.Uint64(p[k+ksize:]); root != 0 {
			roots = append(roots, bucketRoot{name: string(p[k : k+ksize]), root: root})
		}
	}
	return roots
}
