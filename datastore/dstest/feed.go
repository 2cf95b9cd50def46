package dstest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

func testChanges(t *testing.T, s *datastore.Store) {
	for i := range 5 {
		put(t, s, fmt.Sprintf("data/m/1/f%d", i), "v")
	}
	put(t, s, "data/m/2/other", "v") // another partition: its own feed
	ch, upTo := pullAll(t, s, "m/1", 0)
	if got := paths(ch); got != "data/m/1/f0@1 data/m/1/f1@2 data/m/1/f2@3 data/m/1/f3@4 data/m/1/f4@5" || upTo != 5 {
		t.Fatalf("changes = %s up to %d", got, upTo)
	}
	// Rewrites move a path's one entry to the end: only the latest stays.
	put(t, s, "data/m/1/f1", "v2")
	put(t, s, "data/m/1/f3", "v2")
	put(t, s, "data/m/1/f1", "v3")
	ch, upTo = pullAll(t, s, "m/1", 0)
	if got := paths(ch); got != "data/m/1/f0@1 data/m/1/f2@3 data/m/1/f4@5 data/m/1/f3@7 data/m/1/f1@8" || upTo != 8 {
		t.Fatalf("changes after rewrites = %s up to %d", got, upTo)
	}
	ch, upTo = pullAll(t, s, "m/1", 5)
	if got := paths(ch); got != "data/m/1/f3@7 data/m/1/f1@8" || upTo != 8 {
		t.Fatalf("changes after 5 = %s up to %d", got, upTo)
	}
	ch, upTo = pullAll(t, s, "m/1", 8)
	if len(ch) != 0 || upTo != 8 {
		t.Fatalf("changes at the head = %s up to %d", paths(ch), upTo)
	}
	if h, err := s.Head(t.Context(), "m/1"); err != nil || h.Seq != 8 || h.Floor != 0 {
		t.Fatalf("Head = %+v, %v", h, err)
	}
	_, _, err := s.Changes(t.Context(), "m/1", 9, 10)
	wantErr(t, "position beyond the head", err, metastore.ErrInvalidArgument)
	ch, upTo = pullAll(t, s, "never/changed", 0)
	if len(ch) != 0 || upTo != 0 {
		t.Fatalf("unknown partition = %s up to %d", paths(ch), upTo)
	}
	// Non-model paths belong to their first segment's partition, and so do
	// the paths under data/ that name no model.
	put(t, s, "definitions/a/b.yaml", "d")
	ch, _ = pullAll(t, s, "definitions", 0)
	if paths(ch) != "definitions/a/b.yaml@1" {
		t.Fatalf("definitions changes = %s", paths(ch))
	}
	put(t, s, "data/README", "r")
	put(t, s, "data/m/notes", "n")
	// On a driver of sparse positions, the models' claims above them
	// took positions in data (SparsePositions).
	ch, upTo = pullAll(t, s, "data", 0)
	feedIs(t, s, "data changes", ch, upTo, "data/README@1 data/m/notes@2", 2)
}

func testChangesPaged(t *testing.T, s *datastore.Store) {
	for i := range 10 {
		put(t, s, fmt.Sprintf("data/m/1/f%d", i), "v")
	}
	var got []uint64
	after := uint64(0)
	for range 20 {
		ch, upTo, err := s.Changes(t.Context(), "m/1", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) > 3 {
			t.Fatalf("page of %d over a limit of 3", len(ch))
		}
		for _, c := range ch {
			if c.Pos <= after || c.Pos > upTo {
				t.Fatalf("change at %d outside (%d, %d]", c.Pos, after, upTo)
			}
			got = append(got, c.Pos)
		}
		if upTo == after {
			break
		}
		after = upTo
	}
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("paged positions = %v", got)
	}
}

func testPositionsNotClock(t *testing.T, s *datastore.Store) {
	put(t, s, "data/m/1/a", "now")
	ch, upTo := pullAll(t, s, "m/1", 0)
	if len(ch) != 1 {
		t.Fatalf("first pull = %s", paths(ch))
	}
	// A writer whose clock lags by a day writes after the puller's last
	// pull; a timestamp-first feed would file it behind the watermark.
	s.SetClock(func() time.Time { return time.Now().Add(-24 * time.Hour) })
	lag := put(t, s, "data/m/1/b", "lagging clock")
	s.SetClock(time.Now)
	if lag.Pos != 2 {
		t.Fatalf("lagging writer got position %d, want 2", lag.Pos)
	}
	ch, _ = pullAll(t, s, "m/1", upTo)
	if paths(ch) != "data/m/1/b@2" {
		t.Fatalf("pull after a lagging writer = %s, want data/m/1/b@2", paths(ch))
	}
}

func testPartitions(t *testing.T, s *datastore.Store) {
	parts, err := s.Partitions(t.Context())
	if err != nil || len(parts) != 0 {
		t.Fatalf("Partitions of an empty store = %v, %v", parts, err)
	}
	heads, cur, err := s.ChangedPartitions(t.Context(), "")
	if err != nil || len(heads) != 0 || cur == "" {
		t.Fatalf("ChangedPartitions of an empty store = %v, %q, %v", heads, cur, err)
	}
	for i := range 20 {
		put(t, s, fmt.Sprintf("data/m/%02d/f", i), "v")
	}
	put(t, s, "definitions/x", "v")
	parts, err = s.Partitions(t.Context())
	if err != nil || len(parts) != 21 || parts[0] != "definitions" || parts[1] != "m/00" {
		t.Fatalf("Partitions = %v, %v", parts, err)
	}
	heads, cur, err = s.ChangedPartitions(t.Context(), cur)
	if err != nil || len(heads) != 21 {
		t.Fatalf("ChangedPartitions after 21 first changes = %v, %v", heads, err)
	}
	heads, cur, err = s.ChangedPartitions(t.Context(), cur)
	if err != nil || len(heads) != 0 {
		t.Fatalf("ChangedPartitions with nothing changed = %v, %v", heads, err)
	}
	put(t, s, "data/m/07/f", "v2")
	put(t, s, "data/m/07/g", "v")
	put(t, s, "data/m/13/f", "v2")
	heads, cur, err = s.ChangedPartitions(t.Context(), cur)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, h := range heads {
		got[h.Partition] = h.Seq
	}
	if len(got) != 2 || got["m/07"] != 3 || got["m/13"] != 2 {
		t.Fatalf("ChangedPartitions after changes to m/07 and m/13 = %v", heads)
	}
	if heads, _, err = s.ChangedPartitions(t.Context(), cur); err != nil || len(heads) != 0 {
		t.Fatalf("ChangedPartitions again = %v, %v", heads, err)
	}
	_, _, err = s.ChangedPartitions(t.Context(), "garbage")
	wantErr(t, "bad feed cursor", err, metastore.ErrInvalidCursor)
}

func testFencedCommit(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	lockKey := "lock/ns/sync"
	if err := s.Records().CASRecord(ctx, lockKey, metastore.ExpectAbsent(), []byte("token-1")); err != nil {
		t.Fatal(err)
	}
	stage := func(p, c string) datastore.Entry {
		st, err := s.Upload(ctx, p, strings.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return datastore.Entry{Put: &st}
	}
	out, err := s.Commit(ctx, &datastore.Fence{Key: lockKey, Token: []byte("token-1")},
		[]datastore.Entry{stage("data/m/1/a", "a1"), stage("data/m/2/b", "b1")})
	if err != nil || len(out) != 2 {
		t.Fatalf("fenced commit under the held token: %v, %d changes", err, len(out))
	}
	// A newer holder took the lock: the old holder's commit changes nothing.
	if err := s.Records().CASRecord(ctx, lockKey, metastore.ExpectValue([]byte("token-1")), []byte("token-2")); err != nil {
		t.Fatal(err)
	}
	for _, fence := range []datastore.Fence{{Key: lockKey, Token: []byte("token-1")}, {Key: "lock/ns/none", Token: []byte("token-1")}, {Key: lockKey, Token: []byte("token-")}} {
		_, err = s.Commit(ctx, &fence, []datastore.Entry{stage("data/m/1/a", "stale"), stage("data/m/3/c", "stale"), {Delete: "data/m/2/b"}})
		wantErr(t, "commit under a stale fence", err, metastore.ErrConflict)
		if !datastore.IsFenceConflict(err) {
			t.Fatalf("stale fence error does not say it is the fence: %v", err)
		}
	}
	// A commit that would change nothing still answers for its fence.
	_, err = s.Commit(ctx, &datastore.Fence{Key: lockKey, Token: []byte("token-1")}, []datastore.Entry{{Delete: "data/m/9/absent"}})
	wantErr(t, "no-op commit under a stale fence", err, metastore.ErrConflict)
	wantContent(t, s, "data/m/1/a", "a1")
	wantContent(t, s, "data/m/2/b", "b1")
	wantNotFound(t, s, "data/m/3/c")
	for part, seq := range map[string]uint64{"m/1": 1, "m/2": 1, "m/3": 0} {
		if h, err := s.Head(ctx, part); err != nil || h.Seq != seq {
			t.Fatalf("Head(%s) = %+v, %v; want seq %d", part, h, err, seq)
		}
	}
	if _, err := s.Commit(ctx, &datastore.Fence{Key: lockKey, Token: []byte("token-2")}, []datastore.Entry{{Delete: "data/m/2/b"}}); err != nil {
		t.Fatalf("commit under the new token: %v", err)
	}
	wantNotFound(t, s, "data/m/2/b")
}

func testLargeCommit(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	n := min(s.Driver().MaxCommit(), 200)*2 + 3
	if err := s.Records().CASRecord(ctx, "lock/big", metastore.ExpectAbsent(), []byte("t")); err != nil {
		t.Fatal(err)
	}
	var entries []datastore.Entry
	for i := range n {
		st, err := s.Upload(ctx, fmt.Sprintf("data/m/%d/f%04d", i%5, i), strings.NewReader(fmt.Sprint(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &st})
	}
	out, err := s.Commit(ctx, &datastore.Fence{Key: "lock/big", Token: []byte("t")}, entries)
	if err != nil || len(out) != n {
		t.Fatalf("commit of %d entries: %v, %d applied", n, err, len(out))
	}
	files, err := s.ListAll(ctx, "data/m/")
	if err != nil || len(files) != n {
		t.Fatalf("after the commit %d files are listed, want %d (%v)", len(files), n, err)
	}
	total := 0
	for i := range 5 {
		ch, _ := pullAll(t, s, fmt.Sprintf("m/%d", i), 0)
		total += len(ch)
	}
	if total != n {
		t.Fatalf("feeds hold %d changes, want %d", total, n)
	}
}

func testReclaim(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	big := pattern(2*datastore.ChunkSize+10, 3)
	put(t, s, "data/m/1/replaced", big)
	put(t, s, "data/m/1/replaced", "small")
	abandoned, err := s.Upload(ctx, "data/m/1/abandoned", strings.NewReader(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Within the grace period nothing goes.
	s.SetClock(func() time.Time { return start.Add(30 * time.Minute) })
	st, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour})
	if err != nil || st != (datastore.ReclaimStats{}) {
		t.Fatalf("Reclaim within the grace period = %+v, %v", st, err)
	}
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	st, err = s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour})
	if err != nil || st.Uploads != 1 || st.Versions != 1 || st.Chunks != 6 {
		t.Fatalf("Reclaim after the grace period = %+v, %v; want 1 upload, 1 version, 6 chunks", st, err)
	}
	_, err = s.Commit(ctx, nil, []datastore.Entry{{Put: &abandoned}})
	wantErr(t, "commit of a reclaimed upload", err, datastore.ErrUploadExpired)
	wantNotFound(t, s, "data/m/1/abandoned")
	wantContent(t, s, "data/m/1/replaced", "small")
	if st, _ = s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); st != (datastore.ReclaimStats{}) {
		t.Fatalf("second Reclaim = %+v, want nothing", st)
	}
}

func testHorizon(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	put(t, s, "data/m/1/a", "a")                           // 1
	put(t, s, "data/m/1/b", "b")                           // 2
	if _, err := s.Delete(ctx, "data/m/1/a"); err != nil { // 3
		t.Fatal(err)
	}
	put(t, s, "data/m/1/c", "c") // 4
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	st, err := s.Reclaim(ctx, datastore.ReclaimOptions{Horizon: time.Hour})
	if err != nil || st.Tombstones != 1 {
		t.Fatalf("Reclaim past the horizon = %+v, %v; want 1 tombstone", st, err)
	}
	h, err := s.Head(ctx, "m/1")
	if err != nil || h.Floor != 3 || h.Seq != 4 {
		t.Fatalf("Head after purge = %+v, %v; want floor 3, seq 4", h, err)
	}
	for _, after := range []uint64{0, 2} {
		_, _, err := s.Changes(ctx, "m/1", after, 10)
		wantErr(t, fmt.Sprintf("Changes from %d below the floor", after), err, datastore.ErrHorizon)
		if !errors.Is(err, metastore.ErrCursorExpired) {
			t.Fatalf("ErrHorizon does not match ErrCursorExpired: %v", err)
		}
	}
	ch, _ := pullAll(t, s, "m/1", 3)
	if paths(ch) != "data/m/1/c@4" {
		t.Fatalf("Changes from the floor = %s", paths(ch))
	}
	// The resync: the head, then the listing, then the feed from that head.
	files, err := s.ListAll(ctx, "data/m/1/")
	if err != nil || len(files) != 2 {
		t.Fatalf("resync listing = %s, %v", paths(files), err)
	}
	if m, _ := s.StatMany(ctx, []string{"data/m/1/a"}); len(m) != 0 {
		t.Fatalf("purged tombstone still stat-able: %+v", m)
	}
}

func testKilledWriter(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	// Killed after all its chunks, before its metadata.
	if _, err := s.Upload(ctx, "data/m/1/whole", strings.NewReader(pattern(3*datastore.ChunkSize, 1)), nil); err != nil {
		t.Fatal(err)
	}
	// Killed in the middle of its chunks (the reader fails half way).
	_, err := s.Upload(ctx, "data/m/1/half", &failingReader{left: datastore.ChunkSize + 100}, nil)
	if err == nil {
		t.Fatal("Upload from a failing reader succeeded")
	}
	for _, p := range []string{"data/m/1/whole", "data/m/1/half"} {
		wantNotFound(t, s, p)
	}
	if m, _ := s.StatMany(ctx, []string{"data/m/1/whole", "data/m/1/half"}); len(m) != 0 {
		t.Fatalf("StatMany sees uncommitted uploads: %+v", m)
	}
	if files, _ := s.ListAll(ctx, ""); len(files) != 0 {
		t.Fatalf("List sees uncommitted uploads: %s", paths(files))
	}
	if ch, upTo := pullAll(t, s, "m/1", 0); len(ch) != 0 || upTo != 0 {
		t.Fatalf("feed sees uncommitted uploads: %s", paths(ch))
	}
	if parts, _ := s.Partitions(ctx); len(parts) != 0 {
		t.Fatalf("uncommitted uploads registered partitions %v", parts)
	}
	s.SetClock(func() time.Time { return start.Add(2 * datastore.DefaultGrace) })
	st, err := s.Reclaim(ctx, datastore.ReclaimOptions{})
	if err != nil || st.Uploads != 2 || st.Chunks != 5 {
		t.Fatalf("Reclaim of killed uploads = %+v, %v; want 2 uploads, 5 chunks", st, err)
	}
}

type failingReader struct{ left int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, errors.New("writer killed")
	}
	n := min(len(p), r.left)
	for i := range n {
		p[i] = 'k'
	}
	r.left -= n
	return n, nil
}
