package dynamofs_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
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
