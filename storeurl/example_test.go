package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/storeurl"
)

// Open a store from its URL (here a bolt file, created on first use; the
// same code takes dynamodb://TABLE or http://HOST:PORT), then write, read,
// compare-and-swap and list.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "lake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := storeurl.Open(ctx, "bolt://"+filepath.Join(dir, "lake.db"), &storeurl.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	if err := store.Put(ctx, "tbl/orders", []byte(`{"location":"s3://lake/orders"}`)); err != nil {
		log.Fatal(err)
	}
	v, err := store.Get(ctx, "tbl/orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("get: %s\n", v)

	// CAS writes only if the key holds exactly the expected bytes.
	err = store.CAS(ctx, "tbl/orders", metastore.ExpectValue(v), []byte(`{"location":"s3://lake/orders2"}`))
	fmt.Println("cas from the value read:", err)
	err = store.CAS(ctx, "tbl/orders", metastore.ExpectValue(v), []byte(`{"location":"s3://lake/orders3"}`))
	fmt.Println("cas from a stale value is a conflict:", errors.Is(err, metastore.ErrConflict))
	err = store.CAS(ctx, "tbl/users", metastore.ExpectAbsent(), []byte(`{"location":"s3://lake/users"}`))
	fmt.Println("create if absent:", err)

	items, err := store.ListAll(ctx, "tbl/")
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range items {
		fmt.Printf("%s = %s\n", it.Key, it.Value)
	}

	_, err = store.Get(ctx, "tbl/missing")
	fmt.Println("missing:", errors.Is(err, metastore.ErrNotFound))
	// Output:
	// get: {"location":"s3://lake/orders"}
	// cas from the value read: <nil>
	// cas from a stale value is a conflict: true
	// create if absent: <nil>
	// tbl/orders = {"location":"s3://lake/orders2"}
	// tbl/users = {"location":"s3://lake/users"}
	// missing: true
}

// List reads one page at a time: pass the cursor back until it is empty.
func ExampleOpen_list() {
	dir, err := os.MkdirTemp("", "lake-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := storeurl.Open(ctx, "bolt://"+filepath.Join(dir, "lake.db"), &storeurl.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	for _, k := range []string{"tbl/a", "tbl/b", "tbl/c"} {
		if err := store.Put(ctx, k, []byte("v")); err != nil {
			log.Fatal(err)
		}
	}
	var keys []string
	cursor := ""
	for pages := 0; pages < 100; pages++ { // bounded: a page may be empty while a cursor remains
		page, err := store.List(ctx, "tbl/", 2, cursor)
		if err != nil {
			log.Fatal(err)
		}
		for _, it := range page.Items {
			keys = append(keys, it.Key)
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	sort.Strings(keys) // pages are sorted within themselves only
	fmt.Println(keys)
	// Output:
	// [tbl/a tbl/b tbl/c]
}
