package s3fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestForeignChunkOverwrite (issue 26, hostile peer): a client lake did not
// write (a raw SDK call, as boto3 would make) overwrites a committed chunk
// object, once with other bytes of the same length and once with 3 MiB.
// Reads of that path fail with a damaged-file error naming it, holding at
// most one chunk; lake's own PutChunk of other bytes stays a conflict; other
// paths read on.
func TestForeignChunkOverwrite(t *testing.T) {
	api, bucket, s := rawStore(t, "hostile")
	ctx := t.Context()
	content := strings.Repeat("z", datastore.ChunkSize+9)
	for _, tc := range []struct {
		name string
		junk []byte
	}{
		{"same length", bytes.Repeat([]byte("q"), datastore.ChunkSize)},
		{"3 MiB", bytes.Repeat([]byte("q"), 3<<20)},
	} {
		path := "data/t/i/" + strings.ReplaceAll(tc.name, " ", "-")
		info, err := s.Put(ctx, path, strings.NewReader(content), nil)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("hostile/c/%s/%06d", info.Version, 0)
		if _, err := api.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(tc.junk), ContentLength: aws.Int64(int64(len(tc.junk)))}); err != nil {
			t.Fatalf("raw PutObject: %v", err)
		}
		_, err = s.GetTo(ctx, path, io.Discard)
		if !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: GetTo = %v, want a damaged-file error naming %q", tc.name, err, path)
		}
	}
	if _, err := s.Put(ctx, "data/t/i/ok", strings.NewReader("ok"), nil); err != nil {
		t.Fatal(err)
	}
	if _, b, err := s.Get(ctx, "data/t/i/ok"); err != nil || string(b) != "ok" {
		t.Fatalf("Get of another path = %q, %v", b, err)
	}
}

// rawStore opens a Store under prefix of a fresh bucket and returns it with
// a raw client of the bucket: the hostile peer of the foreign-writer tests.
func rawStore(t *testing.T, prefix string) (*s3.Client, string, *datastore.Store) {
	t.Helper()
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	d, err := s3fs.Open(t.Context(), raw, s3fs.Options{Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return raw, bucket, s
}
