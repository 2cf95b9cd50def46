package boltfs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// Regression fuzz target for https://github.com/lakemeta/lake/issues/25:
// the datastore's half of a bolt file meets damage as the metastore's does.

var (
	fixtureOnce  sync.Once
	fixtureBytes []byte
)

// fixture returns the bytes of a small store holding both halves: 200 kv
// keys, datastore files in the root and in namespace "ns2" (one of several
// pages, so that overflow pages exist) and lock records.
func fixture(t testing.TB) []byte {
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lake-fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "lake.db")
		ms, err := boltstore.Open(path, &boltstore.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		kv := metastore.New(ms)
		for i := range 200 {
			if err := kv.Put(ctx, fmt.Sprintf("tbl/k%03d", i), make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
		d, err := boltfs.New(ms.File())
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		for _, ns := range []string{datastore.DefaultNamespace, "ns2"} {
			n, err := s.Namespace(ns)
			if err != nil {
				t.Fatal(err)
			}
			for j := range 6 {
				body := bytes.Repeat([]byte{byte('a' + j)}, 50+j*j*500)
				if _, err := n.Put(ctx, fmt.Sprintf("data/m/%s/f%d", ns, j), bytes.NewReader(body), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Records().CASRecord(ctx, "lock/team/a", metastore.ExpectAbsent(), []byte("1")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		kv.Close()
		fixtureBytes, err = os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
	})
	return fixtureBytes
}

// readAll runs every read of the datastore on s (the root or a namespace)
// and returns the first error.
func readAll(ctx context.Context, s *datastore.Store, model string) error {
	files, err := s.ListAll(ctx, "data/")
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, _, err := s.Get(ctx, f.Path); err != nil {
			return err
		}
	}
	if _, err := s.Stat(ctx, "data/m/"+model+"/f1"); err != nil && !strings.Contains(err.Error(), "not found") {
		return err
	}
	parts, err := s.Partitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, _, err := s.Changes(ctx, p, 0, 100); err != nil {
			return err
		}
	}
	if _, _, err := s.ChangedPartitions(ctx, ""); err != nil {
		return err
	}
	if _, err := s.Namespaces(ctx); err != nil {
		return err
	}
	_, err = s.Records().ListRecords(ctx, "")
	return err
}

// FuzzDamagedDatastore writes data over the store at offset, then reads
// every datastore path of both namespaces through a read-only open and
// writes one file through a read-write open: nothing may crash (a panic
// here fails the target), the reads leave the file byte for byte as it was,
// and every error is an error, never a hang.
func FuzzDamagedDatastore(f *testing.F) {
	f.Add(uint32(0), []byte{0})
	f.Add(uint32(3*4096), make([]byte, 4096))
	f.Add(uint32(4*4096+16+4), []byte{0xff, 0xff, 0xff, 0x7f}) // an element's size
	f.Add(uint32(5*4096+8), []byte{1, 0})                      // a page's flags
	f.Add(uint32(4096+40), []byte{9, 9, 9})
	f.Fuzz(func(t *testing.T, offset uint32, data []byte) {
		img := append([]byte(nil), fixture(t)...)
		off := int(offset) % len(img)
		copy(img[off:], data)
		path := filepath.Join(t.TempDir(), "lake.db")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		before := sha256.Sum256(img)
		if d, err := boltfs.Open(path, &boltfs.Options{ReadOnly: true}); err == nil {
			s := datastore.New(d)
			for _, ns := range []string{datastore.DefaultNamespace, "ns2"} {
				if n, err := s.Namespace(ns); err == nil {
					readAll(ctx, n, ns)
				}
			}
			s.Close()
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(after) != before {
			t.Fatal("a read-only open and reads changed the file")
		}
		if d, err := boltfs.Open(path, nil); err == nil {
			s := datastore.New(d)
			if n, err := s.Namespace("ns2"); err == nil {
				n.Put(ctx, "data/m/ns2/new", strings.NewReader("new"), nil)
			}
			s.Close()
		}
	})
}
