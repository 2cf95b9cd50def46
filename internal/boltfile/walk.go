package boltfile

import (
	"encoding/binary"
	"fmt"
	"io"
)

// bbolt's page shapes (internal/common/page.go, bucket.go in v1.5.0): after
// the 16-byte page header, a branch page holds count elements {pos u32,
// ksize u32, pgid u64} and a leaf page count elements {flags u32, pos u32,
// ksize u32, vsize u32}; pos counts from the element itself. A leaf element
// flagged as a bucket holds {root u64, sequence u64}, followed, when root is
// 0, by an inline leaf page. A freelist page holds count page ids, or, when
// count is 0xFFFF, the real count in its first u64.
// NB: this is bbolt's file format; it must not change.
const (
	branchFlag     = 0x01
	leafFlag       = 0x02
	freelistFlag   = 0x10
	bucketLeafFlag = 0x01
	elementSize    = 16
	bucketHeader   = 16
)

// walker reads a bbolt file's page tree with plain reads and checks the
// bounds that bbolt trusts: every page it reaches lies below the high-water
// mark and says so in its header, and every element, key and value lies
// inside its page. bbolt's own consistency check (tx.Check) reads through
// the map on a goroutine of its own, where a fault cannot be contained; it
// is safe to run only on a file this walk found sound, because it touches no
// byte this walk has not bounded.
type walker struct {
	r        io.ReaderAt
	pageSize int
	hwm      uint64
	seen     map[uint64]bool
	problems []string
	// pages counts the pages reached (trees and freelist).
	pages int
}

const maxWalkProblems = 20

func (w *walker) problem(format string, args ...any) {
	if len(w.problems) < maxWalkProblems {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// page reads the whole span of page id (with its overflow pages), or nil
// after reporting why it cannot.
func (w *walker) page(id uint64, from string, want uint16) []byte {
	if id < 2 || id >= w.hwm {
		w.problem("page %d (referenced from bucket %s) is outside the file's pages 2 to %d", id, from, w.hwm-1)
		return nil
	}
	if w.seen[id] {
		w.problem("page %d (referenced from bucket %s) is referenced twice", id, from)
		return nil
	}
	w.seen[id] = true
	hdr := make([]byte, pageHeaderSize)
	if _, err := w.r.ReadAt(hdr, int64(id)*int64(w.pageSize)); err != nil {
		w.problem("page %d: %v", id, err)
		return nil
	}
	ne := binary.NativeEndian
	overflow := uint64(ne.Uint32(hdr[12:]))
	switch {
	case ne.Uint64(hdr) != id:
		w.problem("page %d (referenced from bucket %s) identifies itself as page %d", id, from, ne.Uint64(hdr))
		return nil
	case ne.Uint16(hdr[8:])&want == 0:
		w.problem("page %d (referenced from bucket %s) has flags %#x, not a %s page", id, from, ne.Uint16(hdr[8:]), pageKind(want))
		return nil
	case id+overflow >= w.hwm:
		w.problem("page %d (referenced from bucket %s) runs %d pages past the high-water mark", id, from, id+overflow+1-w.hwm)
		return nil
	}
	for i := uint64(1); i <= overflow; i++ {
		w.seen[id+i] = true
	}
	w.pages += int(overflow) + 1
	buf := make([]byte, (overflow+1)*uint64(w.pageSize))
	if _, err := w.r.ReadAt(buf, int64(id)*int64(w.pageSize)); err != nil {
		w.problem("page %d: %v", id, err)
		return nil
	}
	return buf
}

func pageKind(flag uint16) string {
	switch flag {
	case branchFlag | leafFlag:
		return "branch or leaf"
	case freelistFlag:
		return "freelist"
	}
	return fmt.Sprintf("%#x", flag)
}

// freelist checks the freelist page's span.
func (w *walker) freelist(id uint64) {
	if id == noFreelist {
		return
	}
	p := w.page(id, "(the meta page's freelist)", freelistFlag)
	if p == nil {
		return
	}
	ne := binary.NativeEndian
	start, count := uint64(pageHeaderSize), uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF {
		count, start = ne.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > (uint64(len(p))-start)/8 {
		w.problem("freelist page %d lists %d pages, more than it can hold", id, count)
	}
}

// rootBucket names the tree of top-level buckets in problems.
const rootBucket = "(root)"

// tree walks the b+tree of a bucket from its root page.
func (w *walker) tree(id uint64, bucket string) {
	p := w.page(id, bucket, branchFlag|leafFlag)
	if p != nil {
		w.node(p, id, bucket)
	}
}

// node checks one branch or leaf page p (page id; 0 for an inline page) and
// descends into its children and sub-buckets.
func (w *walker) node(p []byte, id uint64, bucket string) {
	ne := binary.NativeEndian
	flags, count := ne.Uint16(p[8:]), int(ne.Uint16(p[10:]))
	where := fmt.Sprintf("page %d of bucket %s", id, bucket)
	if id == 0 {
		where = "the inline page of bucket " + bucket
	}
	if pageHeaderSize+count*elementSize > len(p) {
		w.problem("%s: %d elements do not fit in %d bytes", where, count, len(p))
		return
	}
	for i := range count {
		e := pageHeaderSize + i*elementSize
		if flags&branchFlag != 0 {
			pos, ksize := uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:]))
			if uint64(e)+pos+ksize > uint64(len(p)) {
				w.problem("%s: branch element %d runs past the page", where, i)
				return
			}
			w.tree(ne.Uint64(p[e+8:]), bucket)
			continue
		}
		eflags, pos := ne.Uint32(p[e:]), uint64(ne.Uint32(p[e+4:]))
		ksize, vsize := uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		if uint64(e)+pos+ksize+vsize > uint64(len(p)) {
			w.problem("%s: leaf element %d runs past the page", where, i)
			return
		}
		if eflags&bucketLeafFlag == 0 {
			continue
		}
		if id == 0 {
			w.problem("%s: an inline bucket holds a bucket", where)
			return
		}
		k := uint64(e) + pos
		name := fmt.Sprintf("%s/%q", bucket, p[k:k+ksize])
		if bucket == rootBucket {
			name = fmt.Sprintf("%q", p[k:k+ksize])
		}
		v := p[k+ksize : k+ksize+vsize]
		switch {
		case vsize < bucketHeader:
			w.problem("%s: bucket %s has a %d-byte header", where, name, vsize)
		case ne.Uint64(v) != 0:
			w.tree(ne.Uint64(v), name)
		case vsize < bucketHeader+pageHeaderSize:
			w.problem("%s: inline bucket %s is %d bytes", where, name, vsize)
		default:
			inline := v[bucketHeader:]
			if ne.Uint16(inline[8:])&leafFlag == 0 {
				w.problem("%s: inline bucket %s is not a leaf page", where, name)
				continue
			}
			w.node(inline, 0, name)
		}
	}
}
