package dstest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// errCrash is what the write fault of testKilledCommits answers: the
// commit's process is dead from that write on.
var errCrash = errors.New("lake: dstest: the committer crashed here")

// testKilledCommits kills a commit of more entries than MaxCommit, across two
// partitions, after k backend writes, for every k until the commit gets
// through (issue 30). After each kill every reader (Stat, Get, List, the
// feed) must see the commit all or nothing; then the leftovers are settled,
// by a Reclaim on even k and by the next writer of the same paths on odd k
// (both after the commit window, when a dead commit may be given up), and
// readers must still see all or nothing, the same as before if the commit
// had become visible, and the next writer must commit.
func testKilledCommits(t *testing.T, s *datastore.Store) {
	fw, ok := s.Driver().(datastore.WriteFaulter)
	if !ok || !s.CommitsWhole() {
		t.Skipf("driver %s does not commit whole or has no write fault hook: commits larger than MaxCommit are not atomic on it", s.Driver().Name())
	}
	ctx := t.Context()
	// More entries than one atomic write takes (MaxCommit), in two
	// partitions; a driver with a large MaxCommit (S3: per partition) is
	// already past one write with a few entries in two partitions, and
	// each entry costs it several writes per kill point.
	n := 2*min(s.Driver().MaxCommit(), 8) + 2
	if s.Driver().MaxCommit() >= 50 {
		n = 6
	}
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	s.SetClock(now)
	// S3 has a kill point at each of some 24 writes, each round a few
	// seconds: CI kills at every third one (odd and even k alike, so both
	// settlers below run; the staging, the flip and the roll-forward are
	// each reached), LAKE_TEST_KILL_ALL=1 at every one.
	step := 1
	if n == 6 && os.Getenv("LAKE_TEST_KILL_ALL") != "1" {
		step = 3
	}
	for k := 0; k < 40*n; k += step {
		// Each round has two models of its own: paths i%3==0 are created,
		// 1 replaced, 2 deleted by the commit that is killed.
		pathOf := func(i int) string { return fmt.Sprintf("data/kc%d/%c/f%02d", k, 'a'+byte(i%2), i) }
		parts := []string{fmt.Sprintf("kc%d/a", k), fmt.Sprintf("kc%d/b", k)}
		before, after := map[string]string{}, map[string]string{}
		var base, entries []datastore.Entry
		for i := range n {
			p := pathOf(i)
			if i%3 != 0 {
				st, err := s.Upload(ctx, p, strings.NewReader(fmt.Sprintf("old %d", i)), nil)
				if err != nil {
					t.Fatal(err)
				}
				base = append(base, datastore.Entry{Put: &st})
				before[p] = fmt.Sprintf("old %d", i)
			}
			switch i % 3 {
			case 2:
				entries = append(entries, datastore.Entry{Delete: p})
			default:
				st, err := s.Upload(ctx, p, strings.NewReader(fmt.Sprintf("new %d", i)), nil)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, datastore.Entry{Put: &st})
				after[p] = fmt.Sprintf("new %d", i)
			}
		}
		if _, err := s.Commit(ctx, nil, base); err != nil {
			t.Fatalf("round %d: base commit: %v", k, err)
		}
		var writes int
		fired := false
		fw.SetWriteFault(func() error {
			if writes >= k {
				fired = true
				return errCrash
			}
			writes++
			return nil
		})
		_, err := s.Commit(ctx, nil, entries)
		fw.SetWriteFault(nil)
		if err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("round %d: the killed commit failed with %v, not the crash", k, err)
		}
		all := func() []string {
			var out []string
			for i := range n {
				out = append(out, pathOf(i))
			}
			return out
		}()
		seen := wantAllOrNothing(t, s, fmt.Sprintf("round %d, killed after %d writes", k, k), all, parts, before, after)
		if err == nil && seen != "after" {
			t.Fatalf("round %d: the commit succeeded but readers see the state before it", k)
		}
		// Settle: past the commit window, a dead commit may be given up.
		advance(2 * time.Hour)
		if k%2 == 0 {
			if _, err := s.Reclaim(ctx, datastore.ReclaimOptions{}); err != nil {
				t.Fatalf("round %d: reclaim after the kill: %v", k, err)
			}
		}
		label := fmt.Sprintf("round %d, after the kill was settled by reclaim", k)
		if k%2 == 1 {
			label = fmt.Sprintf("round %d, after the kill, past the commit window", k)
		}
		settled := wantAllOrNothing(t, s, label, all, parts, before, after)
		if seen == "after" && settled != "after" {
			t.Fatalf("round %d: a commit readers saw whole vanished when it was settled", k)
		}
		// The next writer of every path of the commit gets through: it
		// puts the first and deletes the others (no uploads but one).
		st, err2 := s.Upload(ctx, pathOf(0), strings.NewReader("next"), nil)
		if err2 != nil {
			t.Fatal(err2)
		}
		next := []datastore.Entry{{Put: &st}}
		for i := 1; i < n; i++ {
			next = append(next, datastore.Entry{Delete: pathOf(i)})
		}
		if _, err := s.Commit(ctx, nil, next); err != nil {
			t.Fatalf("round %d: the next writer after the kill: %v", k, err)
		}
		wantContent(t, s, pathOf(0), "next")
		for i := 1; i < n; i++ {
			wantNotFound(t, s, pathOf(i))
		}
		for _, part := range parts {
			_, upTo := pullAll(t, s, part, 0)
			if h, err := s.Head(ctx, part); err != nil || upTo != h.Seq {
				t.Fatalf("round %d: after the next writer a pull of %s stops at %d of head %+v (%v)", k, part, upTo, h, err)
			}
		}
		if err == nil && !fired {
			t.Logf("a commit of %d entries was killed after each of 0 to %d writes", n, k-1)
			return // the commit got through: every kill point was tried
		}
	}
	t.Fatalf("a commit of %d entries was still killed after %d writes", n, 40*n)
}

// wantAllOrNothing reads paths through Stat, Get, List and the feeds of parts
// and fails unless every reader sees exactly before or exactly after; it
// returns which.
func wantAllOrNothing(t *testing.T, s *datastore.Store, what string, paths, parts []string, before, after map[string]string) string {
	t.Helper()
	ctx := t.Context()
	which := func(reader string, got map[string]string) string {
		switch {
		case mapsEqual(got, before):
			return "before"
		case mapsEqual(got, after):
			return "after"
		}
		var diff []string
		for _, p := range paths {
			diff = append(diff, fmt.Sprintf("%s=%q(before %q, after %q)", p, got[p], before[p], after[p]))
		}
		t.Fatalf("%s: %s sees a part of the commit: %s", what, reader, strings.Join(diff, " "))
		return ""
	}
	// Get: the content of each path.
	got := map[string]string{}
	for _, p := range paths {
		_, b, err := s.Get(ctx, p)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: Get(%s): %v", what, p, err)
		}
		got[p] = string(b)
	}
	seen := which("Get", got)
	// Stat and List: versions, mapped to contents through what Get saw.
	versions := map[string]string{}
	st, err := s.StatMany(ctx, paths)
	if err != nil {
		t.Fatalf("%s: StatMany: %v", what, err)
	}
	for p, info := range st {
		if !info.Deleted {
			versions[p] = info.Version
		}
	}
	prefix := paths[0][:strings.LastIndex(paths[0][:strings.LastIndex(paths[0], "/")], "/")+1]
	listed, err := s.ListAll(ctx, prefix)
	if err != nil {
		t.Fatalf("%s: List: %v", what, err)
	}
	lv := map[string]string{}
	for _, info := range listed {
		lv[info.Path] = info.Version
	}
	if !mapsEqual(lv, versions) {
		t.Fatalf("%s: List and Stat disagree: listed %s, stat %v", what, paths2(listed), versions)
	}
	// The feed: every change of the two partitions, folded.
	// A pull stops before a change not yet decided (upTo below the head),
	// so what it returns is a part of the view, and all of it at the head.
	fv := map[string]string{}
	whole := true
	for _, part := range parts {
		ch, upTo := pullAll(t, s, part, 0)
		h, err := s.Head(ctx, part)
		if err != nil {
			t.Fatalf("%s: Head(%s): %v", what, part, err)
		}
		whole = whole && upTo == h.Seq
		for _, c := range ch {
			if c.Deleted {
				delete(fv, c.Path)
			} else {
				fv[c.Path] = c.Version
			}
		}
	}
	for p, v := range fv {
		if versions[p] != v {
			t.Fatalf("%s: the feed and Stat disagree on %s: feed %v, stat %v", what, p, fv, versions)
		}
	}
	if settled := strings.Contains(what, "settled"); settled && !whole {
		t.Fatalf("%s: a pull still stops below the head: the commit was not settled", what)
	}
	// A path a pending commit stages may be missing from a pull until the
	// commit is decided (DynamoDB moves its one feed entry to the
	// commit's position, as any change does): equality is owed once
	// readers see the commit, and once it is settled.
	if whole && (seen == "after" || strings.Contains(what, "settled")) && !mapsEqual(fv, versions) {
		t.Fatalf("%s: the feed pulled to the head and Stat disagree: feed %v, stat %v", what, fv, versions)
	}
	if len(versions) != len(got) {
		t.Fatalf("%s: Stat sees %d files, Get %d", what, len(versions), len(got))
	}
	return seen
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func paths2(infos []datastore.Info) string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Path)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// RunKilledCommits runs the suite's KilledCommitsAllOrNothing on one store, for
// a driver's own test with a small MaxCommit (cheap: commits of a few more
// entries than it).
func RunKilledCommits(t *testing.T, s *datastore.Store) { testKilledCommits(t, s) }
