package dynamofs_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestStagedCommitPacksTransactions (issue 31): a commit of 250 new files
// is staged as many entries a transaction as fit (not MaxCommit), settled
// likewise, and its entry list deleted in one BatchWriteItem; every file
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
	// The registry (3 partitions), the record, 3 or 4 staging
	// transactions, the flip, 3 roll-forward transactions, the index
	// entries, the live set: 12; no read of what the writer staged
	// (settleOwn).
	if got["TransactWriteItems"] > 12 || got["BatchWriteItem"] > 1 || got["UpdateItem"] > 0 || got["GetItem"] > 0 {
		t.Fatalf("a commit of 250 new files sent %d TransactWriteItems and %d BatchWriteItem, want at most 12 and 1, and no UpdateItem or GetItem: %v",
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
	open := func() (*dynamofs.Driver, *datastore.Store) {
		d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		return d, s
	}
	d, s := open()
	_, foreign := open()
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
		// 1: the record; 2, 3: the first two batches; 4: the last, built
		// from the carried paths.
		if writes++; writes != 4 {
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
