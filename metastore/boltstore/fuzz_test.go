package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

var (
	templateOnce  sync.Once
	templateBytes []byte
)

// template returns the bytes of a small store of 200 keys in several pages.
func template(t testing.TB) []byte {
	templateOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lake-fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "lake.db")
		d, err := boltstore.Open(path, &boltstore.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		s := metastore.New(d)
		for i := range 200 {
			if err := s.Put(context.Background(), fmt.Sprintf("tbl/k%03d", i), make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		templateBytes, err = os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
	})
	return templateBytes
}

// FuzzDamagedStore writes data over a small store at offset and then
// checks, opens and reads it: nothing may crash, every error is one of the
// documented ones, and a file that lake check finds sound reads in full.
func FuzzDamagedStore(f *testing.F) {
	f.Add(uint32(0), []byte{0})
	f.Add(uint32(2*4096), make([]byte, 4096))
	f.Add(uint32(5*4096+16), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint32(4096+40), []byte{9, 9, 9})
	f.Fuzz(func(t *testing.T, offset uint32, data []byte) {
		img := append([]byte(nil), template(t)...)
		off := int(offset) % len(img)
		copy(img[off:], data)
		path := filepath.Join(t.TempDir(), "lake.db")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := boltstore.Check(path, 0)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
		if err != nil {
			if !errors.Is(err, boltstore.ErrDamaged) && !errors.Is(err, boltstore.ErrNotStore) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		s := metastore.New(d)
		defer s.Close()
		_, err = s.ListAll(context.Background(), "")
		switch {
		case err != nil && !errors.Is(err, boltstore.ErrDamaged):
			t.Fatalf("ListAll: %v", err)
		case err != nil && rep.Sound():
			t.Fatalf("lake check found the file sound, ListAll failed: %v", err)
		}
	})
}
