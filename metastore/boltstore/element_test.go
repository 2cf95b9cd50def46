package boltstore_test

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// TestElementSizeRefusedAtOpen: a key or value size that runs past its
// page (one flipped byte in a branch or leaf element) is damage that Open
// refuses, before bbolt reads it: bbolt would copy and allocate as many
// bytes as the size says (issue 25: `lake put` took 1.98 GB before its
// error). The file keeps every byte and the process allocates next to
// nothing.
func TestElementSizeRefusedAtOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  string
		field int // offset in the element
	}{
		{"branch-key-size", "branch", 4},
		{"leaf-key-size", "leaf", 8},
		{"leaf-value-size", "leaf", 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := bigStore(t)
			ids := pagesOf(t, path, tc.kind)
			id := ids[len(ids)/2]
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f := raw[id*4096 : (id+1)*4096]
			binary.NativeEndian.PutUint32(f[16+16+tc.field:], 0x7fff0000) // element 1
			overwritePage(t, path, id, f)
			before := fileSum(t, path)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for _, ro := range []bool{false, true} {
				d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: ro})
				if err == nil {
					s := metastore.New(d)
					s.Put(t.Context(), "tbl/k01500", []byte("x"))
					s.Close()
					t.Fatalf("read-only %v: Open accepted a page whose element runs past it", ro)
				}
				if !errors.Is(err, boltstore.ErrDamaged) || !strings.Contains(err.Error(), "runs past its page") {
					t.Fatalf("read-only %v: %v, want ErrDamaged naming the element", ro, err)
				}
			}
			runtime.ReadMemStats(&m1)
			if grown := m1.TotalAlloc - m0.TotalAlloc; grown > 64<<20 {
				t.Fatalf("Open allocated %d MiB", grown>>20)
			}
			if fileSum(t, path) != before {
				t.Fatal("the file changed")
			}
		})
	}
}
