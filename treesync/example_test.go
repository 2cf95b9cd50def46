package treesync_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/treesync"
)

// Sync a working tree with the datastore: a file written in one directory
// is pushed (under the lock, fenced by its token) and pulled into another.
func ExampleTree_Sync() {
	dir, err := os.MkdirTemp("", "lake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	ds, err := dsurl.Open(ctx, "bolt://"+filepath.Join(dir, "lake.db"), &dsurl.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	defer ds.Close()

	const path = "data/command/shell/u1/result/1/raw"
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{filepath.Join(a, filepath.Dir(path)), b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a, path), []byte("rows: 3\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	treeA, err := treesync.Open(a, ds, nil)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := treeA.Sync(ctx, treesync.Scope{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a: committed", rep.Committed, "under token", rep.Token)

	treeB, err := treesync.Open(b, ds, nil)
	if err != nil {
		log.Fatal(err)
	}
	rep, err = treeB.Sync(ctx, treesync.Scope{})
	if err != nil {
		log.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(b, path))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("b: downloaded %d: %s", rep.Downloaded, got)
	// Output:
	// a: committed 1 under token 4294967297
	// b: downloaded 1: rows: 3
}
