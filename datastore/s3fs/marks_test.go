package s3fs_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestMarksBesideHeads (issue 31): a new datastore on S3 records the layout
// models-v4 (models-v2 before its heads held their index) and keeps its
// pending marks beside the heads, so that a reader
// that finds nothing changed lists h/ once (one request, it listed p/ and
// h/ before); a datastore recorded "models" keeps the older two LISTs. A
// hostile peer (raw SDK PutObject) writing under the new names is never
// read as a head: a valid-looking mark only makes readers roll its
// partition forward, a key that is neither a head nor a mark is skipped by
// readers and reported by check, and so is a p/ object in a models-v2
// datastore, which nothing reads.
func TestMarksBesideHeads(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	open := func(prefix string) (*s3fs.Driver, *datastore.Store) {
		t.Helper()
		return openDatastore(t, raw, bucket, prefix)
	}
	put := func(key string) {
		t.Helper()
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)}); err != nil {
			t.Fatalf("raw PutObject %s: %v", key, err)
		}
	}
	d, s := open("v2")
	if s.Layout() != datastore.LayoutModelsV5 {
		t.Fatalf("a new datastore's layout = %s, want models-v5 (marks beside the heads, as models-v2)", s.Layout())
	}
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	_, cursor, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changed: one LIST.
	before := d.Requests()
	heads, _, err := s.ChangedPartitions(ctx, cursor)
	after := d.Requests()
	if err != nil || len(heads) != 0 {
		t.Fatalf("ChangedPartitions with nothing changed = %v, %v", heads, err)
	}
	if n := after.List - before.List + after.Get - before.Get + after.Head - before.Head; n != 1 || after.List-before.List != 1 {
		t.Fatalf("ChangedPartitions with nothing changed sent %+v - %+v, want one LIST", after, before)
	}
	// The hostile peer.
	put("v2/h/m%2F1!p00000000000000000009") // a mark above the log's end: a commit in flight, to readers
	put("v2/h/m%2F1!p00000000000000000001") // a mark at the watermark: settled (deleted) by readers
	put("v2/h/m%2F1!garbage")               // neither a head nor a mark
	put("v2/h/zz!p123")                     // neither
	put("v2/h/m%2F2!p0000000000000000000x") // neither: not a position
	put("v2/p/m%2F1/00000000000000000002")  // the older format's mark, in a models-v2 datastore
	if parts, err := s.Partitions(ctx); err != nil || !slices.Equal(parts, []string{"m/1"}) {
		t.Fatalf("Partitions = %v, %v; want [m/1]", parts, err)
	}
	heads, cursor, err = s.ChangedPartitions(ctx, cursor)
	if err != nil || len(heads) != 0 {
		t.Fatalf("ChangedPartitions after the foreign keys = %v, %v; want nothing changed", heads, err)
	}
	if _, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("v2/h/m%2F1!p00000000000000000001")}); err == nil {
		t.Fatal("a mark at the watermark was not settled by ChangedPartitions")
	}
	if _, err := s.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	heads, _, err = s.ChangedPartitions(ctx, cursor)
	if err != nil || len(heads) != 1 || heads[0].Partition != "m/1" || heads[0].Seq != 2 {
		t.Fatalf("ChangedPartitions after a commit = %+v, %v; want m/1 at 2", heads, err)
	}
	files, err := s.ListAll(ctx, "data/")
	if err != nil || len(files) != 2 {
		t.Fatalf("ListAll = %v, %v; want 2 files", files, err)
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Object)
		if strings.HasSuffix(p.Object, "/h/m%2F1") {
			t.Errorf("check reported the head: %+v", p)
		}
	}
	for _, want := range []string{"v2/h/m%2F1!garbage", "v2/h/zz!p123", "v2/h/m%2F2!p0000000000000000000x", "v2/p/m%2F1/00000000000000000002"} {
		if !slices.ContainsFunc(got, func(o string) bool { return strings.HasSuffix(o, want) }) {
			t.Errorf("check did not report %s; reported %v", want, got)
		}
	}

	// A datastore recorded "models" (made before issue 31) keeps its marks
	// under p/: the older format's readers still settle them.
	old, err := s3fs.Open(ctx, raw, s3fs.Options{Bucket: bucket, Prefix: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	so := datastore.New(old) // records "models", as lake did before
	t.Cleanup(func() { so.Close() })
	if _, err := so.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	_, so2 := open("v1")
	if so2.Layout() != datastore.LayoutModels {
		t.Fatalf("a datastore recorded models opens as %s", so2.Layout())
	}
	put("v1/p/m%2F1/00000000000000000001") // a mark at the watermark, as a dead committer leaves
	if _, _, err := so2.ChangedPartitions(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("v1/p/m%2F1/00000000000000000001")}); err == nil {
		t.Fatal("a models datastore's reader did not settle its p/ mark")
	}
}

// openDatastore opens the datastore under prefix of bucket through api
// with Open, as a process does (a new one records layout models-v2, its
// marks beside the heads), closed when the test ends.
// recordLayout records layout l for the datastore under prefix before any
// Open does (a datastore made by the lake of that layout).
func recordLayout(t *testing.T, raw *s3.Client, bucket, prefix string, l datastore.Layout) {
	t.Helper()
	if _, err := raw.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/r/datastore/layout~"),
		Body: strings.NewReader(l.String()), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
}

func openDatastore(t *testing.T, api s3fs.API, bucket, prefix string) (*s3fs.Driver, *datastore.Store) {
	t.Helper()
	d, err := s3fs.Open(t.Context(), api, s3fs.Options{Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	s, err := datastore.Open(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return d, s
}
