package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A branch page whose child is itself or one of its ancestors (one flipped
// byte in a page id makes one) sends bbolt's recursive search into an endless
// descent: the goroutine's stack overflows, which the Go runtime treats as
// fatal, beyond any recover. So before bbolt maps a file, Open walks the
// branch pages of every tree it will search (the root bucket's and each
// top-level bucket's) and refuses a file in which a descent could return to a
// page on its own path.
//
// The walk reads each branch page whole and only the 16-byte header of each
// child (to tell a branch from a leaf), never a leaf's contents: its cost is
// one small read per page of those trees, about 5 ms for a 10 MiB file.
// Nested buckets are not walked: lake opens only top-level ones.

// errCycle reports a cycle in a bucket's page tree.
var errCycle = errors.New("a cycle in the page tree")

type treeReader struct {
	r        io.ReaderAt
	pageSize int64
	hwm      uint64
	color    map[uint64]uint8 // 1: on the current descent, 2: done
}

const (
	onPath = 1
	done   = 2
)

// checkAcyclic walks the trees of the root bucket and of every top-level
// bucket of the file described by shape, and returns an error wrapping
// errCycle if a descent can come back to a page on its own path.
func checkAcyclic(r io.ReaderAt, shape fileShape) error {
	t := &treeReader{r: r, pageSize: int64(shape.pageSize), hwm: shape.active.hwm, color: map[uint64]uint8{}}
	leaves, err := t.descend(shape.active.root, "(root)", true)
	if err != nil {
		return err
	}
	// The root bucket's leaves name the top-level buckets and their roots.
	for _, leaf := range leaves {
		for _, b := range t.bucketRoots(leaf) {
			// Trees of two buckets never share pages in a sound file, and
			// a shared page cannot start an endless descent by itself: a
			// fresh colouring per bucket keeps the check exact.
			t.color = map[uint64]uint8{}
			if _, err := t.descend(b.root, b.name, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// header reads the 16-byte header of page id: its flags and element count.
// ok is false for a page bbolt would refuse or fault on by itself (outside
// the file, or naming another page), which needs no walk.
func (t *treeReader) header(id uint64) (flags uint16, count int, ok bool) {
	if id < 2 || id >= t.hwm {
		return 0, 0, false
	}
	var h [pageHeaderSize]byte
	if _, err := t.r.ReadAt(h[:], int64(id)*t.pageSize); err != nil {
		return 0, 0, false
	}
	ne := binary.NativeEndian
	if ne.Uint64(h[:]) != id {
		return 0, 0, false
	}
	return ne.Uint16(h[8:]), int(ne.Uint16(h[10:])), true
}

// elements reads the element array of page id (count elements of 16 bytes),
// as bbolt reads it: from the page's start, even past its end.
func (t *treeReader) elements(id uint64, count int) []byte {
	end := int64(id)*t.pageSize + pageHeaderSize + int64(count)*elementSize
	if limit := int64(t.hwm) * t.pageSize; end > limit {
		end = limit // bbolt would fault past the map: contained elsewhere
	}
	buf := make([]byte, max(0, end-int64(id)*t.pageSize))
	n, _ := t.r.ReadAt(buf, int64(id)*t.pageSize)
	return buf[:n]
}

// descend walks the branch pages under root without recursion. With
// wantLeaves it returns the ids of the leaves it reached.
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
		flags, count, ok := t.header(id)
		if !ok {
			return nil
		}
		if flags&branchFlag == 0 {
			if wantLeaves && flags&leafFlag != 0 {
				leaves = append(leaves, id)
			}
			t.color[id] = done
			return nil
		}
		t.color[id] = onPath
		stack = append(stack, frame{id: id, elems: t.elements(id, count)})
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
	_, count, ok := t.header(id)
	if !ok {
		return nil
	}
	// The whole page with its overflow: keys and bucket headers live after
	// the element array.
	var h [pageHeaderSize]byte
	if _, err := t.r.ReadAt(h[:], int64(id)*t.pageSize); err != nil {
		return nil
	}
	overflow := uint64(binary.NativeEndian.Uint32(h[12:]))
	if id+overflow >= t.hwm {
		return nil
	}
	p := make([]byte, int64(overflow+1)*t.pageSize)
	if _, err := t.r.ReadAt(p, int64(id)*t.pageSize); err != nil {
		return nil
	}
	ne := binary.NativeEndian
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
			roots = append(roots, bucketRoot{name: fmt.Sprintf("%q", p[k:k+ksize]), root: root})
		}
	}
	return roots
}
