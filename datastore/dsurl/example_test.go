package dsurl_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/lakemeta/lake/datastore/dsurl"
)

// Open the datastore named by a store URL (a bolt file here; dynamodb://,
// s3:// and a node's http:// work the same), put a file, read it back, and
// read its model's change feed from a position: exactly what changed since.
func ExampleOpen() {
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
	first, err := ds.Put(ctx, path, strings.NewReader(`{"rows":3}`), []byte(`{"content-type":"application/json"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("put:", first.Path, "in partition", first.Partition, "at position", first.Pos, "size", first.Size)

	info, content, err := ds.Get(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("get: %s (meta %s)\n", content, info.Meta)

	if _, err := ds.Put(ctx, path, strings.NewReader(`{"rows":4}`), nil); err != nil {
		log.Fatal(err)
	}
	// The feed after the first put holds only the second: a puller that
	// remembers its position reads what changed, never the history.
	changes, next, err := ds.Changes(ctx, first.Partition, first.Pos, 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range changes {
		fmt.Println("changed:", c.Path, "at position", c.Pos, "size", c.Size)
	}
	fmt.Println("next position:", next)
	// Output:
	// put: data/command/shell/u1/result/1/raw in partition command/shell/u1 at position 1 size 10
	// get: {"rows":3} (meta {"content-type":"application/json"})
	// changed: data/command/shell/u1/result/1/raw at position 2 size 10
	// next position: 2
}
