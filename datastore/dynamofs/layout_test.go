package dynamofs_test

import (
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// Under the models layout no prefix under data/ pins a partition, so a
// listing reads the registry; a partition's own files are one Query of its
// item collection, never the registry (issue 30): what the catalog fold and
// a pull's resync read for each changed model.
func TestListPartitionReadsOnePartition(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	for _, p := range []string{"data/command/shell/u1/model.yaml", "data/command/shell/u1/result/1/raw",
		"data/command/shell/u2/result/1/raw", "data/command/shell/u1/1/raw"} {
		if _, err := s.Put(ctx, p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := d.Stats()
	files, err := s.ListPartitionAll(ctx, "command/shell/u1", "")
	if err != nil || len(files) != 2 {
		t.Fatalf("ListPartitionAll = %v, %v", files, err)
	}
	if got := d.Stats().Sub(before); got.TotalRequests() != 1 || got.Requests["Query"] != 1 {
		t.Fatalf("ListPartitionAll of one model cost %v, want one Query", got.Requests)
	}
	before = d.Stats()
	listed, err := s.ListAll(ctx, "data/command/shell/u1/")
	if err != nil || len(listed) != 3 {
		t.Fatalf("ListAll = %v, %v", listed, err)
	}
	// Two partitions hold files under data/command/shell/u1/ (u1 and
	// command/shell): each page (one per partition) reads the registry and
	// queries one partition.
	if got := d.Stats().Sub(before); got.Requests["BatchGetItem"] != 2 || got.Requests["Query"] != 2 || got.TotalRequests() != 4 {
		t.Fatalf("ListAll of a model's directory cost %v, want 2 BatchGetItem (the registry) and 2 Query", got.Requests)
	}
}
