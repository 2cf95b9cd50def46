package s3fs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestHandoffTailMovedMeanwhile: a commit starts from the tail its
// process's Stat read a moment before (handoff.go), reading nothing more:
// the head holds the fences of the log object it ends at. When another process committed to the partition
// in between, that tail is stale: the commit must still land after the
// other's change, refuse what the other's change makes a clash, and leave
// the index at the newest state. Without the other process, the commit
// reads no head, log listing, log object or index entry again.
func TestHandoffTailMovedMeanwhile(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	ctx := t.Context()
	d2, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
	if err != nil {
		t.Fatal(err)
	}
	other := datastore.New(d2)
	defer other.Close()
	put := func(s *datastore.Store, p, body string) error {
		_, err := s.Put(ctx, p, strings.NewReader(body), nil)
		return err
	}
	for i := range 3 {
		if err := put(s, fmt.Sprintf("data/m/1/f%d", i), "v0"); err != nil {
			t.Fatal(err)
		}
	}

	// Alone: the Stat's reads are not made again.
	if _, err := s.StatMany(ctx, []string{"data/m/1/f0"}); err != nil {
		t.Fatal(err)
	}
	api.take()
	st, err := s.Upload(ctx, "data/m/1/f0", strings.NewReader("v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatal(err)
	}
	if reads := api.take(); len(reads) != 0 {
		t.Fatalf("a commit right after its Stat read %v; want nothing (the head it read holds its last log object's fences)", reads)
	}

	// Another process overwrites f1 after the Stat: the commit over the
	// stale tail loses the position, reads again and lands after it.
	if _, err := s.StatMany(ctx, []string{"data/m/1/f1"}); err != nil {
		t.Fatal(err)
	}
	if err := put(other, "data/m/1/f1", "other"); err != nil {
		t.Fatal(err)
	}
	if err := put(s, "data/m/1/f1", "mine"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*datastore.Store{s, other} {
		_, got, err := st.Get(ctx, "data/m/1/f1")
		if err != nil || string(got) != "mine" {
			t.Fatalf("f1 = %q, %v; want the later commit's", got, err)
		}
	}
	ch, _, err := other.Changes(ctx, "m/1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := ch[len(ch)-1]; last.Path != "data/m/1/f1" {
		t.Fatalf("the feed ends with %s; want f1, the last commit's", last.Path)
	}

	// Another process puts a file g after the Stat of g/y: the commit
	// of g/y is refused.
	if _, err := s.StatMany(ctx, []string{"data/m/1/g/y"}); err != nil {
		t.Fatal(err)
	}
	if err := put(other, "data/m/1/g", "file"); err != nil {
		t.Fatal(err)
	}
	err = put(s, "data/m/1/g/y", "below a file")
	if cl, ok := datastore.AsClash(err); !ok || !errors.Is(err, metastore.ErrConflict) || cl.Other != "data/m/1/g" {
		t.Fatalf("a put below a file another process put after the Stat: %v", err)
	}
}

// getsAPI records the key of each GetObject and, as "LIST PREFIX", the
// prefix of each listing.
type getsAPI struct {
	s3fs.API
	mu   sync.Mutex
	gets []string
}

func (g *getsAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	g.mu.Lock()
	g.gets = append(g.gets, aws.ToString(in.Key))
	g.mu.Unlock()
	return g.API.GetObject(ctx, in, o...)
}

func (g *getsAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	g.mu.Lock()
	g.gets = append(g.gets, "LIST "+aws.ToString(in.Prefix))
	g.mu.Unlock()
	return g.API.ListObjectsV2(ctx, in, o...)
}

func (g *getsAPI) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.gets
	g.gets = nil
	return out
}

// TestHandoffTailToStagedCommit (issue 31): a staged commit (files of
// several models) starts from the tails its process's Stat read a moment
// before, as a commit of one object does: a sync's first commit of new
// models does not read their heads again. When another process made one
// of those partitions in between, the tail the Stat saw (no head) is
// stale: the staged commit's create of that head fails, it reads the
// partition and lands after the other's change, both files read back and
// in the feed.
func TestHandoffTailToStagedCommit(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &getsAPI{API: c}
	ctx := t.Context()
	open := func(api s3fs.API) *datastore.Store {
		d, err := s3fs.Open(ctx, api, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		return s
	}
	s, other := open(api), open(c)
	commit := func(models ...string) error {
		var entries []datastore.Entry
		for _, m := range models {
			for i := range 2 {
				st, err := s.Upload(ctx, fmt.Sprintf("data/%s/f%d", m, i), strings.NewReader("mine"), nil)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, datastore.Entry{Put: &st})
			}
		}
		_, err := s.Commit(ctx, nil, entries)
		return err
	}

	// Alone: the heads the Stat found absent are not read again.
	if _, err := s.StatMany(ctx, []string{"data/s/1/f0", "data/s/2/f0"}); err != nil {
		t.Fatal(err)
	}
	api.take()
	if err := commit("s/1", "s/2"); err != nil {
		t.Fatal(err)
	}
	for _, k := range api.take() {
		if strings.HasSuffix(k, "/h/s%2F1") || strings.HasSuffix(k, "/h/s%2F2") {
			t.Fatalf("the staged commit read %s again right after its Stat", k)
		}
	}

	// Another process makes s/3 between the Stat and the commit.
	if _, err := s.StatMany(ctx, []string{"data/s/3/f0", "data/s/4/f0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(ctx, "data/s/3/x", strings.NewReader("theirs"), nil); err != nil {
		t.Fatal(err)
	}
	if err := commit("s/3", "s/4"); err != nil {
		t.Fatalf("a staged commit over a partition made since its Stat: %v", err)
	}
	for _, p := range []string{"data/s/3/x", "data/s/3/f0", "data/s/3/f1", "data/s/4/f0"} {
		if _, _, err := other.Get(ctx, p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	ch, _, err := other.Changes(ctx, "s/3", 0, 100)
	if err != nil || len(ch) != 3 || ch[0].Path != "data/s/3/x" {
		t.Fatalf("s/3's feed = %v, %v; want x, then the commit's two files", ch, err)
	}
}

// TestCommitHandsItsHeadToTheNext (issue 31): a commit hands the head it
// wrote to the partition's next commit in this process (as a sync's
// catalog fold and then the removal of a dropped model's row commit to one
// partition, one after the other), which starts from it: no GET of the
// head, no LIST of the log. When another process committed to the
// partition in between, that head is stale: the next commit loses the
// position, reads again and lands after the other's change, each file
// read back as its last commit left it, the feed in commit order.
func TestCommitHandsItsHeadToTheNext(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &getsAPI{API: &logListsAPI{API: c}}
	_, s := openStore(t, api, bucket, "hn")
	_, other := openStore(t, c, bucket, "hn") // another process
	ctx := t.Context()
	put := func(s *datastore.Store, p, body string) {
		t.Helper()
		if _, err := s.Put(ctx, p, strings.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	lists := api.API.(*logListsAPI)
	headGets := func() (n int) {
		for _, k := range api.take() {
			if strings.Contains(k, "/h/m%2F1") {
				n++
			}
		}
		return n
	}
	put(s, "data/m/1/a", "one") // the model's first commit, staged with its claim (claims.go)
	put(s, "data/m/1/a", "two")
	headGets()
	lists.takeLists()
	put(s, "data/m/1/b", "two")
	put(s, "data/m/1/a", "three")
	if h, l := headGets(), lists.takeLists(); h != 0 || l != 0 {
		t.Fatalf("two commits right after another of the partition read its head %d times and listed its log %d times; want neither", h, l)
	}
	// The entries a commit's roll-forward wrote go with its head: a
	// delete of the file just put reads no entry (as the removal of a
	// model's catalog row right after the fold wrote it).
	put(s, "data/m/1/e", "to delete")
	api.take()
	if _, err := s.Delete(ctx, "data/m/1/e"); err != nil {
		t.Fatal(err)
	}
	if gets := api.take(); len(gets) != 0 {
		t.Fatalf("a delete right after the put of its file read %v; want nothing", gets)
	}
	if _, _, err := other.Get(ctx, "data/m/1/e"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the deleted file reads: %v", err)
	}
	lists.takeLists()

	put(s, "data/m/1/c", "mine, first")
	put(other, "data/m/1/c", "the other's")
	put(s, "data/m/1/d", "mine, after the other's") // over a stale head: lost race, read again
	if h, l := headGets(), lists.takeLists(); h == 0 && l == 0 {
		t.Fatalf("a commit over a head another process moved read nothing again")
	}
	for p, want := range map[string]string{"data/m/1/a": "three", "data/m/1/b": "two", "data/m/1/c": "the other's", "data/m/1/d": "mine, after the other's"} {
		for _, st := range []*datastore.Store{s, other} {
			if _, got, err := st.Get(ctx, p); err != nil || string(got) != want {
				t.Fatalf("%s = %q, %v; want %q", p, got, err, want)
			}
		}
	}
	ch, _, err := other.Changes(ctx, "m/1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range ch {
		order = append(order, c.Path)
	}
	if want := []string{"data/m/1/b", "data/m/1/a", "data/m/1/e", "data/m/1/c", "data/m/1/d"}; !slices.Equal(order, want) {
		t.Fatalf("the feed: %v; want %v", order, want)
	}
}
