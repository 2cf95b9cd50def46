package boltstore_test

import (
	"testing"

	"github.com/lakemeta/lake/metastore/boltstore"
)

// BenchmarkOpenReadOnly measures what a `lake get` pays to open a store of
// fixtureKeys keys (about 6 MiB): the meta-page and length checks, bbolt's
// open and map, and the bucket check.
func BenchmarkOpenReadOnly(b *testing.B) {
	path := bigStore(b)
	for b.Loop() {
		d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
}

// BenchmarkCheck measures `lake check` on the same store; MB/s is of the
// pages in use.
func BenchmarkCheck(b *testing.B) {
	path := bigStore(b)
	rep, err := boltstore.Check(path, 0)
	if err != nil || !rep.Sound() {
		b.Fatal(rep, err)
	}
	b.SetBytes(int64(rep.Pages) * int64(rep.PageSize))
	for b.Loop() {
		if _, err := boltstore.Check(path, 0); err != nil {
			b.Fatal(err)
		}
	}
}
