package s3fs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/inflight"
	"github.com/lakemeta/lake/internal/s3local"
)

// slowIndexAPI holds each PutObject of an index entry (a key under
// PREFIX/f/) in its gauge; the store still answers every request, a round
// trip is only made longer.
type slowIndexAPI struct {
	s3fs.API
	index string // the index entries' key prefix
	gauge *inflight.Gauge
	mu    sync.Mutex
	puts  int
}

func (a *slowIndexAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if !strings.HasPrefix(aws.ToString(in.Key), a.index) {
		return a.API.PutObject(ctx, in, opts...)
	}
	a.mu.Lock()
	a.puts++
	a.mu.Unlock()
	defer a.gauge.Enter()()
	return a.API.PutObject(ctx, in, opts...)
}

// TestRollForwardWritesIndexInParallel (issue 31): the index entries of a
// commit of many files are written several at once, not one after another
// (each path's entry is its own object), at most 16 at a time, and the
// outcome is the sequential one: every file is read back from its index
// entry once the commit is rolled forward, and a later commit of some of
// them moves those entries up again.
func TestRollForwardWritesIndexInParallel(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &slowIndexAPI{API: c, index: "par/f/", gauge: inflight.New(40 * time.Millisecond)}
	d, err := s3fs.Open(t.Context(), api, s3fs.Options{Bucket: bucket, Prefix: "par"})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	commit := func(n int, content string) {
		t.Helper()
		var es []datastore.Entry
		for i := range n {
			st, err := s.Upload(ctx, fmt.Sprintf("data/m/1/f%02d", i), strings.NewReader(content+fmt.Sprint(i)), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		if _, err := s.Commit(ctx, nil, es); err != nil {
			t.Fatal(err)
		}
	}
	const files = 48
	commit(files, "one")
	if api.puts < files {
		t.Fatalf("%d index entries written for %d new files", api.puts, files)
	}
	if most := api.gauge.Most(); most < 2 || most > 16 {
		t.Fatalf("at most %d index entries were written at once; want 2 to 16", most)
	}
	commit(files/2, "two")
	// Every entry is in the index (one object a path), and a fresh
	// driver reads each file's latest content.
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("par/f/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != files {
		t.Fatalf("%d index entries under par/f/, want %d", len(out.Contents), files)
	}
	d2, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: "par"})
	if err != nil {
		t.Fatal(err)
	}
	s2 := datastore.New(d2)
	t.Cleanup(func() { s2.Close() })
	for i := range files {
		path := fmt.Sprintf("data/m/1/f%02d", i)
		want := fmt.Sprint("one", i)
		if i < files/2 {
			want = fmt.Sprint("two", i)
		}
		_, got, err := s2.Get(ctx, path)
		if err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
}

// TestRollRepeatedPath: a log object that names a path more than once
// (lake writes one change a path a commit; a foreign writer need not) is
// applied as the sequential roll-forward applied it, although distinct
// paths are written in parallel: the path's entry ends at its last change,
// and each version it held on the way is handed to Reclaim (its replaced
// marker), none skipped by a write that overtook another.
func TestRollRepeatedPath(t *testing.T) {
	d := newDriver(t)
	ctx := t.Context()
	if err := d.RollEntries(ctx, 5, []s3fs.LogEntry{{Path: "data/m/1/a", Version: "v0", Chunks: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := d.RollEntries(ctx, 10, []s3fs.LogEntry{
		{Path: "data/m/1/a", Version: "v1", Chunks: 1},
		{Path: "data/m/1/b", Version: "w1", Chunks: 1},
		{Path: "data/m/1/a", Version: "v2", Chunks: 1},
		{Path: "data/m/1/c", Version: "x1", Chunks: 1},
		{Path: "data/m/1/a", Version: "v3", Chunks: 1},
	}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]struct {
		pos     uint64
		version string
	}{"data/m/1/a": {14, "v3"}, "data/m/1/b": {11, "w1"}, "data/m/1/c": {13, "x1"}} {
		pos, version, err := d.IndexEntry(ctx, path)
		if err != nil || pos != want.pos || version != want.version {
			t.Fatalf("index entry of %s = position %d, version %q, %v; want %d, %s", path, pos, version, err, want.pos, want.version)
		}
	}
	for v, want := range map[string]bool{"v0": true, "v1": true, "v2": true, "v3": false, "w1": false, "x1": false} {
		if got, err := d.HandedToReclaim(ctx, v); err != nil || got != want {
			t.Errorf("version %s handed to Reclaim: %v, %v; want %v", v, got, err, want)
		}
	}
}
