package s3fs_test

import (
	"context"
	"errors"
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
	_, s := openStore(t, api, bucket, "par")
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
	_, s2 := openStore(t, c, bucket, "par")
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

// cutIndexAPI refuses each PutObject of an index entry (a key under
// PREFIX/f/) after the first allowed ones, as a process that died in the
// middle of a roll-forward would leave them unwritten.
type cutIndexAPI struct {
	s3fs.API
	index   string
	mu      sync.Mutex
	allowed int // -1: no cut
}

func (a *cutIndexAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if strings.HasPrefix(aws.ToString(in.Key), a.index) {
		a.mu.Lock()
		cut := a.allowed == 0
		if a.allowed > 0 {
			a.allowed--
		}
		a.mu.Unlock()
		if cut {
			return nil, errors.New("injected: the process died")
		}
	}
	return a.API.PutObject(ctx, in, opts...)
}

func (a *cutIndexAPI) allow(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.allowed = n
}

// TestRollForwardCutShort: a roll-forward cut short after the commit's log
// object landed (index writes refused after 10, 16 in flight at a time)
// leaves at most those entries written; nothing is lost: a
// fresh reader sees every file from the log, and the next commit of the
// partition rolls the rest into the index.
func TestRollForwardCutShort(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &cutIndexAPI{API: c, index: "cut/f/", allowed: -1}
	_, s := openStore(t, api, bucket, "cut")
	ctx := t.Context()
	if _, err := s.Put(ctx, "data/m/1/first", strings.NewReader("first"), nil); err != nil {
		t.Fatal(err)
	}
	const files = 48
	var es []datastore.Entry
	var paths []string
	for i := range files {
		p := fmt.Sprintf("data/m/1/f%02d", i)
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		es, paths = append(es, datastore.Entry{Put: &st}), append(paths, p)
	}
	api.allow(10)
	_, err := s.Commit(ctx, nil, es)
	api.allow(-1)
	t.Logf("commit cut short: %v", err)
	count := func() int {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("cut/f/")})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Contents)
	}
	// The first refusal cancels the entries still in flight: at most
	// 10 of the commit's are written, not all.
	if n := count(); n < 1 || n > 1+10 {
		t.Fatalf("%d index entries after the cut; want the first file's and at most 10", n)
	}
	_, s2 := openStore(t, c, bucket, "cut")
	got, err := s2.StatMany(ctx, paths)
	if err != nil || len(got) != files {
		t.Fatalf("a fresh reader sees %d of the %d files (%v)", len(got), files, err)
	}
	if _, err := s2.Put(ctx, "data/m/1/next", strings.NewReader("next"), nil); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != files+2 {
		t.Fatalf("%d index entries after the next commit; want %d", n, files+2)
	}
	for _, p := range paths {
		if _, b, err := s2.Get(ctx, p); err != nil || string(b) != p {
			t.Fatalf("%s = %q, %v", p, b, err)
		}
	}
}

// TestDropRollsForwardFirst: a drop of a partition whose last commit's
// roll-forward was cut short (its log object after the head's watermark,
// some of its index entries unwritten) rolls it forward before it removes
// anything (dropTail's path when its listing shows an object past the
// head), so every file of that commit is removed, its chunked version
// handed to Reclaim, and nothing of the partition is left.
func TestDropRollsForwardFirst(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &cutIndexAPI{API: c, index: "dr/f/", allowed: -1}
	d, s := openStore(t, api, bucket, "dr")
	ctx := t.Context()
	if _, err := s.Put(ctx, "data/m/1/first", strings.NewReader("first"), nil); err != nil {
		t.Fatal(err)
	}
	var es []datastore.Entry
	for i := range 8 {
		body := fmt.Sprintf("f%d", i)
		if i == 7 {
			body = oneChunk(body)
		}
		st, err := s.Upload(ctx, fmt.Sprintf("data/m/1/f%d", i), strings.NewReader(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	api.allow(2)
	_, err := s.Commit(ctx, nil, es)
	api.allow(-1)
	t.Logf("commit cut short: %v", err)

	_, s2 := openStore(t, c, bucket, "dr") // another process, no tail in memory
	st, err := s2.DropPartition(ctx, nil, "m/1")
	if err != nil || st.Files != 9 {
		t.Fatalf("drop = %+v, %v; want the 9 files", st, err)
	}
	for _, pre := range []string{"dr/f/", "dr/l/m%2F1/", "dr/h/m%2F1"} {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(pre)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Contents) != 0 {
			t.Fatalf("after the drop %s holds %d objects (%s…)", pre, len(out.Contents), aws.ToString(out.Contents[0].Key))
		}
	}
	if got, err := d.HandedToReclaim(ctx, es[7].Put.Version); err != nil || !got {
		t.Fatalf("the chunked version handed to Reclaim: %v, %v; want true", got, err)
	}
}
