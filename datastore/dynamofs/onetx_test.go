package dynamofs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// writesRecord reports whether w writes a staged commit's record or entry
// list (an item of pk o#ID).
func writesRecord(w types.TransactWriteItem) bool {
	var k map[string]types.AttributeValue
	switch {
	case w.Put != nil:
		k = w.Put.Item
	case w.Update != nil:
		k = w.Update.Key
	default:
		return false
	}
	pk, _ := k["pk"].(*types.AttributeValueMemberS)
	return pk != nil && strings.Contains(pk.Value, "o#") && !strings.HasSuffix(pk.Value, "o#")
}

// TestCommitThatFitsIsOneWrite (issue 31): a commit of more entries than
// the worst case MaxCommit allows, whose items fit in one transaction
// (new small files), is that one transaction, with no commit record; one
// that looked as if it fit but needs more once read (replaced versions in
// chunks, each with its reclaim entry) is staged, and lands whole.
func TestCommitThatFitsIsOneWrite(t *testing.T) {
	ctx := t.Context()
	api := &tailAPI{API: ddb.NewClient(ddblocal.Config(t), "")}
	s, _ := smallStoreOver(t, api, 0)
	sent := func() [][]types.TransactWriteItem {
		api.mu.Lock()
		defer api.mu.Unlock()
		out := api.sent
		api.sent = nil
		return out
	}

	var entries []datastore.Entry
	for m := range 3 {
		entries = append(entries, uploadAll(t, s, fmt.Sprintf("data/w/%d", m), 10, "small")...)
	}
	sent()
	if _, err := s.Commit(ctx, nil, entries); err != nil {
		t.Fatal(err)
	}
	if txs := sent(); len(txs) != 1 || slices.ContainsFunc(txs[0], writesRecord) {
		t.Fatalf("a commit of 30 new small files sent %d transactions; want one, without a commit record", len(txs))
	}
	if files, err := s.ListAll(ctx, "data/w/"); err != nil || len(files) != 30 {
		t.Fatalf("%d files listed (%v); want 30", len(files), err)
	}

	// 40 data files in chunks, put 10 at a time, then replaced in one
	// commit: before its read each looks like its item and its intent's,
	// once read each replaced version adds its reclaim entry.
	big := strings.Repeat("x", datastore.InlineMax+1)
	name := func(i int) string { return fmt.Sprintf("data/w/9/res/1/f%02d", i) }
	for quarter := range 4 {
		var es []datastore.Entry
		for i := range 10 {
			st, err := s.Upload(ctx, name(quarter*10+i), strings.NewReader(big), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		if _, err := s.Commit(ctx, nil, es); err != nil {
			t.Fatal(err)
		}
	}
	var again []datastore.Entry
	for i := range 40 {
		st, err := s.Upload(ctx, name(i), strings.NewReader(big+"2"), nil)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, datastore.Entry{Put: &st})
	}
	sent()
	if _, err := s.Commit(ctx, nil, again); err != nil {
		t.Fatal(err)
	}
	staged := false
	for _, tx := range sent() {
		staged = staged || slices.ContainsFunc(tx, writesRecord)
	}
	if !staged {
		t.Fatal("a commit replacing 40 versions in chunks was not staged; its reclaim entries do not fit one transaction")
	}
	for i := range 40 {
		_, got, err := s.Get(ctx, name(i))
		if err != nil || string(got) != big+"2" {
			t.Fatalf("%s after the replacing commit: %d bytes (%v); want the new version", name(i), len(got), err)
		}
	}
	ch, upTo, err := s.Changes(ctx, "w/9", 0, 100)
	if err != nil || len(ch) != 40 || upTo != 80 {
		t.Fatalf("w/9's feed: %d changes up to %d (%v); want 40 up to 80", len(ch), upTo, err)
	}
}
