package bolttest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Page is one page of a sound file, as bbolt describes it.
type Page struct {
	ID    int
	Type  string // "branch", "leaf", "meta", "freelist"
	Count int    // elements
}

// Damager makes generated damage of the kinds issue 25's testers used:
// truncations, flipped bits and bytes, zeroed and swapped pages, page
// header and element fields, meta pages (with their checksum made valid
// again, so that bbolt believes them). It learns the file's pages once,
// from the sound file, and then damages copies of it.
type Damager struct {
	pages    []Page
	tree     []Page // branch and leaf pages
	pageSize int
	size     int64
}

// NewDamager reads the pages of the sound file at path.
func NewDamager(t testing.TB, path string) *Damager {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil) // tx.Page needs the freelist a writer loads
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := &Damager{pageSize: db.Info().PageSize}
	err = db.View(func(tx *bolt.Tx) error {
		d.size = tx.Size()
		for id := 0; id < int(tx.Size())/d.pageSize; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info == nil {
				continue
			}
			p := Page{ID: id, Type: info.Type, Count: info.Count}
			d.pages = append(d.pages, p)
			if p.Type == "branch" || p.Type == "leaf" {
				d.tree = append(d.tree, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Kinds is the number of kinds of damage Apply makes.
const Kinds = 9

// Apply damages the file at path (a copy of the sound file) with damage of
// kind kind%Kinds, chosen by rng, and says what it did.
func (d *Damager) Apply(t testing.TB, rng *rand.Rand, path string, kind int) string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps := int64(d.pageSize)
	write := func(off int64, b []byte) {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	read := func(off int64, n int) []byte {
		b := make([]byte, n)
		f.ReadAt(b, off)
		return b
	}
	u32 := func() uint32 {
		switch rng.IntN(4) {
		case 0:
			return rng.Uint32()
		case 1:
			return uint32(rng.IntN(1 << 16))
		case 2:
			return 0xFFFFFFFF - uint32(rng.IntN(16))
		default:
			return uint32(rng.IntN(8 * d.pageSize))
		}
	}
	tree := d.tree[rng.IntN(len(d.tree))]
	switch kind % Kinds {
	case 0:
		n := rng.Int64N(d.size)
		if err := f.Truncate(n); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("truncated to %d bytes", n)
	case 1:
		off := rng.Int64N(d.size)
		b := read(off, 1)
		b[0] ^= 1 << rng.IntN(8)
		write(off, b)
		return fmt.Sprintf("bit flipped at %d", off)
	case 2:
		var desc string
		for range 1 + rng.IntN(8) {
			off := rng.Int64N(d.size)
			write(off, []byte{byte(rng.IntN(256))})
			desc += fmt.Sprintf(" %d", off)
		}
		return "bytes overwritten at" + desc
	case 3:
		write(int64(tree.ID)*ps, make([]byte, ps))
		return fmt.Sprintf("zeroed %s page %d", tree.Type, tree.ID)
	case 4:
		other := d.tree[rng.IntN(len(d.tree))]
		a, b := read(int64(tree.ID)*ps, d.pageSize), read(int64(other.ID)*ps, d.pageSize)
		write(int64(tree.ID)*ps, b)
		write(int64(other.ID)*ps, a)
		return fmt.Sprintf("swapped pages %d and %d", tree.ID, other.ID)
	case 5:
		if tree.Count == 0 {
			return d.Apply(t, rng, path, 6)
		}
		i := rng.IntN(tree.Count)
		field := 4 * rng.IntN(4)
		if tree.Type == "branch" {
			field = 4 * rng.IntN(3) // pos, ksize, pgid (low half)
		}
		v := u32()
		write(int64(tree.ID)*ps+16+int64(i)*16+int64(field), binary.NativeEndian.AppendUint32(nil, v))
		return fmt.Sprintf("%s page %d element %d field +%d set to %#x", tree.Type, tree.ID, i, field, v)
	case 6:
		off := int64(tree.ID) * ps
		switch rng.IntN(4) {
		case 0:
			write(off, binary.NativeEndian.AppendUint64(nil, uint64(rng.IntN(int(d.size/ps)+4))))
			return fmt.Sprintf("page %d header id changed", tree.ID)
		case 1:
			write(off+8, binary.NativeEndian.AppendUint16(nil, uint16(1<<rng.IntN(5))))
			return fmt.Sprintf("page %d header flags changed", tree.ID)
		case 2:
			write(off+10, binary.NativeEndian.AppendUint16(nil, uint16(rng.IntN(1<<16))))
			return fmt.Sprintf("page %d header count changed", tree.ID)
		default:
			v := u32()
			write(off+12, binary.NativeEndian.AppendUint32(nil, v))
			return fmt.Sprintf("page %d header overflow set to %#x", tree.ID, v)
		}
	case 7:
		// A meta page field, with a valid checksum: bbolt believes it.
		id := int64(rng.IntN(2))
		off := id*ps + 16
		m := read(off, 64)
		fields := []int{8, 16, 32, 40, 48} // page size, root, freelist, high-water mark, txid
		fo := fields[rng.IntN(len(fields))]
		if fo == 8 {
			binary.NativeEndian.PutUint32(m[fo:], u32())
		} else {
			binary.NativeEndian.PutUint64(m[fo:], uint64(rng.IntN(int(d.size/ps)*2+2)))
		}
		h := fnv.New64a()
		h.Write(m[:56])
		binary.NativeEndian.PutUint64(m[56:], h.Sum64())
		write(off, m)
		return fmt.Sprintf("meta page %d field +%d changed (checksum kept valid)", id, fo)
	default:
		page := make([]byte, ps)
		for i := range page {
			page[i] = byte(rng.IntN(256))
		}
		write(int64(tree.ID)*ps, page)
		return fmt.Sprintf("random bytes over %s page %d", tree.Type, tree.ID)
	}
}
