package dynamofs_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// TestStagedCommitPacksTransactions (issue 31): a commit of 250 new files
// is staged as many entries a transaction as fit (not MaxCommit), settled
// likewise, and its entry lists deleted with its live-set id in one
// transaction; every file
// is then visible. A commit whose entries carry large metadata is split by
// size instead, and lands whole too.
func TestStagedCommitPacksTransactions(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	var sent map[string]int64
	commit := func(paths []string, meta []byte) {
		t.Helper()
		before := d.Stats()
		var es []datastore.Entry
		for _, p := range paths {
			st, err := s.Upload(ctx, p, strings.NewReader(p), meta)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		if _, err := s.Commit(ctx, nil, es); err != nil {
			t.Fatal(err)
		}
		sent = d.Stats().Sub(before).Requests
		for _, p := range paths {
			got, err := s.Stat(ctx, p)
			if err != nil || !bytes.Equal(got.Meta, meta) {
				t.Fatalf("stat %s after the commit: %v (metadata %d bytes, want %d)", p, err, len(got.Meta), len(meta))
			}
		}
	}
	var paths []string
	for i := range 250 {
		// Deep paths (no model's directory): one item each.
		paths = append(paths, fmt.Sprintf("data/t/p%d/d/n/f%03d", i%3, i))
	}
	commit(paths, nil)
	got := sent
	// 3 or 4 staging transactions (the first also creates the record
	// and registers the 3 partitions), 3 roll-forward transactions (the
	// first carries the flip), the index entries, the entry lists,
	// record and live set together: 9; no read of what the writer
	// staged (settleOwn).
	if got["TransactWriteItems"] > 9 || got["BatchWriteItem"] > 0 || got["UpdateItem"] > 0 || got["GetItem"] > 0 {
		t.Fatalf("a commit of 250 new files sent %d TransactWriteItems and %d BatchWriteItem, want at most 9 and none, and no UpdateItem or GetItem: %v",
			got["TransactWriteItems"], got["BatchWriteItem"], got)
	}
	page, err := s.List(ctx, "data/t/p1/", 1000, "")
	if err != nil || len(page.Files) != 83 {
		t.Fatalf("list data/t/p1/: %d files, %v; want 83", len(page.Files), err)
	}

	// 60 entries of 60 KiB metadata (twice that staged over an old
	// state): more than one transaction's 4 MB, fewer than its 100 items.
	meta := bytes.Repeat([]byte("m"), 60<<10)
	commit(paths[:60], meta)
	commit(paths[:60], meta) // each staged item carries its old state too
}

// TestStagedBatchesCarryPartitionReads (issue 31): the staging
// transactions of one commit read a partition once for their clash checks
// (the first), the later ones carrying its live paths while its head is
// as the previous one left it. A foreign writer (another client on the
// same table) committing a file below a path of the last batch after that
// batch was built moves the head: the transaction fails, the batch reads
// the partition again and the commit is refused naming both paths.
func TestStagedBatchesCarryPartitionReads(t *testing.T) {
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	d, s := anotherProcess(t, table) // claims_test.go
	_, foreign := anotherProcess(t, table)
	ctx := t.Context()
	entries := func(dir string) []datastore.Entry {
		var es []datastore.Entry
		for i := range 250 {
			st, err := s.Upload(ctx, fmt.Sprintf("%s/f%03d", dir, i), strings.NewReader("x"), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		return es
	}
	if _, err := s.Put(ctx, "top/zz", strings.NewReader("z"), nil); err != nil { // registers the partition
		t.Fatal(err)
	}
	before := d.Stats()
	if _, err := s.Commit(ctx, nil, entries("top/ok")); err != nil {
		t.Fatal(err)
	}
	if got := d.Stats().Sub(before).Requests; got["Query"] != 1 || got["TransactWriteItems"] < 5 {
		t.Fatalf("a staged commit of 250 new files in one partition: %v, want one Query (and several staging transactions)", got)
	}

	es := entries("top/cb")
	writes, fired := 0, false
	d.SetWriteFault(func() error {
		// 1, 2: the first two batches (the first also creates the
		// record); 3: the last, built from the carried paths.
		if writes++; writes != 3 {
			return nil
		}
		fired = true
		_, err := foreign.Put(ctx, "top/cb/f200/below", strings.NewReader("b"), nil)
		return err
	})
	_, err := s.Commit(ctx, nil, es)
	d.SetWriteFault(nil)
	if !fired {
		t.Fatalf("the foreign commit never ran (%d writes)", writes)
	}
	if cl, ok := datastore.AsClash(err); !ok || cl.Path != "top/cb/f200" || cl.Other != "top/cb/f200/below" {
		t.Fatalf("a staged commit over a directory another client filled after its last batch was built: %v, want a clash naming both", err)
	}
	for _, p := range []string{"top/cb/f000", "top/cb/f200"} {
		if _, err := s.Stat(ctx, p); err == nil {
			t.Fatalf("%s of the refused commit is visible", p)
		}
	}
}

// TestOlderEntryItemsSettle: a commit staged by an older release lists its
// entries as one o#ID/e#PATH item each, not one b# item a staging
// transaction. Its writer died (at the flip, or right after it); the
// entry lists are rewritten in the older form with raw SDK calls, and
// Reclaim settles the commit from them: rolled back (never flipped: no
// file visible) or forward (every file visible, an intent of a chunked
// file released), and nothing of the commit's own items is left.
func TestOlderEntryItemsSettle(t *testing.T) {
	for _, flipped := range []bool{false, true} {
		t.Run(fmt.Sprintf("flipped=%v", flipped), func(t *testing.T) {
			raw := ddblocal.Client(t)
			table := ddblocal.TableName(t)
			ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
			d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table, MaxCommit: 4, CommitWindow: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			s := datastore.New(d)
			t.Cleanup(func() { s.Close() })
			ctx := t.Context()
			if _, err := s.Put(ctx, "top/zz", strings.NewReader("z"), nil); err != nil { // registers the partition
				t.Fatal(err)
			}
			// More files than the flip's transaction settles with it
			// (98), so that some are left staged after it.
			const files, batches = 110, 28 // MaxCommit 4
			var es []datastore.Entry
			want := map[string]string{}
			for i := range files {
				p, body := fmt.Sprintf("top/ol/f%03d", i), fmt.Sprint(i)
				if i == 3 {
					body = strings.Repeat("c", datastore.InlineMax+1) // chunked: an upload intent
				}
				st, err := s.Upload(ctx, p, strings.NewReader(body), nil)
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, datastore.Entry{Put: &st})
				want[p] = body
			}
			// Writes: 1-28 the staging batches (the first also creates
			// the record and registers the partition, whatever the
			// process's cache says), 29 the flip with the first 98
			// files' roll-forward, 30 the next roll-forward
			// transaction.
			writes, dieAt := 0, map[bool]int{false: batches + 1, true: batches + 2}[flipped]
			d.SetWriteFault(func() error {
				if writes++; writes >= dieAt {
					return errors.New("killed")
				}
				return nil
			})
			_, err = s.Commit(ctx, nil, es)
			d.SetWriteFault(nil)
			if flipped != (err == nil) {
				t.Fatalf("commit dying at write %d: %v", dieAt, err)
			}
			// The older form: each b# item's entries as e#PATH items.
			scan := func() []map[string]types.AttributeValue {
				out, err := raw.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
				if err != nil {
					t.Fatal(err)
				}
				var its []map[string]types.AttributeValue
				for _, it := range out.Items {
					if pk := it["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "o#") && pk != "o#" {
						its = append(its, it)
					}
				}
				return its
			}
			lists := 0
			for _, it := range scan() {
				sk := it["sk"].(*types.AttributeValueMemberS).Value
				if !strings.HasPrefix(sk, "b#") {
					continue
				}
				lists++
				for _, v := range it["es"].(*types.AttributeValueMemberL).Value {
					m := v.(*types.AttributeValueMemberM).Value
					e := map[string]types.AttributeValue{"pk": it["pk"], "sk": sv("e#" + m["p"].(*types.AttributeValueMemberS).Value)}
					if m["ipk"] != nil {
						e["ipk"], e["isk"] = m["ipk"], m["isk"]
					}
					if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: e}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
					t.Fatal(err)
				}
			}
			if lists != batches {
				t.Fatalf("%d entry-list items, want %d (one per staging transaction)", lists, batches)
			}
			time.Sleep(5 * time.Millisecond) // past the commit window
			if _, err := s.Reclaim(ctx, datastore.ReclaimOptions{}); err != nil {
				t.Fatal(err)
			}
			for p, body := range want {
				_, b, err := s.Get(ctx, p)
				if !flipped {
					if err == nil {
						t.Fatalf("%s of a commit never flipped is visible after it was settled", p)
					}
					continue
				}
				if err != nil || string(b) != body {
					t.Fatalf("get %s of a flipped commit: %d bytes, %v; want %d", p, len(b), err, len(body))
				}
			}
			if left := scan(); len(left) != 0 {
				t.Fatalf("the settled commit left %d of its items: %v", len(left), left)
			}
		})
	}
}

// TestConcurrentStagedCommitsOnePartition: two clients (separate drivers,
// as two processes) each commit 150 new files to one partition in staged
// commits at once, while a third puts, at the same time, a file at a
// directory the first's last batch fills. The staging transactions race
// on the partition's head; each that loses reads again (its carried paths
// no longer match the head), so both big commits land whole unless one is
// refused naming the third's file, and the partition's feed holds every
// change once.
func TestConcurrentStagedCommitsOnePartition(t *testing.T) {
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	open := func() *datastore.Store {
		d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		return s
	}
	ctx := t.Context()
	stores := []*datastore.Store{open(), open(), open()}
	entries := func(s *datastore.Store, dir string) []datastore.Entry {
		var es []datastore.Entry
		for i := range 150 {
			st, err := s.Upload(ctx, fmt.Sprintf("%s/f%03d", dir, i), strings.NewReader(dir), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		return es
	}
	a, b := entries(stores[0], "top/cc/a"), entries(stores[1], "top/cc/b")
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, es := range [][]datastore.Entry{a, b} {
		wg.Go(func() { _, errs[i] = stores[i].Commit(ctx, nil, es) })
	}
	wg.Go(func() { _, errs[2] = stores[2].Put(ctx, "top/cc/a/f140/x", strings.NewReader("x"), nil) })
	wg.Wait()
	if errs[1] != nil {
		t.Fatalf("the commit beside them: %v", errs[1])
	}
	t.Logf("the commit over the put's directory: %v; the put: %v", errs[0], errs[2])
	want := 150
	switch cl0, ok0 := datastore.AsClash(errs[0]); {
	case errs[0] == nil && errs[2] == nil:
		t.Fatal("both the commit of top/cc/a/f140 and the put of top/cc/a/f140/x landed")
	case errs[0] == nil:
		if cl, ok := datastore.AsClash(errs[2]); !ok || cl.Path != "top/cc/a/f140/x" || cl.Other != "top/cc/a/f140" {
			t.Fatalf("the put below a file the commit made: %v, want a clash naming both", errs[2])
		}
		want += 150
	case errs[2] == nil:
		if !ok0 || cl0.Path != "top/cc/a/f140" || cl0.Other != "top/cc/a/f140/x" {
			t.Fatalf("the commit over the put's directory: %v, want a clash naming both", errs[0])
		}
		want++
	default:
		t.Fatalf("neither landed: %v; %v", errs[0], errs[2])
	}
	var n int
	for cur := ""; ; {
		page, err := stores[2].List(ctx, "top/cc/", 1000, cur)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Files)
		if cur = page.Cursor; cur == "" {
			break
		}
	}
	if n != want {
		t.Fatalf("%d files under top/cc/, want %d", n, want)
	}
}

// TestStagedCommitOfNothing: a commit larger than one transaction whose
// every entry changes nothing (deletes of absent paths) writes nothing,
// not even its record (which the first staging transaction that changes
// something creates), answers for its fence, and leaves no item behind.
func TestStagedCommitOfNothing(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	var es []datastore.Entry
	for i := range 40 {
		es = append(es, datastore.Entry{Delete: fmt.Sprintf("top/none/f%02d", i)})
	}
	if infos, err := s.Commit(ctx, nil, es); err != nil || len(infos) != 0 {
		t.Fatalf("a commit of 40 deletes of absent paths: %v, %v; want nothing done", infos, err)
	}
	if err := s.Records().CASRecord(ctx, "lock/none", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(ctx, &datastore.Fence{Key: "lock/none", Token: []byte("t0")}, es)
	if !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("the same under a stale fence: %v, want a conflict", err)
	}
	out, err := raw.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if pk := it["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "o#") {
			t.Fatalf("a commit that changed nothing left %v", it)
		}
	}
}
