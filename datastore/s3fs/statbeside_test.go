package s3fs_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// logListsAPI counts the listings of partition m/1's log (or of what match
// names) and runs a hook before each PutObject.
type logListsAPI struct {
	s3fs.API
	// match is what the listings counted have in their prefix: m/1's
	// log ("/l/m%2F1/") when empty.
	match     string
	mu        sync.Mutex
	logLists  int
	beforePut func(key string)
}

func (a *logListsAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	match := a.match
	if match == "" {
		match = "/l/m%2F1/"
	}
	if strings.Contains(aws.ToString(in.Prefix), match) {
		a.mu.Lock()
		a.logLists++
		a.mu.Unlock()
	}
	return a.API.ListObjectsV2(ctx, in, o...)
}

func (a *logListsAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if a.beforePut != nil {
		a.beforePut(aws.ToString(in.Key))
	}
	return a.API.PutObject(ctx, in, o...)
}

func (a *logListsAPI) takeLists() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.logLists
	a.logLists = 0
	return n
}

// statBeside stats path in a read-ahead that also lists s's heads (as a
// sync's does) and returns its answer, served from the read-ahead.
func statBeside(t *testing.T, s *datastore.Store, path string) datastore.Info {
	t.Helper()
	actx, ok, err := s.ReadAheadStats(t.Context(), []*datastore.Store{s}, nil, map[*datastore.Store][]string{s: {path}})
	if err != nil || !ok {
		t.Fatalf("ReadAheadStats: %v, %v", ok, err)
	}
	got, err := s.StatMany(actx, []string{path})
	if err != nil {
		t.Fatal(err)
	}
	return got[path]
}

// statBesideStore opens a datastore of a new one's layout (models-v3:
// marks beside the heads, the index in them) in a fresh bucket through a
// logListsAPI, with data/m/1/a committed ("one"); it returns the raw client
// and bucket too.
func statBesideStore(t *testing.T) (*logListsAPI, *datastore.Store, *s3.Client, string) {
	return statBesideStoreOf(t, datastore.LayoutModelsV3)
}

// statBesideStoreOf is statBesideStore of layout l (marks beside the heads).
func statBesideStoreOf(t *testing.T, l datastore.Layout) (*logListsAPI, *datastore.Store, *s3.Client, string) {
	t.Helper()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &logListsAPI{API: c}
	_, s := openStore(t, api, bucket, "sb")
	s.SetLayout(l)
	if _, err := s.Put(t.Context(), "data/m/1/a", strings.NewReader("one"), nil); err != nil {
		t.Fatal(err)
	}
	return api, s, c, bucket
}

// TestStatBesideListingReadsNoLog (issue 31): a Stat made in the same
// read-ahead as the listing of its namespace's heads (a sync's stat of its
// dirty paths beside its changed-partition read) does not list the log
// after the head's watermark when that listing shows the head it read and
// no pending mark of its partition; alone it does.
func TestStatBesideListingReadsNoLog(t *testing.T) {
	api, s, _, _ := statBesideStore(t)
	ctx := t.Context()
	api.takeLists()
	if got := statBeside(t, s, "data/m/1/a"); got.Size != 3 || got.Deleted {
		t.Fatalf("stat beside the listing = %+v; want the file", got)
	}
	if n := api.takeLists(); n != 0 {
		t.Fatalf("a stat beside a clean listing listed the log %d times; want none", n)
	}
	if _, err := s.StatMany(ctx, []string{"data/m/1/a"}); err != nil {
		t.Fatal(err)
	}
	if n := api.takeLists(); n != 1 {
		t.Fatalf("a stat alone listed the log %d times; want once", n)
	}
}

// TestStatBesideListingSeesCommitInFlight (issue 31): a commit paused
// right after its log object's create (acknowledged from then on, not yet
// in its head) is seen by a Stat beside a heads listing: the listing
// settles its pending mark (rolls the commit forward) or shows it, and the
// Stat, which waits for the listing, then reads the index or the log
// after the watermark.
func TestStatBesideListingSeesCommitInFlight(t *testing.T) {
	// The committer's roll-forward, after its log object: its index entry
	// in models-v2, its head's write (which holds the index) in models-v3.
	for _, c := range []struct {
		layout datastore.Layout
		at     string
	}{{datastore.LayoutModelsV2, "/f/data/m/1/a~"}, {datastore.LayoutModelsV3, "/h/m%2F1"}} {
		t.Run(c.layout.String(), func(t *testing.T) { statBesideSeesCommitInFlight(t, c.layout, c.at) })
	}
}

func statBesideSeesCommitInFlight(t *testing.T, layout datastore.Layout, at string) {
	api, s, _, _ := statBesideStoreOf(t, layout)
	ctx := t.Context()
	paused, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	api.beforePut = func(key string) {
		// A settler that rolls the commit forward meanwhile is not held.
		if strings.HasSuffix(key, at) && first.CompareAndSwap(false, true) {
			close(paused)
			<-resume
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "data/m/1/a", strings.NewReader("second"), nil)
		done <- err
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("the commit ended without pausing: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the commit never reached its index entry")
	}
	got := statBeside(t, s, "data/m/1/a")
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.Size != int64(len("second")) {
		t.Fatalf("a stat beside a listing during a commit past its create = %+v; want the commit's file", got)
	}
}

// TestStatBesideListingForeignObject: a client that is not lake creates
// the partition's next log object without a pending mark (not lake's
// protocol). A Stat beside a listing answers what the listing's instant
// holds (the foreign object is in no head and no mark, as for
// ChangedPartitions); a Stat alone reads it; lake's next commit of the
// partition lands after it, not over it.
func TestStatBesideListingForeignObject(t *testing.T) {
	_, s, c, bucket := statBesideStore(t)
	ctx := t.Context()
	body := fmt.Sprintf(`{"first":2,"entries":[{"path":"data/m/1/a","version":"f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0","size":7,"inline":%q}],"time":%q}`,
		base64.StdEncoding.EncodeToString([]byte("foreign")), time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("sb/l/m%2F1/00000000000000000002"),
		Body: strings.NewReader(body), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	if got := statBeside(t, s, "data/m/1/a"); got.Size != 3 {
		t.Fatalf("a stat beside the listing = %+v; want the acknowledged file (3 bytes)", got)
	}
	alone, err := s.StatMany(ctx, []string{"data/m/1/a"})
	if err != nil || alone["data/m/1/a"].Size != 7 {
		t.Fatalf("a stat alone = %+v, %v; want the foreign object's file (7 bytes)", alone, err)
	}
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("mine"), nil); err != nil {
		t.Fatal(err)
	}
	ch, upTo, err := s.Changes(ctx, "m/1", 0, 10)
	if err != nil || upTo != 3 || len(ch) != 1 || ch[0].Size != 4 {
		t.Fatalf("the feed after lake's commit = %+v up to %d, %v; want lake's change at 3, after the foreign one", ch, upTo, err)
	}
	if got := statBeside(t, s, "data/m/1/a"); got.Size != 4 {
		t.Fatalf("a stat beside the listing after lake's commit = %+v; want lake's file", got)
	}
}

// TestStatBesideListingReadsNoAbsentHead (issue 31): a Stat beside its
// namespace's heads listing (a sync's read-ahead) does not read the head
// of a partition the listing shows no head of, nor a mark of: it had none
// at the listing's instant, which the Stat answers for (a first sync read
// each new model's absent head). A head the listing shows, not kept, is
// read (the control); so is one the listing shows no head but a pending
// mark of (a raw SDK client's mark: not lake's order, so read).
func TestStatBesideListingReadsNoAbsentHead(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	_, w := openStore(t, c, bucket, "ab")
	w.SetLayout(datastore.LayoutModelsV4)
	if _, err := w.Put(ctx, "data/m/1/a", strings.NewReader("one"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("ab/h/m%2F3!p00000000000000000001"), Body: strings.NewReader("")}); err != nil {
		t.Fatal(err)
	}
	api := &getsAPI{API: c}
	_, r := openStore(t, api, bucket, "ab")
	r.SetLayout(datastore.LayoutModelsV4)
	for _, c := range []struct {
		path, head string
		found      bool
		gets       int
	}{
		{"data/m/2/x", "ab/h/m%2F2", false, 0},
		{"data/m/1/a", "ab/h/m%2F1", true, 1},
		{"data/m/3/x", "ab/h/m%2F3", false, 1},
	} {
		api.take()
		got := statBeside(t, r, c.path)
		if found := got.Path != "" && !got.Deleted; found != c.found {
			t.Fatalf("stat of %s beside the listing: %+v; want found %v", c.path, got, c.found)
		}
		// The mark is settled by the listing's reader too, which reads
		// the head as well: at least one read is what is asked.
		if n := getsOf(api, c.head); n != c.gets && (c.gets == 0 || n < c.gets) {
			t.Fatalf("stat of %s beside the listing read its head %d times; want %d", c.path, n, c.gets)
		}
	}
}
