package s3fs_test

import (
	"fmt"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestChangedPartitionsOverOwnCommit (issue 31): right after its own commit
// of one log object, a process knows the partitions changed past the
// cursor it last read without a LIST, and only when provable: the answer is
// then the read's; another process's commit to the same partition first,
// a raw S3 client rewriting the head, a cursor not last read, or a staged
// commit of several objects in one partition are not answered; another
// process's commit to another partition is left past the cursor, and the
// next read reports it. A staged commit of one object a partition (with a
// new model's claim) is answered.
func TestChangedPartitionsOverOwnCommit(t *testing.T) {
	ctx := t.Context()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	open := func() *datastore.Store {
		d, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: "lake/ds"})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		s.SetLayout(datastore.LayoutModelsV2)
		t.Cleanup(func() { s.Close() })
		return s
	}
	s, other := open(), open()
	dstest.CommitFiles(t, s, "m/1", 1)
	dstest.CommitFiles(t, s, "m/2", 1)

	cur := dstest.ReadCursor(t, s)
	own := dstest.CommitFiles(t, s, "m/1", 2)
	heads, next, ok := s.ChangedPartitionsOver(cur, own)
	if !ok {
		t.Fatal("own commit right after a read: not answered")
	}
	rh, rnext, err := s.ChangedPartitions(ctx, cur)
	if err != nil || dstest.HeadNames(heads) != dstest.HeadNames(rh) || next != rnext {
		t.Fatalf("answered %s, a read says %s (%v; same cursor %v)", dstest.HeadNames(heads), dstest.HeadNames(rh), err, next == rnext)
	}

	cur = dstest.ReadCursor(t, s)
	dstest.CommitFiles(t, other, "m/1", 1)
	own = dstest.CommitFiles(t, s, "m/1", 1)
	if _, _, ok := s.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered over another process's commit to the same partition")
	}

	// A raw S3 client rewrites the head after the read: the commit's
	// roll-forward moves the head from the rewritten one, which the
	// cursor does not name.
	cur = dstest.ReadCursor(t, s)
	rawRewrite(t, c, bucket, "lake/ds/h/m%2F1", " ") // the same head, other bytes: another ETag
	own = dstest.CommitFiles(t, s, "m/1", 1)
	if _, _, ok := s.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered over a head a raw client rewrote")
	}

	old := dstest.ReadCursor(t, s)
	dstest.CommitFiles(t, s, "m/2", 1)
	dstest.ReadCursor(t, s)
	own = dstest.CommitFiles(t, s, "m/1", 1)
	if _, _, ok := s.ChangedPartitionsOver(old, own); ok {
		t.Fatal("answered from a cursor the process did not last read")
	}

	cur = dstest.ReadCursor(t, s)
	theirs := dstest.CommitFiles(t, other, "m/2", 1)
	own = dstest.CommitFiles(t, s, "m/1", 1)
	heads, next, ok = s.ChangedPartitionsOver(cur, own)
	if !ok || dstest.HeadNames(heads) != fmt.Sprintf("m/1@%d", own[0].Pos) {
		t.Fatalf("with another partition's commit between: %s, %v", dstest.HeadNames(heads), ok)
	}
	rh, _, err = s.ChangedPartitions(ctx, next)
	if err != nil || dstest.HeadNames(rh) != fmt.Sprintf("m/2@%d", theirs[0].Pos) {
		t.Fatalf("the read after the answer: %s, %v; want m/2@%d", dstest.HeadNames(rh), err, theirs[0].Pos)
	}

	// A staged commit of one object a partition, one of them a new
	// model's (so a claim object in data, whose head the cursor keeps
	// but no read reports): answered, as a read answers, and the read
	// from the cursor it gives finds nothing.
	cur = dstest.ReadCursor(t, s)
	own = commitModels(t, s, "m/1", "m/3")
	heads, next, ok = s.ChangedPartitionsOver(cur, own)
	rh, rnext, err = s.ChangedPartitions(ctx, cur)
	if !ok || err != nil || dstest.HeadNames(heads) != dstest.HeadNames(rh) || next != rnext {
		t.Fatalf("a staged commit over two partitions: answered %s (%v), a read says %s (%v; same cursor %v)", dstest.HeadNames(heads), ok, dstest.HeadNames(rh), err, next == rnext)
	}
	if rh, _, err := s.ChangedPartitions(ctx, next); err != nil || len(rh) != 0 {
		t.Fatalf("the read after the staged commit's answer: %s, %v; want nothing", dstest.HeadNames(rh), err)
	}
	// A new model's first commit, to its one partition: a commit of one
	// object that finds it needs its claim in data and is staged with it
	// then (errNeedParts), from the tails it read (its own head, which it
	// created, and data's): answered as a read answers, and each head and
	// log was read once (before, the staged commit read both again, and
	// the head it had created no longer counted as its own: not answered).
	d4, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: "lake/ds"})
	if err != nil {
		t.Fatal(err)
	}
	s4 := datastore.New(d4)
	s4.SetLayout(datastore.LayoutModelsV2)
	defer s4.Close()
	cur = dstest.ReadCursor(t, s4)
	before := d4.Requests()
	own = commitModels(t, s4, "m/4")
	sent := d4.Requests()
	// 7 GETs and 6 LISTs before: the model's and data's heads and logs,
	// and the model's index below the new file, read by the commit of
	// one object and again by the staged commit.
	if gets, lists := sent.Get-before.Get, sent.List-before.List; gets > 4 || lists > 4 {
		t.Errorf("a new model's first commit sent %d GETs and %d LISTs, want at most 4 and 4 (each tail read once)", gets, lists)
	}
	heads, next, ok = s4.ChangedPartitionsOver(cur, own)
	rh, rnext, err = s4.ChangedPartitions(ctx, cur)
	if !ok || err != nil || dstest.HeadNames(heads) != dstest.HeadNames(rh) || next != rnext {
		t.Fatalf("a new model's first commit: answered %s (%v), a read says %s (%v; same cursor %v)", dstest.HeadNames(heads), ok, dstest.HeadNames(rh), err, next == rnext)
	}

	// Another process's commit to one of its partitions first.
	cur = dstest.ReadCursor(t, s)
	dstest.CommitFiles(t, other, "m/3", 1)
	own = commitModels(t, s, "m/1", "m/3")
	if _, _, ok := s.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered a staged commit over another process's commit to one of its partitions")
	}
	// Several objects in one partition: not answered.
	cur = dstest.ReadCursor(t, s)
	own = dstest.CommitFiles(t, s, "m/1", s3fs.MaxCommit+1)
	if _, _, ok := s.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered over a staged commit of several objects in one partition")
	}
}

// commitModels commits one file to each of models in one (staged) commit.
func commitModels(t *testing.T, s *datastore.Store, models ...string) []datastore.Info {
	t.Helper()
	var paths []string
	for _, m := range models {
		paths = append(paths, "data/"+m+"/g")
	}
	return dstest.CommitContents(t, s, paths, models)
}
