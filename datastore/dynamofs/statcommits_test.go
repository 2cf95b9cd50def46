package dynamofs_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// statsAndCommits reads, with f's Store.ReadStatsForCommits, the states of
// files in ns and rows in cat and what a commit of them in each reads,
// checks that the stats are served from that read (none sent) and equal
// those of a fresh StatMany, and returns the commit's context.
func (f *prefetchPair) statsAndCommits(t *testing.T, files, rows []string) context.Context {
	t.Helper()
	ctx := t.Context()
	want := map[string]map[string]datastore.Info{}
	for s, paths := range map[string][]string{"ns": files, "cat": rows} {
		st := map[string]*datastore.Store{"ns": f.ns, "cat": f.cat}[s]
		m, err := st.StatMany(ctx, paths)
		if err != nil {
			t.Fatal(err)
		}
		want[s] = m
	}
	f.reads.Store(0)
	sctx, cctx, ok, err := f.ns.ReadStatsForCommits(ctx, map[*datastore.Store][]string{f.ns: files, f.cat: rows})
	if err != nil || !ok {
		t.Fatalf("ReadStatsForCommits: ok %v, %v", ok, err)
	}
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("the read: %d TransactGetItems; want 1", n)
	}
	for s, paths := range map[string][]string{"ns": files, "cat": rows} {
		st := map[string]*datastore.Store{"ns": f.ns, "cat": f.cat}[s]
		got, err := st.StatMany(sctx, paths)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want[s], func(a, b datastore.Info) bool {
			return a.Version == b.Version && a.Pos == b.Pos && a.Deleted == b.Deleted
		}) {
			t.Fatalf("%s's stat from the read: %v; a StatMany reads %v", s, got, want[s])
		}
	}
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("the stats from the read sent %d TransactGetItems more", n-1)
	}
	return cctx
}

// TestStatReadsForTheCommits (issue 31, prefetch.go): a sync that learns
// its dirty paths after its lock (`lake data run`) stats them, and its
// fold's rows, in the read both its commits then build on: one
// TransactGetItems for the stat of both namespaces and for both commits'
// reads, each served once (a second commit with the context, or a second
// stat, reads afresh). The answers are those of a StatMany and the
// commits land as if they had read.
func TestStatReadsForTheCommits(t *testing.T) {
	f := newPrefetchPair(t)
	ctx := t.Context()
	commitFile(ctx, t, f.ns, "data/t/m0/a", "first")
	commitFile(ctx, t, f.cat, "ns/t/m0", "first row")

	files := []string{"data/t/m0/a", "data/t/m0/b"} // a live file, a new one
	rows := []string{"ns/t/m0", "ns/t/m1"}          // a live row, a new one
	cctx := f.statsAndCommits(t, files, rows)
	f.reads.Store(0)
	before := f.d.Stats()
	commitFile(cctx, t, f.ns, files[0], "second")
	commitFile(cctx, t, f.ns, files[1], "new") // the read is used once: this one reads
	commitFile(cctx, t, f.cat, rows[0], "second row")
	if reads, pre := f.reads.Load(), f.d.Stats().Sub(before).CommitsPrefetched; reads != 1 || pre != 2 {
		t.Errorf("three commits after the read: %d TransactGetItems, %d built on it; want 1 (the second commit of ns) and 2", reads, pre)
	}
	for p, want := range map[string]string{files[0]: "second", files[1]: "new"} {
		if _, b, err := f.ns.Get(ctx, p); err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	f.wantRow(t, rows[0], "second row")

	// Both paths of a namespace in one commit, a new row: each built on
	// the read.
	cctx = f.statsAndCommits(t, files, rows)
	f.reads.Store(0)
	before = f.d.Stats()
	var entries []datastore.Entry
	for _, p := range files {
		st, err := f.ns.Upload(ctx, p, strings.NewReader("third"), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &st})
	}
	if _, err := f.ns.Commit(cctx, nil, entries); err != nil {
		t.Fatal(err)
	}
	commitFile(cctx, t, f.cat, rows[1], "new row")
	if reads, pre := f.reads.Load(), f.d.Stats().Sub(before).CommitsPrefetched; reads != 0 || pre != 2 {
		t.Errorf("both commits after the read: %d TransactGetItems, %d built on it; want 0 and 2", reads, pre)
	}
	f.wantRow(t, rows[1], "new row")

	// A namespace's commit of a path the read did not cover reads.
	cctx = f.statsAndCommits(t, files[:1], rows[:1])
	f.reads.Store(0)
	commitFile(cctx, t, f.ns, "data/t/m2/c", "elsewhere")
	if n := f.reads.Load(); n != 1 {
		t.Errorf("a commit of a path not read: %d TransactGetItems; want 1", n)
	}

	// More keys than one TransactGetItems holds: nothing read, ok false.
	var many []string
	for i := range 120 {
		many = append(many, fmt.Sprintf("data/t/m3/f%03d", i))
	}
	f.reads.Store(0)
	if _, _, ok, err := f.ns.ReadStatsForCommits(ctx, map[*datastore.Store][]string{f.ns: many}); ok || err != nil || f.reads.Load() != 0 {
		t.Errorf("120 paths: ok %v, %v, %d TransactGetItems; want not read", ok, err, f.reads.Load())
	}
}

// TestStatReadForCommitsGoneStale: between the read and the commits,
// another process commits in the data's partition and a raw SDK client,
// which lake did not write, puts the very row: each commit's conditions
// fail, it reads again and lands over what the other wrote; nothing lost.
func TestStatReadForCommitsGoneStale(t *testing.T) {
	f := newPrefetchPair(t)
	ctx := t.Context()
	_, otherNS := rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), f.table, "ns")
	cctx := f.statsAndCommits(t, []string{"data/t/m0/a"}, []string{"ns/t/m0"})
	commitFile(ctx, t, otherNS, "data/t/m0/z", "another process")
	f.putRawRow(t, "ns/t/m0")
	f.reads.Store(0)
	before := f.d.Stats()
	commitFile(cctx, t, f.ns, "data/t/m0/a", "mine")
	commitFile(cctx, t, f.cat, "ns/t/m0", "my row")
	if reads, pre := f.reads.Load(), f.d.Stats().Sub(before).CommitsPrefetched; reads != 2 || pre != 2 {
		t.Errorf("both commits over a stale read: %d TransactGetItems, %d built on it; want 2 (each reads again) and 2", reads, pre)
	}
	for p, want := range map[string]string{"data/t/m0/a": "mine", "data/t/m0/z": "another process"} {
		if _, b, err := f.ns.Get(ctx, p); err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	f.wantRow(t, "ns/t/m0", "my row")
	changes, _, err := f.ns.Changes(ctx, "t/m0", 0, 100)
	if err != nil || len(changes) != 2 || changes[0].Pos == changes[1].Pos {
		t.Fatalf("the partition's feed: %v, %v; want both files at their own positions", changes, err)
	}
}
