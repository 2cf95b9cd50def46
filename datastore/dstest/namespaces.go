package dstest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// testNamespaces: two namespaces and the root hold the same path apart, each
// with its own feed, registry and index; records are shared, so a commit in
// a namespace is fenced on a root record.
func testNamespaces(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	a, err := s.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Namespace("beta")
	if err != nil {
		t.Fatal(err)
	}
	if root, _ := s.Namespace(datastore.DefaultNamespace); root != s {
		t.Fatalf("Namespace(%q) is not the root store", datastore.DefaultNamespace)
	}
	for _, bad := range []string{"_catalog", "a/b", "", strings.Repeat("n", 65), "-x"} {
		if bad == "" {
			continue // "" is the root
		}
		_, err := s.Namespace(bad)
		wantErr(t, "Namespace("+bad+")", err, metastore.ErrInvalidArgument)
	}
	_, cur, err := b.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "data/m/1/f", "root")
	put(t, a, "data/m/1/f", "alpha")
	put(t, a, "data/m/1/g", "alpha-g")
	put(t, a, "data/m/2/f", "alpha2")
	wantContent(t, s, "data/m/1/f", "root")
	wantContent(t, a, "data/m/1/f", "alpha")
	wantNotFound(t, b, "data/m/1/f")
	wantNotFound(t, s, "data/m/1/g")
	if files, err := b.ListAll(ctx, ""); err != nil || len(files) != 0 {
		t.Fatalf("beta lists %s, %v; want nothing", paths(files), err)
	}
	if files, err := a.ListAll(ctx, ""); err != nil || paths(files) != "data/m/1/f@1 data/m/1/g@2 data/m/2/f@1" {
		t.Fatalf("alpha lists %s, %v", paths(files), err)
	}
	if h, err := s.Head(ctx, "m/1"); err != nil || h.Seq != 1 {
		t.Fatalf("root Head(m/1) = %+v, %v; want seq 1", h, err)
	}
	if ch, _ := pullAll(t, a, "m/1", 0); paths(ch) != "data/m/1/f@1 data/m/1/g@2" {
		t.Fatalf("alpha's feed of m/1 = %s", paths(ch))
	}
	if p, err := a.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1,m/2" {
		t.Fatalf("alpha's partitions = %v, %v", p, err)
	}
	if p, err := b.Partitions(ctx); err != nil || len(p) != 0 {
		t.Fatalf("beta's partitions = %v, %v; want none", p, err)
	}
	if heads, _, err := b.ChangedPartitions(ctx, cur); err != nil || len(heads) != 0 {
		t.Fatalf("beta's changed partitions after writes elsewhere = %v, %v; want none", heads, err)
	}
	// Records are the root's: a lock taken through one namespace is seen
	// from another, and fences a commit in a third.
	if err := a.Records().CASRecord(ctx, "rec/beta/sync", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Records().GetRecord(ctx, "rec/beta/sync"); err != nil || string(v) != "t1" {
		t.Fatalf("a record written through a namespace reads %q, %v from the root", v, err)
	}
	st, err := b.Upload(ctx, "data/m/1/f", strings.NewReader("beta"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Commit(ctx, &datastore.Fence{Key: "rec/beta/sync", Token: []byte("t0")}, []datastore.Entry{{Put: &st}})
	if !datastore.IsFenceConflict(err) {
		t.Fatalf("commit in beta under a stale fence: %v, want a fence conflict", err)
	}
	if _, err := b.Commit(ctx, &datastore.Fence{Key: "rec/beta/sync", Token: []byte("t1")}, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("commit in beta under its fence: %v", err)
	}
	wantContent(t, b, "data/m/1/f", "beta")
	wantContent(t, a, "data/m/1/f", "alpha")
	// Namespaces lists the ones that committed, and the default.
	nss, err := s.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nss {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "alpha,beta,default" {
		t.Fatalf("Namespaces = %v, want alpha, beta, default", names)
	}
	// A namespace's policy is kept in its registry entry.
	c, err := a.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, KeepLast: 2, Retention: time.Minute})
	if err != nil || c.Name != "alpha" || !c.Lifecycle.Enabled {
		t.Fatalf("SetLifecycle = %+v, %v", c, err)
	}
	if c, err := a.Config(ctx); err != nil || c.Lifecycle.KeepLast != 2 || c.Lifecycle.Retention != time.Minute || c.Created.IsZero() {
		t.Fatalf("Config after SetLifecycle = %+v, %v", c, err)
	}
	if c, err := b.Config(ctx); err != nil || c.Lifecycle.Enabled {
		t.Fatalf("beta's Config = %+v, %v; want lifecycle off", c, err)
	}
	_, err = a.SetLifecycle(ctx, datastore.Lifecycle{KeepLast: -1})
	wantErr(t, "negative keep-last", err, metastore.ErrInvalidArgument)
}

// testDropPartition: a dropped partition leaves nothing (files, feed, head,
// registry, index), its live versions are reclaimed after the grace
// period, other partitions are untouched, a stale fence drops nothing, and
// a new commit starts it again at position 1.
func testDropPartition(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	if err := s.Records().CASRecord(ctx, "rec/ns/sync", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatal(err)
	}
	_, cur0, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	big := pattern(datastore.ChunkSize+5, 9)
	put(t, s, "data/m/gone/a", big)
	// b and c are in chunks too (more than InlineMax bytes), so that
	// each dropped version has chunks to reclaim.
	bBytes := pattern(datastore.InlineMax+1, 2)
	put(t, s, "data/m/gone/b", bBytes)
	put(t, s, "data/m/gone/c", pattern(datastore.InlineMax+1, 3))
	if _, err := s.Delete(ctx, "data/m/gone/c"); err != nil {
		t.Fatal(err)
	}
	put(t, s, "data/m/kept/a", "kept")
	_, cur1, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.DropPartition(ctx, &datastore.Fence{Key: "rec/ns/sync", Token: []byte("t0")}, "m/gone")
	if !datastore.IsFenceConflict(err) {
		t.Fatalf("DropPartition under a stale fence: %v, want a fence conflict", err)
	}
	wantContent(t, s, "data/m/gone/b", bBytes)
	st, err := s.DropPartition(ctx, &datastore.Fence{Key: "rec/ns/sync", Token: []byte("t1")}, "m/gone")
	if err != nil || st.Files != 2 || st.Tombstones != 1 {
		t.Fatalf("DropPartition = %+v, %v; want 2 files, 1 tombstone", st, err)
	}
	for _, p := range []string{"data/m/gone/a", "data/m/gone/b"} {
		wantNotFound(t, s, p)
	}
	if m, err := s.StatMany(ctx, []string{"data/m/gone/a", "data/m/gone/c"}); err != nil || len(m) != 0 {
		t.Fatalf("after the drop StatMany = %v, %v; want nothing, tombstones included", m, err)
	}
	if files, err := s.ListAll(ctx, ""); err != nil || paths(files) != "data/m/kept/a@1" {
		t.Fatalf("after the drop the store lists %s, %v", paths(files), err)
	}
	if h, err := s.Head(ctx, "m/gone"); err != nil || h.Seq != 0 || h.Floor != 0 {
		t.Fatalf("Head of a dropped partition = %+v, %v; want zero", h, err)
	}
	if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/kept" {
		t.Fatalf("Partitions after the drop = %v, %v", p, err)
	}
	for _, c := range []string{"", cur0} {
		heads, _, err := s.ChangedPartitions(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range heads {
			if h.Partition == "m/gone" {
				t.Fatalf("ChangedPartitions(%q) still names the dropped partition: %+v", c, heads)
			}
		}
	}
	if heads, _, err := s.ChangedPartitions(ctx, cur1); err != nil || len(heads) != 0 {
		t.Fatalf("ChangedPartitions after the drop, from before it = %v, %v; want none", heads, err)
	}
	if st, err := s.DropPartition(ctx, nil, "m/gone"); err != nil || st != (datastore.DropStats{}) {
		t.Fatalf("dropping it again = %+v, %v; want nothing, no error", st, err)
	}
	// The dropped versions' chunks go after the grace period, like a
	// replaced version's.
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	rs, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour})
	if err != nil || rs.Versions != 3 || rs.Chunks != 4 {
		t.Fatalf("Reclaim after the drop = %+v, %v; want 3 versions (2 dropped, 1 deleted before), 4 chunks", rs, err)
	}
	if rs, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour, Horizon: time.Minute}); err != nil || rs != (datastore.ReclaimStats{}) {
		t.Fatalf("Reclaim again = %+v, %v; want nothing (the tombstone went with the drop)", rs, err)
	}
	// A new commit starts the partition afresh.
	info := put(t, s, "data/m/gone/new", "n")
	if info.Pos != 1 {
		t.Fatalf("first commit after the drop is at position %d, want 1", info.Pos)
	}
	if ch, _ := pullAll(t, s, "m/gone", 0); paths(ch) != "data/m/gone/new@1" {
		t.Fatalf("feed of the new partition = %s", paths(ch))
	}
	_, err = s.DropPartition(ctx, nil, "a//b")
	if !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("DropPartition of a bad name: %v", err)
	}
	wantContent(t, s, "data/m/kept/a", "kept")
}
