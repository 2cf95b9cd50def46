package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/storeurl"
)

// Acquire a lock on a store, write through it (the store refuses the write
// once another holder took the lock over), and see that every acquisition's
// fencing token is larger than the last.
func ExampleLocker_Acquire() {
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

	locker, err := lock.New(lock.Metastore(store), &lock.Options{Wait: lock.NoWait})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locker.Acquire(ctx, "team-a/sync")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token:", lease.Token())
	// A write fenced on the lock: applied only while this lease holds it.
	err = lease.Write(ctx, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectAbsent(), Value: []byte("v1")})
	fmt.Println("fenced write:", err)

	// A second acquisition while it is held fails at once (NoWait).
	_, err = locker.Acquire(ctx, "team-a/sync")
	fmt.Println("held:", errors.Is(err, lock.ErrTimeout))

	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// After the release the old lease writes nothing.
	err = lease.Write(ctx, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectValue([]byte("v1")), Value: []byte("v2")})
	fmt.Println("write after release refused:", err != nil)

	next, err := locker.Acquire(ctx, "team-a/sync")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	fmt.Println("next token:", next.Token(), "larger:", next.Token() > lease.Token())
	// Output:
	// token: 4294967297
	// fenced write: <nil>
	// held: true
	// write after release refused: true
	// next token: 4294967298 larger: true
}
