package treesync_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/treesync"
)

// TestForeignCrossPartitionClashOnS3 (issue 27): a client that is not lake
// writes raw objects, as boto3 would: a log object at the next position of
// the partition "data" holding a file data/rx/1 while the model rx/1 holds
// data/rx/1/f (a clash across partitions that S3 cannot refuse for a writer
// lake does not run). Every tree that pulls it skips the one path it cannot
// apply, names it with the reason, syncs everything else (pulls and
// pushes), and status lists it.
func TestForeignCrossPartitionClashOnS3(t *testing.T) {
	ctx := t.Context()
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	d, err := s3fs.Open(ctx, raw, s3fs.Options{Bucket: bucket, Prefix: "tc"})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	b := newTree(t, s, nil)
	write(t, b, "data/rx/1/f", "f")
	write(t, b, "data/ok", "ok")
	sync(t, b, treesync.Scope{})
	h, err := s.Head(ctx, "data")
	if err != nil || h.Seq != 1 {
		t.Fatalf("head of data: %+v, %v", h, err)
	}
	// The foreign log object: an empty file data/rx/1 at position 2.
	body := `{"first":2,"entries":[{"path":"data/rx/1","version":"foreign0","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}],"time":"2026-01-01T00:00:00Z"}`
	if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("tc/l/data/00000000000000000002"),
		Body: bytes.NewReader([]byte(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "data/rx/1"); err != nil {
		t.Fatalf("the foreign file is not in the store: %v", err)
	}

	a := newTree(t, s, nil)
	write(t, a, "data/mine", "mine")
	rep, err := a.Sync(ctx, treesync.Scope{})
	if !errors.Is(err, treesync.ErrPartial) || len(rep.Skipped) != 1 {
		t.Fatalf("a fresh tree's sync: %+v, %v; want one path skipped", rep, err)
	}
	clash := rep.Skipped[0].Path
	if clash != "data/rx/1" && clash != "data/rx/1/f" {
		t.Fatalf("skipped %+v, want data/rx/1 or data/rx/1/f", rep.Skipped)
	}
	if rep.Skipped[0].Why == "" {
		t.Fatalf("skipped %s without the way out", clash)
	}
	wantFile(t, a, "data/ok", "ok")
	wantRemote(t, s, "data/mine", "mine")
	st, err := a.Status(ctx, treesync.Scope{})
	if err != nil || len(st.Skipped) != 1 || st.Skipped[0].Path != clash {
		t.Fatalf("status: %+v, %v; want %s listed", st, err, clash)
	}

	// The tree that holds data/rx/1/f skips the foreign file, keeps its
	// own, and still pushes and pulls the rest.
	write(t, b, "data/more", "more")
	rep, err = b.Sync(ctx, treesync.Scope{})
	if !errors.Is(err, treesync.ErrPartial) || len(rep.Skipped) != 1 || rep.Skipped[0].Path != "data/rx/1" {
		t.Fatalf("the other tree's sync: %+v, %v; want data/rx/1 skipped", rep, err)
	}
	wantFile(t, b, "data/rx/1/f", "f")
	wantFile(t, b, "data/mine", "mine")
	wantRemote(t, s, "data/more", "more")
}
