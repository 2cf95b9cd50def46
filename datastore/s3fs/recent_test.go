package s3fs_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
)

// rawHead reads the head of partition m/1 under fh/ as a raw S3 client
// sees it: its JSON, as a generic map.
func rawHead(t *testing.T, raw *s3.Client, bucket string) map[string]any {
	t.Helper()
	var h map[string]any
	if err := json.Unmarshal(rawGet(t, raw, bucket, "fh/h/m%2F1"), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHeadCopiesServeTheFeed (issue 31): a head carries copies of its log's
// last objects, so a reader of the partitions ChangedPartitions named
// whose position they reach back to reads no log object: ChangesOfHeads
// reads nothing but the changed head ChangedPartitions read. A reader
// further behind than the copies reach, one behind a commit too big to
// copy, one from position 0, and Changes (which no settling of pending
// marks precedes) read the log. Every answer is the changes after the
// reader's position.
func TestHeadCopiesServeTheFeed(t *testing.T) {
	ctx := t.Context()
	api, _, s, raw, bucket := feedStore(t)
	after, cur := readThenPut(t, s, "data/m/1/a", "data/m/1/b")
	put(t, s, "data/m/1/c", "data/m/1/d")
	if recent, _ := rawHead(t, raw, bucket)["recent"].([]any); len(recent) != 4 {
		t.Fatalf("the head carries %d copies; want the log's 4 objects", len(recent))
	}
	want := fmt.Sprintf("[data/m/1/b@%d del=false data/m/1/c@%d del=false data/m/1/d@%d del=false]", after+1, after+2, after+3)
	check := func(what string, got []datastore.Info, heads, lists, logs int64) {
		t.Helper()
		if h, l, g := api.headGets.Load(), api.logLists.Load(), api.logGets.Load(); h != heads || l != lists || g != logs {
			t.Errorf("%s: %d head GETs, %d log LISTs, %d log GETs; want %d, %d and %d", what, h, l, g, heads, lists, logs)
		}
		if fmt.Sprint(changeList(got)) != want {
			t.Errorf("%s: %v; want %s", what, changeList(got), want)
		}
	}
	api.reset()
	heads, _, err := s.ChangedPartitions(ctx, cur)
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	got, err := s.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": after}, 100)
	if err != nil {
		t.Fatal(err)
	}
	check("ChangedPartitions and ChangesOfHeads, three commits since", got["m/1"].Changes, 1, 0, 0)
	api.reset()
	ch, upTo, err := s.Changes(ctx, "m/1", after, 100)
	if err != nil || upTo != after+3 || fmt.Sprint(changeList(ch)) != want || api.logGets.Load() == 0 {
		t.Fatalf("Changes: %v up to %d, %v, %d log GETs; want %s, read from the log", changeList(ch), upTo, err, api.logGets.Load(), want)
	}
	// fromHeads is ChangedPartitions after cur and ChangesOfHeads of m/1
	// from position from, and the log objects and listings they read.
	fromHeads := func(from uint64) ([]datastore.Info, int64) {
		t.Helper()
		heads, _, err := s.ChangedPartitions(ctx, cur)
		if err != nil || len(heads) != 1 {
			t.Fatalf("ChangedPartitions = %v, %v", heads, err)
		}
		api.reset()
		got, err := s.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": from}, 100)
		if err != nil {
			t.Fatal(err)
		}
		return got["m/1"].Changes, api.logGets.Load() + api.logLists.Load()
	}
	if ch, reads := fromHeads(0); len(ch) != 4 || reads == 0 {
		t.Fatalf("ChangesOfHeads from 0: %v, %d log reads; want a, b, c and d, read from the log", changeList(ch), reads)
	}

	// More commits than the head keeps copies of: a reader from before
	// them reads the log.
	for i := range s3fs.RecentObjects + 1 {
		put(t, s, fmt.Sprintf("data/m/1/e%d", i))
	}
	if ch, reads := fromHeads(after); len(ch) != 3+s3fs.RecentObjects+1 || reads == 0 {
		t.Fatalf("ChangesOfHeads from before the copies: %d changes, %d log reads; want %d read from the log", len(ch), reads, 3+s3fs.RecentObjects+1)
	}
	// A commit too big to copy (inline content of more than the copies'
	// bytes) leaves copies only of what follows it; a reader from before
	// it reads the log.
	before, _, err := s.Changes(ctx, "m/1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	at := before[len(before)-1].Pos
	var big []datastore.Entry
	for i := range s3fs.RecentBytes/3000 + 1 {
		st, err := s.Upload(ctx, fmt.Sprintf("data/m/1/big%02d", i), strings.NewReader(strings.Repeat("x", 3000)), nil)
		if err != nil {
			t.Fatal(err)
		}
		big = append(big, datastore.Entry{Put: &st})
	}
	if _, err := s.Commit(ctx, nil, big); err != nil {
		t.Fatal(err)
	}
	put(t, s, "data/m/1/f")
	if ch, reads := fromHeads(at); len(ch) != len(big)+1 || reads == 0 {
		t.Fatalf("ChangesOfHeads from before a big commit: %v, %d log reads; want its files and f, read from the log", changeList(ch), reads)
	}
	last := at + uint64(len(big))
	if ch, reads := fromHeads(last); fmt.Sprint(changeList(ch)) != fmt.Sprintf("[data/m/1/f@%d del=false]", last+1) || reads != 0 {
		t.Fatalf("ChangesOfHeads from after the big commit: %v, %d log reads; want f, from the head", changeList(ch), reads)
	}
}

// TestHeadCopiesHostile (the hostile peer): a raw S3 client rewrites a
// head's copies of its last objects. Copies that are not a run of the
// partition's objects ending at the watermark (a gap, a path of another
// partition, a run that stops short, garbage) are ignored: the reader reads
// the log and answers what it holds. A head with no copies (as a lake
// before issue 31 writes it) is read as before. A well-formed copy that
// differs from its object is read as the log would be if forged (the same
// trust as the log itself), and lake data check names it and --repair
// drops the copies, after which readers read the log.
func TestHeadCopiesHostile(t *testing.T) {
	ctx := t.Context()
	api, _, s, raw, bucket := feedStore(t)
	after, cur := readThenPut(t, s, "data/m/1/a", "data/m/1/b")
	put(t, s, "data/m/1/c")
	h := rawHead(t, raw, bucket)
	recent := h["recent"].([]any)
	b := recent[len(recent)-2].(map[string]any)
	c := recent[len(recent)-1].(map[string]any)
	truth := fmt.Sprintf("[data/m/1/b@%d del=false data/m/1/c@%d del=false]", after+1, after+2)
	withRecent := func(objs ...any) string {
		g := map[string]any{}
		for k, v := range h {
			g[k] = v
		}
		if objs == nil {
			delete(g, "recent")
		} else {
			g["recent"] = objs
		}
		out, _ := json.Marshal(g)
		return string(out)
	}
	clone := func(o map[string]any, edit func(map[string]any)) map[string]any {
		var c map[string]any
		bb, _ := json.Marshal(o)
		_ = json.Unmarshal(bb, &c)
		edit(c)
		return c
	}
	// readFeed reads m/1 as a reader of the partitions ChangedPartitions
	// names, from after: the reader the copies serve.
	readFeed := func(what string) (changes string, logReads int64) {
		t.Helper()
		heads, _, err := s.ChangedPartitions(ctx, cur)
		if err != nil || len(heads) != 1 {
			t.Fatalf("%s: ChangedPartitions = %v, %v", what, heads, err)
		}
		api.reset()
		got, err := s.ChangesOfHeads(ctx, heads, map[string]uint64{"m/1": after}, 100)
		if err != nil {
			t.Fatalf("%s: ChangesOfHeads: %v", what, err)
		}
		return fmt.Sprint(changeList(got["m/1"].Changes)), api.logGets.Load() + api.logLists.Load()
	}
	for _, c := range []struct{ name, head string }{
		{"a gap", withRecent(c)},
		{"a path of another partition", withRecent(b, clone(c, func(o map[string]any) {
			o["entries"].([]any)[0].(map[string]any)["path"] = "data/m/2/x"
		}))},
		{"a run stopping short of the watermark", withRecent(b)},
		{"garbage", withRecent("not an object", 7)},
		{"none, as an older lake writes the head", withRecent()},
	} {
		rawPut(t, raw, bucket, "fh/h/m%2F1", c.head)
		if got, reads := readFeed(c.name); got != truth || reads == 0 {
			t.Errorf("%s: %s, %d log reads; want %s read from the log", c.name, got, reads, truth)
		}
	}
	rawPut(t, raw, bucket, "fh/h/m%2F1", withRecent(b, clone(c, func(o map[string]any) {
		o["entries"].([]any)[0].(map[string]any)["version"] = "forged"
	})))
	if got, reads := readFeed("a forged copy"); !strings.Contains(got, "data/m/1/c") || reads != 0 {
		t.Fatalf("a well-formed copy: %s, %d log reads; want it read as the log's", got, reads)
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(rep.Problems), "its copy of log object") {
		t.Fatalf("check: %+v; want the differing copy named", rep.Problems)
	}
	if _, err := s.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil {
		t.Fatal(err)
	}
	if got, reads := readFeed("after the repair"); got != truth || reads == 0 {
		t.Fatalf("after the repair: %s, %d log reads; want %s read from the log", got, reads, truth)
	}
	if rep, err := s.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check after the repair: %+v, %v", rep.Problems, err)
	}
	// The next commit writes a copy of its own object again, which serves
	// a reader standing right before it.
	put(t, s, "data/m/1/d")
	after += 2
	if got, reads := readFeed("after the next commit"); got != fmt.Sprintf("[data/m/1/d@%d del=false]", after+1) || reads != 0 {
		t.Fatalf("after the next commit: %s, %d log reads; want d, from the head", got, reads)
	}
}
