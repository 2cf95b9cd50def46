package s3fs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// feedAPI counts the GETs of heads and of log objects and the LISTs of
// logs, and runs a hook (once) before the first read (a LIST, or a GET of
// an object) of partition m/1's log: the moment between
// ChangedPartitions' read of the heads and the feed's read.
type feedAPI struct {
	s3fs.API
	prefix            string
	headGets, logGets atomic.Int64
	logLists          atomic.Int64
	beforeLogRead     atomic.Pointer[func()]
	afterLogDelete    atomic.Pointer[func()] // after m/1's object at position 3 is deleted
}

func (f *feedAPI) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	out, err := f.API.DeleteObject(ctx, in, o...)
	if err == nil && strings.HasSuffix(aws.ToString(in.Key), "/l/m%2F1/00000000000000000003") {
		if h := f.afterLogDelete.Swap(nil); h != nil {
			(*h)()
		}
	}
	return out, err
}

func (f *feedAPI) kind(key string) string {
	rest := strings.TrimPrefix(key, f.prefix+"/")
	k, _, _ := strings.Cut(rest, "/")
	return k
}

func (f *feedAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	switch f.kind(aws.ToString(in.Key)) {
	case "h":
		f.headGets.Add(1)
	case "l":
		f.logGets.Add(1)
		f.beforeRead(aws.ToString(in.Key))
	}
	return f.API.GetObject(ctx, in, o...)
}

// beforeRead runs the hook before a read of m/1's log (key: an object's,
// or a listing's prefix).
func (f *feedAPI) beforeRead(key string) {
	if strings.Contains(key, "/l/m%2F1/") {
		if h := f.beforeLogRead.Swap(nil); h != nil {
			(*h)()
		}
	}
}

func (f *feedAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if f.kind(aws.ToString(in.Prefix)) == "l" {
		f.logLists.Add(1)
		f.beforeRead(aws.ToString(in.Prefix))
	}
	return f.API.ListObjectsV2(ctx, in, o...)
}

// reset zeroes the counts.
func (f *feedAPI) reset() {
	f.headGets.Store(0)
	f.logGets.Store(0)
	f.logLists.Store(0)
}

func feedStore(t *testing.T) (*feedAPI, *s3fs.Driver, *datastore.Store, *s3.Client, string) {
	t.Helper()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &feedAPI{API: c, prefix: "fh"}
	d, s := openDatastore(t, api, bucket, "fh")
	return api, d, s, c, bucket
}

func put(t *testing.T, s *datastore.Store, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := s.Put(t.Context(), p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// sameAsChanges checks that each partition's part of got is what Changes
// returns from after.
func sameAsChanges(t *testing.T, s *datastore.Store, got map[string]datastore.HeadChanges, after map[string]uint64) {
	t.Helper()
	for p, hc := range got {
		want, upTo, err := s.Changes(t.Context(), p, after[p], 1000)
		if err != nil {
			t.Fatal(err)
		}
		if hc.Horizon || hc.UpTo != upTo || fmt.Sprint(changeList(hc.Changes)) != fmt.Sprint(changeList(want)) {
			t.Fatalf("%s: %+v; Changes gives %v up to %d", p, hc, changeList(want), upTo)
		}
	}
}

func changeList(in []datastore.Info) []string {
	var out []string
	for _, c := range in {
		out = append(out, fmt.Sprintf("%s@%d del=%v", c.Path, c.Pos, c.Deleted))
	}
	return out
}

// TestChangesFromHead (issue 31): the feeds of the partitions
// ChangedPartitions named are read up to the heads it read, without
// reading a head again: one LIST a partition and a GET of each new log
// object (Changes: a GET of the head, a LIST and the objects), and
// ChangedPartitions reads each changed head without listing its log (it
// listed it too before). The answers are Changes's.
func TestChangesFromHead(t *testing.T) {
	ctx := t.Context()
	api, d, s, _, _ := feedStore(t)
	d.WithoutRecent() // the log is read (recent_test.go: the head's copies)
	put(t, s, "data/m/1/a", "data/m/2/a", "data/m/3/a")
	_, cur, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]uint64{"m/1": 1, "m/2": 1, "m/3": 1}
	put(t, s, "data/m/1/b", "data/m/2/a", "data/m/1/c")
	if _, err := s.Delete(ctx, "data/m/2/a"); err != nil {
		t.Fatal(err)
	}
	api.reset()
	heads, _, err := s.ChangedPartitions(ctx, cur)
	if err != nil || len(heads) != 2 {
		t.Fatalf("ChangedPartitions = %v, %v; want m/1 and m/2", heads, err)
	}
	if h, l := api.headGets.Load(), api.logLists.Load(); h != 2 || l != 0 {
		t.Fatalf("ChangedPartitions read %d heads and listed %d logs; want 2 and none", h, l)
	}
	api.reset()
	got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// m/1: 2 new objects, m/2: 2 (the put and the delete).
	if h, l, g := api.headGets.Load(), api.logLists.Load(), api.logGets.Load(); h != 0 || l != 2 || g != 4 {
		t.Fatalf("ChangesOfHeads: %d head GETs, %d log LISTs, %d log GETs; want 0, 2 and 4", h, l, g)
	}
	if len(got) != 2 || len(got["m/1"].Changes) != 2 || len(got["m/2"].Changes) != 1 || !got["m/2"].Changes[0].Deleted {
		t.Fatalf("ChangesOfHeads = %+v", got)
	}
	sameAsChanges(t, s, got, after)
}

// TestChangesFromHeadPurgeMeanwhile: a tombstone purged and its object
// deleted by compaction after ChangedPartitions read the head and before
// the feed is read leaves a gap in the log; the read is then made again as
// Changes makes it, head first, and reported past the horizon (the floor
// passed the reader's position) instead of as a feed without the
// deletion. With the tombstone's object still there the read is whole
// and returns the deletion.
func TestChangesFromHeadPurgeMeanwhile(t *testing.T) {
	for _, deleted := range []bool{true, false} {
		t.Run(fmt.Sprintf("object deleted %v", deleted), func(t *testing.T) {
			ctx := t.Context()
			api, d, s, _, _ := feedStore(t)
			d.WithoutRecent() // the log is read (recent_test.go: the head's copies)
			put(t, s, "data/m/1/a", "data/m/1/b")
			heads, cur, err := s.ChangedPartitions(ctx, "")
			if err != nil || len(heads) != 1 {
				t.Fatalf("ChangedPartitions = %v, %v", heads, err)
			}
			after := map[string]uint64{"m/1": heads[0].Seq}
			if _, err := s.Delete(ctx, "data/m/1/a"); err != nil {
				t.Fatal(err)
			}
			if deleted {
				put(t, s, "data/m/1/c") // the tombstone's object is not the log's last
			}
			if heads, _, err = s.ChangedPartitions(ctx, cur); err != nil || len(heads) != 1 {
				t.Fatalf("ChangedPartitions = %v, %v", heads, err)
			}
			time.Sleep(1100 * time.Millisecond) // LastModified is to the second
			purge := func() {
				st, err := d.Reclaim(ctx, time.Now().Add(time.Hour), datastore.ReclaimOptions{Horizon: time.Nanosecond, Grace: time.Nanosecond})
				if err != nil || st.Tombstones == 0 {
					t.Errorf("reclaim: %+v, %v; want the tombstone purged", st, err)
				}
				api.headGets.Store(0) // the reclaim's own
			}
			api.beforeLogRead.Store(&purge)
			api.reset()
			got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			headGets := api.headGets.Load()
			if _, _, err := s.Changes(ctx, "m/1", after["m/1"], 1000); err == nil {
				t.Fatal("Changes below the raised floor: no error")
			}
			hc := got["m/1"]
			if deleted {
				if !hc.Horizon || len(hc.Changes) != 0 {
					t.Fatalf("after a purge that deleted the tombstone's object: %+v; want the horizon", hc)
				}
				if headGets != 1 {
					t.Fatalf("the read with a gap read %d heads; want 1 (Changes's)", headGets)
				}
				return
			}
			if hc.Horizon || len(hc.Changes) != 1 || hc.Changes[0].Path != "data/m/1/a" || !hc.Changes[0].Deleted {
				t.Fatalf("after a purge that left the tombstone's object: %+v; want the deletion", hc)
			}
			if headGets != 0 {
				t.Fatalf("a whole read read %d heads; want none", headGets)
			}
		})
	}
}

// TestChangesFromHeadDroppedMeanwhile: a partition dropped after
// ChangedPartitions named it and before its feed is read is reported to be
// read whole; one dropped and begun again from position 1 is answered as
// Changes answers (S3's positions start over after a drop: a reader learns
// of the drop from the catalog, docs/lifecycle.md); the other partition is
// read as usual.
func TestChangesFromHeadDroppedMeanwhile(t *testing.T) {
	for _, again := range []bool{false, true} {
		t.Run(fmt.Sprintf("begun again %v", again), func(t *testing.T) {
			ctx := t.Context()
			api, d, s, _, _ := feedStore(t)
			d.WithoutRecent() // the log is read (recent_test.go: the head's copies)
			put(t, s, "data/m/1/a", "data/m/2/a")
			_, cur, err := s.ChangedPartitions(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			after := map[string]uint64{"m/1": 1, "m/2": 1}
			put(t, s, "data/m/1/b", "data/m/1/c", "data/m/2/b")
			heads, _, err := s.ChangedPartitions(ctx, cur)
			if err != nil || len(heads) != 2 {
				t.Fatalf("ChangedPartitions = %v, %v", heads, err)
			}
			drop := func() {
				if _, err := s.DropPartition(ctx, nil, "m/1"); err != nil {
					t.Errorf("drop: %v", err)
				}
				if again {
					put(t, s, "data/m/1/z")
				}
			}
			api.beforeLogRead.Store(&drop)
			got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if again {
				sameAsChanges(t, s, map[string]datastore.HeadChanges{"m/1": got["m/1"]}, after)
			} else if hc := got["m/1"]; !hc.Horizon {
				t.Fatalf("the dropped partition: %+v; want it read whole", hc)
			}
			if hc := got["m/2"]; hc.Horizon || len(hc.Changes) != 1 || hc.Changes[0].Path != "data/m/2/b" {
				t.Fatalf("the other partition: %+v; want its one change", hc)
			}
		})
	}
}

// TestChangesFromHeadForeignDelete: a log object deleted mid-feed by a raw
// S3 client (no purge, no floor raised) leaves a gap: the read is made
// again as Changes makes it (the head, the feed, the head again) and
// answers what Changes answers: the changes the log still holds.
func TestChangesFromHeadForeignDelete(t *testing.T) {
	ctx := t.Context()
	api, d, s, raw, bucket := feedStore(t)
	d.WithoutRecent() // the log is read (recent_test.go: its copies in the head)
	put(t, s, "data/m/1/a")
	_, cur, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "data/m/1/b", "data/m/1/c", "data/m/1/d")
	heads, _, err := s.ChangedPartitions(ctx, cur)
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	del := func() {
		key := fmt.Sprintf("fh/l/m%%2F1/%020d", 3)
		if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
			t.Errorf("raw delete: %v", err)
		}
	}
	api.beforeLogRead.Store(&del)
	after := map[string]uint64{"m/1": 1}
	api.reset()
	got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Changes's, before its feed and after it (it found an object gone).
	if api.headGets.Load() != 2 {
		t.Fatalf("the read with a gap read %d heads; want 2 (Changes's)", api.headGets.Load())
	}
	sameAsChanges(t, s, got, after)
}

// TestChangesOfHeadsMissesNothing: writers put and delete files of three
// partitions while a compactor purges tombstones and deletes dead objects
// (horizon and grace of a nanosecond) and a reader that falls behind now
// and then follows with ChangedPartitions and ChangesOfHeads, reading a
// partition whole when it is told to: once the writers stop, the reader's
// view is every live file with its version, and no deleted one. (The
// purge landing exactly between a head's read and its feed's, where a
// read is proven whole or not, is the tests above; here the reader is
// mostly told by the floor it read.)
func TestChangesOfHeadsMissesNothing(t *testing.T) {
	for _, copies := range []bool{false, true} {
		t.Run(fmt.Sprintf("copies=%v", copies), func(t *testing.T) { changesOfHeadsMissesNothing(t, copies) })
	}
}

// changesOfHeadsMissesNothing is TestChangesOfHeadsMissesNothing, with
// heads that carry copies of their last objects (recent.go) or without.
func changesOfHeadsMissesNothing(t *testing.T, copies bool) {
	_, d, s, _, _ := feedStore(t)
	if !copies {
		d.WithoutRecent()
	}
	dstest.RunFeedFollower(t, s, func(ctx context.Context) (int, error) {
		// An hour ahead: every tombstone is past the horizon.
		st, err := d.Reclaim(ctx, time.Now().Add(time.Hour), datastore.ReclaimOptions{Horizon: time.Nanosecond, Grace: time.Nanosecond})
		return st.Tombstones, err
	})
}

// TestFeedReadInsideCompaction: a reader whose feed read falls inside a
// compaction, right after it deleted a purged tombstone's log object
// (position 3), is told to read the partition whole (Changes, and
// ChangesOfHeads from a ChangedPartitions call made before the
// compaction): the floor is raised before the object goes, and a read
// that finds an object gone reads the head after it. (Before issue 31 the
// floor was raised last and Changes read it first, and such a read missed
// the deletion.) With the head's copies of its last objects (recent.go),
// ChangesOfHeads may instead answer from the copies its ChangedPartitions
// read: then it returns the deletion itself, and the rest, up to the head.
func TestFeedReadInsideCompaction(t *testing.T) {
	for _, copies := range []bool{false, true} {
		t.Run(fmt.Sprintf("copies=%v", copies), func(t *testing.T) { feedReadInsideCompaction(t, copies) })
	}
}

func feedReadInsideCompaction(t *testing.T, copies bool) {
	ctx := t.Context()
	api, d, s, raw, bucket := feedStore(t)
	if !copies {
		d.WithoutRecent()
	}
	_, other := openDatastore(t, raw, bucket, "fh") // the reader, in another process
	put(t, s, "data/m/1/a", "data/m/1/b")
	heads, cur, err := other.ChangedPartitions(ctx, "")
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	after := heads[0].Seq
	if _, err := s.Delete(ctx, "data/m/1/a"); err != nil {
		t.Fatal(err)
	}
	put(t, s, "data/m/1/c") // the tombstone's object is not the log's last
	heads, _, err = other.ChangedPartitions(ctx, cur)
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	time.Sleep(1100 * time.Millisecond) // LastModified is to the second
	var read []string
	inside := func() {
		_, _, err := other.Changes(ctx, "m/1", after, 1000)
		read = append(read, fmt.Sprintf("Changes: %v", err))
		if !errors.Is(err, datastore.ErrHorizon) {
			t.Errorf("Changes inside the compaction: %v; want the horizon", err)
		}
		got, err := other.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": after}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		hc := got["m/1"]
		read = append(read, fmt.Sprintf("ChangesOfHeads: %+v", hc))
		whole := fmt.Sprint(changeList(hc.Changes)) == fmt.Sprintf("[data/m/1/a@%d del=true data/m/1/c@%d del=false]", after+1, after+2) && hc.UpTo == heads[0].Seq
		switch {
		case !copies && !hc.Horizon:
			t.Errorf("ChangesOfHeads inside the compaction: %+v; want the horizon", hc)
		case copies && !hc.Horizon && !whole:
			t.Errorf("ChangesOfHeads inside the compaction, from the head's copies: %+v; want the horizon, or the deletion and the put up to %d", hc, heads[0].Seq)
		}
	}
	api.afterLogDelete.Store(&inside)
	st, err := d.Reclaim(ctx, time.Now().Add(time.Hour), datastore.ReclaimOptions{Horizon: time.Nanosecond, Grace: time.Nanosecond})
	if err != nil || st.Tombstones == 0 {
		t.Fatalf("reclaim: %+v, %v; want the tombstone purged", st, err)
	}
	if len(read) == 0 {
		t.Fatal("the compaction deleted no log object: the reads never ran inside it")
	}
	t.Logf("inside the compaction: %s", strings.Join(read, "; "))
}

// TestFeedOfOneCommitIsOneGet (issue 31): a reader standing where its last
// read stopped (an object's end) reads the next object by its name: one
// commit since is one GET of it, no LIST (Changes: and the head's GET;
// ChangesOfHeads: nothing else); two commits since are that GET, a LIST
// from its end and the other GET, as many requests as before; a reader
// standing inside an object (a page cut short by its limit) finds no
// object at its next position and reads as before, one GET later. Every
// answer is the changes after the position.
func TestFeedOfOneCommitIsOneGet(t *testing.T) {
	ctx := t.Context()
	api, d, s, _, _ := feedStore(t)
	d.WithoutRecent() // heads as before issue 31's copies (recent_test.go)
	after, cur := readThenPut(t, s, "data/m/1/a", "data/m/1/b")
	count := func(what string, f func() []datastore.Info, heads, lists, logs int64, want ...string) {
		t.Helper()
		api.reset()
		got := f()
		if h, l, g := api.headGets.Load(), api.logLists.Load(), api.logGets.Load(); h != heads || l != lists || g != logs {
			t.Errorf("%s: %d head GETs, %d log LISTs, %d log GETs; want %d, %d and %d", what, h, l, g, heads, lists, logs)
		}
		var paths []string
		for _, c := range got {
			paths = append(paths, c.Path)
		}
		if fmt.Sprint(paths) != fmt.Sprint(want) {
			t.Errorf("%s: %v; want %v", what, paths, want)
		}
	}
	changes := func(after uint64, limit int) func() []datastore.Info {
		return func() []datastore.Info {
			ch, _, err := s.Changes(ctx, "m/1", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}
	}
	count("Changes, one commit since", changes(after, 100), 1, 0, 1, "data/m/1/b")
	heads, _, err := s.ChangedPartitions(ctx, cur)
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	count("ChangesOfHeads, one commit since", func() []datastore.Info {
		got, err := s.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": after}, 100)
		if err != nil {
			t.Fatal(err)
		}
		return got["m/1"].Changes
	}, 0, 0, 1, "data/m/1/b")
	put(t, s, "data/m/1/c")
	count("Changes, two commits since", changes(after, 100), 1, 1, 2, "data/m/1/b", "data/m/1/c")
	// A commit of three files, read one change at a time: the second
	// read stands inside the object.
	files := []datastore.Entry{}
	for _, p := range []string{"data/m/1/x", "data/m/1/y", "data/m/1/z"} {
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, datastore.Entry{Put: &st})
	}
	infos, err := s.Commit(ctx, nil, files)
	if err != nil {
		t.Fatal(err)
	}
	first := infos[0].Pos - 1
	count("Changes, at an object's end, a page of one", changes(first, 1), 1, 0, 1, "data/m/1/x")
	// No object at the next position (a GET that finds none), a LIST
	// after it that finds nothing, and one from a commit's size back.
	count("Changes, inside an object", changes(first+1, 10), 1, 2, 2, "data/m/1/y", "data/m/1/z")
}

// TestFeedReadOfAForeignObject (the hostile peer): a raw S3 client
// overwrites the log object at a reader's next position (the one the
// read by name fetches without a LIST) with bytes lake never writes, and
// puts a well-formed log object of its own past the head. The reads by
// name and by listing both report the damage, naming the object (never a
// skipped change, never a panic), and the object past the head is not read
// as a change by either.
func TestFeedReadOfAForeignObject(t *testing.T) {
	ctx := t.Context()
	_, d, s, raw, bucket := feedStore(t)
	d.WithoutRecent() // the log is read (recent_test.go: damage beside the head's copies)
	after, cur := readThenPut(t, s, "data/m/1/a", "data/m/1/b")
	heads, _, err := s.ChangedPartitions(ctx, cur)
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	// Past the head: a log object a raw client wrote, not a commit.
	rawPut(t, raw, bucket, fmt.Sprintf("fh/l/m%%2F1/%020d", after+2),
		fmt.Sprintf(`{"first":%d,"entries":[{"path":"data/m/1/forged","version":"v","size":1}]}`, after+2))
	got, err := s.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": after}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(changeList(got["m/1"].Changes)) != fmt.Sprintf("[data/m/1/b@%d del=false]", after+1) || got["m/1"].UpTo != after+1 {
		t.Fatalf("ChangesOfHeads with a foreign object past the head: %+v; want b alone, up to %d", got["m/1"], after+1)
	}
	// The object at the next position overwritten with garbage.
	key := fmt.Sprintf("fh/l/m%%2F1/%020d", after+1)
	rawPut(t, raw, bucket, key, "not a log object")
	if _, _, err := s.Changes(ctx, "m/1", after, 100); !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), key) {
		t.Fatalf("Changes over a damaged object: %v; want the damage, naming %s", err, key)
	}
	if _, err := s.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": after}, 100); !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), key) {
		t.Fatalf("ChangesOfHeads over a damaged object: %v; want the damage, naming %s", err, key)
	}
	if _, _, err := s.Changes(ctx, "m/1", 0, 100); !errors.Is(err, datastore.ErrDamaged) {
		t.Fatalf("Changes from 0 (a listing) over a damaged object: %v; want the damage", err)
	}
}

// readThenPut puts first (one file of m/1), reads the changed partitions
// (m/1's head), then puts then: a reader at the position and cursor it
// returns, with one commit since.
func readThenPut(t *testing.T, s *datastore.Store, first, then string) (after uint64, cur string) {
	t.Helper()
	put(t, s, first)
	heads, cur, err := s.ChangedPartitions(t.Context(), "")
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	put(t, s, then)
	return heads[0].Seq, cur
}
