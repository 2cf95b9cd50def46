package s3fs_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// TestForeignStagedPart (issue 30, hostile peer): a raw PutObject writes
// the next log object of a partition as a staged part of a commit whose
// record (t/ID) does not exist, naming a new path. Readers take it for a
// part of a commit that never flipped: stat, ls and changes do not show the
// path; lake data check reports nothing of it as a commit not rolled
// forward; the next writer of the partition commits after it; and a
// repair never makes the path appear.
func TestForeignStagedPart(t *testing.T) {
	api, bucket, s := rawStore(t, "staged")
	ctx := t.Context()
	if _, err := s.Put(ctx, "data/m/1/real", strings.NewReader("real"), nil); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"first":2,"entries":[{"path":"data/m/1/forged","version":"abc","size":3,"chunks":1,"sha256":"x"}],"time":"2026-12-01T00:00:00Z","tx":"forged"}`)
	key := "staged/l/m%2F1/00000000000000000002"
	if _, err := api.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))}); err != nil {
		t.Fatalf("raw PutObject: %v", err)
	}
	wantAbsent := func(when string) {
		t.Helper()
		if _, err := s.Stat(ctx, "data/m/1/forged"); !errors.Is(err, metastore.ErrNotFound) {
			t.Fatalf("%s: Stat of the forged path: %v, want not found", when, err)
		}
		files, err := s.ListAll(ctx, "data/m/1/")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == "data/m/1/forged" {
				t.Fatalf("%s: the forged path is listed", when)
			}
		}
		ch, _, err := s.Changes(ctx, "m/1", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch {
			if c.Path == "data/m/1/forged" {
				t.Fatalf("%s: the forged path is in the feed", when)
			}
		}
	}
	wantAbsent("after the foreign write")
	if _, err := s.Put(ctx, "data/m/1/next", strings.NewReader("next"), nil); err != nil {
		t.Fatalf("the next writer after a foreign staged part: %v", err)
	}
	if _, b, err := s.Get(ctx, "data/m/1/next"); err != nil || string(b) != "next" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if _, err := s.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil {
		t.Fatal(err)
	}
	wantAbsent("after check --repair")
}
