package s3fs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/inflight"
	"github.com/lakemeta/lake/internal/s3local"
)

// heldDeletesAPI holds each DeleteObject in a Gauge.
type heldDeletesAPI struct {
	s3fs.API
	gauge *inflight.Gauge
}

func (a *heldDeletesAPI) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	defer a.gauge.Enter()()
	return a.API.DeleteObject(ctx, in, o...)
}

// TestDropRemovesAtOnce: a drop sends the removals of one step at once
// (the index entries, then the log objects: 2 to 16 in flight, where it
// sent one at a time before), and still leaves nothing of the partition
// but what Reclaim removes after the grace period; the other partition
// is untouched.
func TestDropRemovesAtOnce(t *testing.T) {
	ctx := t.Context()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &heldDeletesAPI{API: c, gauge: inflight.New(20 * time.Millisecond)}
	_, s := openStore(t, api, bucket, "dp")
	var entries []datastore.Entry
	for i := range 40 {
		st, err := s.Upload(ctx, fmt.Sprintf("data/m/gone/f%02d", i), strings.NewReader(fmt.Sprint(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &st})
	}
	if _, err := s.Commit(ctx, nil, entries); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // more log objects
		if _, err := s.Put(ctx, fmt.Sprintf("data/m/gone/g%d", i), strings.NewReader("g"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "data/m/kept/a", strings.NewReader("kept"), nil); err != nil {
		t.Fatal(err)
	}
	api.gauge.Reset()
	st, err := s.DropPartition(ctx, nil, "m/gone")
	if err != nil || st.Files != 45 {
		t.Fatalf("drop = %+v, %v; want 45 files", st, err)
	}
	if most := api.gauge.Most(); most < 2 || most > 16 {
		t.Fatalf("the drop had %d deletes in flight at most; want 2 to 16", most)
	}
	for _, k := range bucketKeys(t, c, bucket) {
		rest := strings.TrimPrefix(k, "dp/")
		if strings.HasPrefix(rest, "l/m%2Fgone/") || rest == "h/m%2Fgone" || strings.HasPrefix(rest, "f/data/m/gone/") {
			t.Errorf("after the drop the bucket still holds %q", k)
		}
	}
	if p, err := s.Partitions(ctx); err != nil || fmt.Sprint(p) != "[m/kept]" {
		t.Fatalf("partitions after the drop: %v, %v; want m/kept", p, err)
	}
	if _, got, err := s.Get(ctx, "data/m/kept/a"); err != nil || string(got) != "kept" {
		t.Fatalf("the other partition reads %q, %v", got, err)
	}
}
