package dynamofs_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
)

// faultyPair opens one table twice: through faultapi (the store under test)
// and directly (another process's store, for racing it).
func faultyPair(t *testing.T) (*faultapi.API, *datastore.Store, *datastore.Store) {
	t.Helper()
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	faulty := faultapi.New(api, nil)
	open := func(api ddb.API) *datastore.Store {
		d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		return datastore.New(d)
	}
	return faulty, open(faulty), open(api)
}

// fill puts k one-chunk files into partition's model, 20 to a commit.
func fill(t testing.TB, s *datastore.Store, partition string, k int) {
	t.Helper()
	ctx := context.Background()
	var es []datastore.Entry
	for i := range k {
		st, err := s.Upload(ctx, fmt.Sprintf("data/%s/f%04d", partition, i), strings.NewReader(oneChunk(fmt.Sprint(i))), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	if _, err := s.Commit(ctx, nil, es); err != nil {
		t.Fatal(err)
	}
}

// TestDropPartitionRacingCommit lets another writer commit to the partition
// just before the drop's transaction reaches DynamoDB: the drop fails with a
// conflict (not a fence conflict) and the racing commit is kept; dropping
// again drops it too.
func TestDropPartitionRacingCommit(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"new-path", "data/m/1/late"},   // the head's seq condition catches it
		{"same-path", "data/m/1/f0000"}, // the file's pos condition catches it
	} {
		t.Run(tc.name, func(t *testing.T) {
			faulty, s, other := faultyPair(t)
			ctx := t.Context()
			fill(t, s, "m/1", 3)
			var once sync.Once
			faulty.SetPlan(func(op, _ string) faultapi.Fault {
				if op == "TransactWriteItems" {
					once.Do(func() {
						if _, err := other.Put(ctx, tc.path, strings.NewReader("late"), nil); err != nil {
							t.Errorf("racing commit: %v", err)
						}
					})
				}
				return faultapi.None
			})
			_, err := s.DropPartition(ctx, nil, "m/1")
			if !errors.Is(err, metastore.ErrConflict) || datastore.IsFenceConflict(err) {
				t.Fatalf("drop raced by a commit: %v; want a conflict that is not the fence's", err)
			}
			if _, got, err := s.Get(ctx, tc.path); err != nil || string(got) != "late" {
				t.Fatalf("the racing commit's file reads %q, %v; want it kept", got, err)
			}
			faulty.SetPlan(nil)
			st, err := s.DropPartition(ctx, nil, "m/1")
			if err != nil || st.Files == 0 {
				t.Fatalf("dropping again = %+v, %v", st, err)
			}
			if files, err := s.ListAll(ctx, ""); err != nil || len(files) != 0 {
				t.Fatalf("after the second drop %d files remain, %v", len(files), err)
			}
			if p, err := s.Partitions(ctx); err != nil || len(p) != 0 {
				t.Fatalf("after the second drop Partitions = %v, %v", p, err)
			}
			// The drop forgot the registration: a new commit registers again.
			if _, err := s.Put(ctx, "data/m/1/again", strings.NewReader("a"), nil); err != nil {
				t.Fatal(err)
			}
			if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
				t.Fatalf("after a commit to the dropped partition Partitions = %v, %v", p, err)
			}
		})
	}
}

// TestDropPartitionCrashFinishes stops a drop of 150 files (four
// transactions) at its second transaction, as a crash would: some files are
// gone, the partition is still registered; a second call finishes it, and
// Reclaim then deletes each dropped version once.
func TestDropPartitionCrashFinishes(t *testing.T) {
	faulty, s, _ := faultyPair(t)
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	const k = 150
	fill(t, s, "m/big", k)
	fill(t, s, "m/kept", 2)
	crashed, cancel := context.WithCancel(ctx)
	var tokens []string
	faulty.SetPlan(func(op, token string) faultapi.Fault {
		if op != "TransactWriteItems" {
			return faultapi.None
		}
		if len(tokens) == 0 || tokens[len(tokens)-1] != token {
			tokens = append(tokens, token)
		}
		if len(tokens) == 2 {
			cancel()
			return faultapi.DropRequest
		}
		return faultapi.None
	})
	first, err := s.DropPartition(crashed, nil, "m/big")
	if err == nil {
		t.Fatal("the crashed drop succeeded")
	}
	faulty.SetPlan(nil)
	files, err := s.ListAll(ctx, "data/m/big/")
	if err != nil || len(files) == 0 || len(files) == k {
		t.Fatalf("after the crash %d of %d files remain, %v; want some dropped, some not", len(files), k, err)
	}
	if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/big,m/kept" {
		t.Fatalf("after the crash Partitions = %v, %v; want m/big still registered", p, err)
	}
	second, err := s.DropPartition(ctx, nil, "m/big")
	if err != nil || first.Files+second.Files != k {
		t.Fatalf("the second drop = %+v after %+v, %v; want %d files in all", second, first, err, k)
	}
	if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/kept" {
		t.Fatalf("after the second drop Partitions = %v, %v", p, err)
	}
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	if rs, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil || rs.Versions != k || rs.Chunks != k {
		t.Fatalf("Reclaim = %+v, %v; want each of the %d dropped versions once", rs, err, k)
	}
}

// TestDropPartitionCost prints what dropping a partition of k one-chunk
// files costs: one BatchGetItem (the head, and data's, whose subs name the
// model), one Query page per 1 MB of file
// items, and one TransactWriteItems per 48 files (a file is its delete and
// its version's reclaim entry; the last one also deletes the head and the
// registry entry). It asserts the request counts, not the time.
//
//	go test -run TestDropPartitionCost -v ./datastore/dynamofs/
func TestDropPartitionCost(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	if err := s.Records().CASRecord(ctx, "rec/ns/sync", metastore.ExpectAbsent(), []byte("t")); err != nil {
		t.Fatal(err)
	}
	fence := &datastore.Fence{Key: "rec/ns/sync", Token: []byte("t")}
	t.Logf("%6s  %s", "files", "requests by operation; items read; items written")
	for _, k := range []int{0, 1, 10, 48, 49, 100, 250} {
		part := fmt.Sprintf("cost/k%d", k)
		fill(t, s, part, k)
		before := d.Stats()
		st, err := s.DropPartition(ctx, fence, part)
		if err != nil || st.Files != k {
			t.Fatalf("drop of %d files = %+v, %v", k, st, err)
		}
		c := d.Stats().Sub(before)
		var ops []string
		for op, n := range c.Requests {
			ops = append(ops, fmt.Sprintf("%s %d", op, n))
		}
		sort.Strings(ops)
		t.Logf("%6d  %s; %d items read; %d items written", k, strings.Join(ops, ", "), c.ItemsRead, c.ItemsWritten)
		wantTx := int64(max(1, (k+47)/48))
		// Each file and its reclaim entry, the head (or, with none, the
		// check that none appeared: registry.go), the registry entry,
		// the fence in each transaction, and, for a model that claimed
		// data (every k but 0), its name removed from data's subs.
		wantWritten := 2*k + 1 + 1 + int(wantTx)
		if k > 0 {
			wantWritten++
		}
		// The head is read with data's (the claims it removes) in one
		// BatchGetItem.
		if c.Requests["BatchGetItem"] != 1 || c.Requests["Query"] != 1 || c.Requests["TransactWriteItems"] != wantTx || c.TotalRequests() != 2+wantTx ||
			c.ItemsWritten != int64(wantWritten) {
			t.Fatalf("drop of %d files: %v; %d items written; want 1 BatchGetItem, 1 Query, %d TransactWriteItems, %d items written",
				k, c.Requests, c.ItemsWritten, wantTx, wantWritten)
		}
	}
}

// TestDropPartitionInNamespace drops a partition in one namespace: the
// same partition of the root and of another namespace keeps its files,
// head and registration, and the root's registration cache is untouched
// (a root commit after the drop is still listed).
func TestDropPartitionInNamespace(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	a, err := s.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Namespace("beta")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*datastore.Store{s, a, b} {
		fill(t, ns, "m/1", 3)
	}
	if st, err := a.DropPartition(ctx, nil, "m/1"); err != nil || st.Files != 3 {
		t.Fatalf("alpha's drop = %+v, %v", st, err)
	}
	if files, err := a.ListAll(ctx, ""); err != nil || len(files) != 0 {
		t.Fatalf("alpha lists %d files after the drop, %v", len(files), err)
	}
	for name, ns := range map[string]*datastore.Store{"root": s, "beta": b} {
		if files, err := ns.ListAll(ctx, ""); err != nil || len(files) != 3 {
			t.Fatalf("%s lists %d files after alpha's drop, %v; want 3", name, len(files), err)
		}
		if h, err := ns.Head(ctx, "m/1"); err != nil || h.Seq != 3 {
			t.Fatalf("%s's head after alpha's drop = %+v, %v", name, h, err)
		}
		if _, err := ns.Put(ctx, "data/m/1/more", strings.NewReader("m"), nil); err != nil {
			t.Fatal(err)
		}
		if p, err := ns.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
			t.Fatalf("%s's partitions after alpha's drop = %v, %v", name, p, err)
		}
	}
	if p, err := a.Partitions(ctx); err != nil || len(p) != 0 {
		t.Fatalf("alpha's partitions after its drop = %v, %v", p, err)
	}
}

// TestGuardedDropReadsNoDefinitionFirst (issue 31): the lifecycle's drop
// of a model whose definition is deleted judges the definition by the
// drop's own Query of the model: a Query and one transaction, no read of
// the definition before them (a TransactGetItems, when the datastore
// checked it with a Stat first). The hostile peer: a writer that defines
// the model again between the drop's Query and its transaction makes the
// transaction fail its conditions: a conflict, and nothing of the model
// removed.
func TestGuardedDropReadsNoDefinitionFirst(t *testing.T) {
	ctx := t.Context()
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	var before atomic.Pointer[func()]
	api := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		if f := before.Load(); f != nil && op == "TransactWriteItems" {
			before.Store(nil)
			(*f)()
		}
		return faultapi.None
	})
	d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	od, err := dynamofs.Open(ctx, ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	other := datastore.New(od)
	model := func(name string) {
		t.Helper()
		for _, p := range []string{"model.yaml", "out0/1/raw", "out1/1/raw"} {
			if _, err := s.Put(ctx, "data/m/"+name+"/"+p, strings.NewReader(p), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Delete(ctx, "data/m/"+name+"/model.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	model("gone")
	was := d.Stats()
	st, dropped, err := s.DropPartitionIfDeleted(ctx, nil, "m/gone", "data/m/gone/model.yaml")
	cost := d.Stats().Sub(was)
	if err != nil || !dropped || st.Files != 2 {
		t.Fatalf("DropPartitionIfDeleted = %+v, %v, %v; want the model's 2 files dropped", st, dropped, err)
	}
	if cost.Requests["TransactGetItems"] != 0 || cost.Requests["GetItem"] != 0 || cost.Requests["Query"] != 1 || cost.Requests["TransactWriteItems"] != 1 {
		t.Errorf("a guarded drop sent %v; want one Query and one TransactWriteItems, no read of the definition", cost.Requests)
	}

	model("back")
	redefine := func() {
		if _, err := other.Put(ctx, "data/m/back/model.yaml", strings.NewReader("again"), nil); err != nil {
			t.Errorf("redefine: %v", err)
		}
	}
	before.Store(&redefine)
	_, dropped, err = s.DropPartitionIfDeleted(ctx, nil, "m/back", "data/m/back/model.yaml")
	if !errors.Is(err, metastore.ErrConflict) || dropped {
		t.Fatalf("a drop whose guard was defined again meanwhile: dropped %v, %v; want a conflict", dropped, err)
	}
	files, err := s.ListAll(ctx, "data/m/back/")
	if err != nil || len(files) != 3 {
		t.Fatalf("after the refused drop the model lists %d files, %v; want its 3", len(files), err)
	}
	if _, dropped, err = s.DropPartitionIfDeleted(ctx, nil, "m/back", "data/m/back/model.yaml"); err != nil || dropped {
		t.Fatalf("dropping the model defined again: dropped %v, %v; want skipped", dropped, err)
	}
}
