package treesync_test

// Issue 27: the working tree is the user's. A store that other clients
// write holds whatever they put there; these tests play such a client
// (entries written with the Driver directly, bypassing the Store's checks,
// as a raw SDK write would) against working trees with links to the
// outside, and check that nothing outside the tree is read, written or
// deleted and that nothing lands in .lake/.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// foreignPut commits content at p with the store's Driver, skipping every
// check the Store makes: what a client that is not lake can leave behind.
func foreignPut(t *testing.T, s *datastore.Store, p, content string) {
	t.Helper()
	if err := foreignPutErr(t.Context(), s, p, content); err != nil {
		t.Fatalf("foreign commit of %q: %v", p, err)
	}
}

func foreignPutErr(ctx context.Context, s *datastore.Store, p, content string) error {
	return dstest.ForeignPut(ctx, s, p, content, []byte{})
}

func put(t *testing.T, s *datastore.Store, p, content string) {
	t.Helper()
	if _, err := s.Put(t.Context(), p, strings.NewReader(content), nil); err != nil {
		t.Fatalf("put %s: %v", p, err)
	}
}

// syncPartial syncs and wants exactly the paths skipped (in order).
func syncPartial(t *testing.T, tr *treesync.Tree, skipped ...string) treesync.Report {
	t.Helper()
	rep, err := tr.Sync(t.Context(), treesync.Scope{})
	if len(skipped) == 0 {
		if err != nil {
			t.Fatalf("sync: %v (skipped %v)", err, rep.Skipped)
		}
		return rep
	}
	if !errors.Is(err, treesync.ErrPartial) {
		t.Fatalf("sync: %v, want ErrPartial naming %v", err, skipped)
	}
	wantSkipped(t, rep.Skipped, skipped...)
	return rep
}

func wantSkipped(t *testing.T, got []treesync.Skipped, want ...string) {
	t.Helper()
	var paths []string
	for _, s := range got {
		paths = append(paths, s.Path)
		if s.Why == "" {
			t.Errorf("skipped %s without a reason", s.Path)
		}
	}
	if strings.Join(paths, "|") != strings.Join(want, "|") {
		t.Fatalf("skipped %v, want %v (%+v)", paths, want, got)
	}
}

// outside makes a directory beside the trees (never synced) and returns it.
func outside(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func symlink(t *testing.T, tr *treesync.Tree, p, target string) {
	t.Helper()
	name := filepath.Join(tr.Dir(), filepath.FromSlash(p))
	os.MkdirAll(filepath.Dir(name), 0o755)
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// Row 1 and 2: entries under .lake written by another client are never
// pulled into the tree's state, and a sync after them still pushes edits.
func TestForeignStateEntriesNeverPulled(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		a := newTree(t, s, nil)
		write(t, a, "data/m/1/f", "f0")
		syncPartial(t, a)
		foreignPut(t, s, ".lake/dirty", "data/nothing\n")
		foreignPut(t, s, ".lake/lock", "x")
		foreignPut(t, s, ".lake/state.json", `{"version":1}`)
		foreignPut(t, s, ".LAKE/catalog.json", `{}`)
		foreignPut(t, s, "data/m/1/.lake/dirty", "data/nothing\n")
		put(t, s, "data/m/1/g", "g0")
		// The partitions .lake and .LAKE are named by the pull where the
		// store lists them; S3 lists no head whose key names no valid
		// partition (one stray key must not stop every reader): there
		// lake data check names them (below) and the sync does not.
		skipped := []string{"data/m/1/.lake/dirty", `partition ".LAKE"`, `partition ".lake"`}
		_, onS3 := s.Driver().(*s3fs.Driver)
		if onS3 {
			skipped = skipped[:1]
		}
		rep := syncPartial(t, a, skipped...)
		if rep.Downloaded != 1 {
			t.Fatalf("sync beside foreign entries: %+v, want data/m/1/g downloaded", rep)
		}
		wantFile(t, a, "data/m/1/g", "g0")
		if b, err := os.ReadFile(filepath.Join(a.Dir(), ".lake", "dirty")); err == nil {
			t.Fatalf(".lake/dirty holds %q after the sync", b)
		}
		if _, err := os.Stat(filepath.Join(a.Dir(), "data/m/1/.lake")); err == nil {
			t.Fatal("data/m/1/.lake was created")
		}
		// The edit is found and pushed: the foreign hints were never used.
		write(t, a, "data/m/1/f", "f1")
		st, err := a.Status(t.Context(), treesync.Scope{})
		if err != nil || len(st.Local) != 1 || st.Local[0].Path != "data/m/1/f" {
			t.Fatalf("status after an edit: %+v, %v", st, err)
		}
		if rep := syncPartial(t, a); rep.Committed != 1 {
			t.Fatalf("sync of the edit: %+v", rep)
		}
		wantRemote(t, s, "data/m/1/f", "f1")
		// A conflict decided with --prefer remote touches no state file.
		b := newTree(t, s, &treesync.Options{Prefer: treesync.PreferRemote})
		syncPartial(t, b, skipped...)
		write(t, b, "data/m/1/f", "b")
		write(t, a, "data/m/1/f", "a")
		syncPartial(t, a)
		if rep := syncPartial(t, b); len(rep.Resolved) != 1 {
			t.Fatalf("prefer remote: %+v", rep)
		}
		wantFile(t, b, "data/m/1/f", "a")
		if _, err := b.Status(t.Context(), treesync.Scope{}); err != nil {
			t.Fatalf("status after prefer remote: %v (state damaged?)", err)
		}
		// The store itself refuses .lake from lake's clients.
		if _, err := s.Put(t.Context(), "data/x/.lake/dirty", strings.NewReader("x"), nil); !errors.Is(err, metastore.ErrReservedKey) {
			t.Fatalf("put under .lake: %v, want ErrReservedKey", err)
		}
		if onS3 {
			rep, err := s.Check(t.Context(), datastore.CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			named := map[string]bool{}
			for _, p := range rep.Problems {
				for _, part := range []string{".lake", ".LAKE"} {
					if strings.HasSuffix(p.Object, "/h/"+part) {
						named[part] = true
					}
				}
			}
			if !named[".lake"] || !named[".LAKE"] {
				t.Fatalf("lake data check names the foreign partitions' heads %v; problems %v", named, rep.Problems)
			}
		}
	})
}

// TestForeignCatalogEntriesSkipped: entries a foreign writer left in the
// catalog scope, which every sync of every namespace reads (a partition
// whose name is no namespace's, a path that names no model, a row that
// does not decode, a row that names another namespace's model), are
// skipped and named (exit 9), never mirrored, and the sync goes on: its
// commit lands, the mirror keeps the honest rows, and a damaged row of the
// tree's own model is rebuilt by its fold. Before, one such entry failed
// every sync of every namespace (the fold, every sync of the namespace).
func TestForeignCatalogEntriesSkipped(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, nil)
		write(t, a, "data/m/1/f", "f0")
		syncPartial(t, a)
		cat, err := s.CatalogStore()
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := json.Marshal(catalog.Row{Namespace: "default", Model: "m/1", State: catalog.Orphaned})
		for _, e := range []struct{ path, meta string }{
			{".lake/x", ""},                                // a partition no namespace has (on bolt and DynamoDB)
			{"ns2/../../x", ""},                            // names no model
			{"ns3/t%2F1%2Fx", "garbage"},                   // not a row
			{"ns4/t%2F1%2Fx", string(forged)},              // another model's row
			{catalog.RowPath("default", "m/1"), "garbage"}, // the tree's own model's row, damaged
		} {
			if err := dstest.ForeignPut(ctx, cat, e.path, "x", []byte(e.meta)); err != nil {
				t.Fatalf("foreign commit of %q: %v", e.path, err)
			}
		}
		want := []string{catalog.RowPath("default", "m/1"), "ns2/../../x", "ns3/t%2F1%2Fx", "ns4/t%2F1%2Fx"}
		if _, onS3 := s.Driver().(*s3fs.Driver); !onS3 {
			// S3 lists no head whose key names no valid partition.
			want = append([]string{`catalog partition ".lake"`}, want...)
		}
		write(t, a, "data/m/1/f", "f1")
		rep := syncPartial(t, a, want...)
		if rep.Committed != 1 {
			t.Fatalf("the sync beside the foreign rows: %+v, want its commit", rep)
		}
		wantRemote(t, s, "data/m/1/f", "f1")
		mirror, err := a.Catalog()
		if err != nil {
			t.Fatal(err)
		}
		if len(mirror) != 1 || mirror["default/m/1"].State == catalog.Orphaned || mirror["default/m/1"].Files != 1 {
			t.Fatalf("the mirror: %+v, want the honest row of default/m/1 alone", mirror)
		}
		// The damaged row of the tree's own model was rebuilt by the
		// sync's fold, as a model with no row is.
		if r, ok, err := catalog.Get(ctx, s, "default", "m/1"); err != nil || !ok || r.Files != 1 || r.Model != "m/1" {
			t.Fatalf("default/m/1's row after the fold: %+v, %v, %v; want it rebuilt", r, ok, err)
		}
		// Named once: the next sync reads past them.
		write(t, a, "data/m/1/f", "f2")
		if rep := syncPartial(t, a); rep.Committed != 1 {
			t.Fatalf("the next sync: %+v", rep)
		}
		// A new tree reads the catalog from the start: the foreign
		// entries are named again; the damaged row is not, the fold
		// having replaced it (a feed names a path's latest change).
		b := newTree(t, s, nil)
		syncPartial(t, b, slices.DeleteFunc(want, func(e string) bool { return e == catalog.RowPath("default", "m/1") })...)
		wantFile(t, b, "data/m/1/f", "f2")
	})
}

// Invalid paths a foreign writer left (.., absolute, filed in another
// partition) are skipped, named, and the rest syncs.
func TestForeignInvalidPathsSkipped(t *testing.T) {
	s := boltStore(t)
	a := newTree(t, s, nil)
	foreignPut(t, s, "data/m/1/../../../../escape", "x")
	foreignPut(t, s, "../escape", "x")
	put(t, s, "data/m/1/ok", "ok")
	rep, err := a.Sync(t.Context(), treesync.Scope{})
	if !errors.Is(err, treesync.ErrPartial) || len(rep.Skipped) != 2 || rep.Downloaded != 1 {
		t.Fatalf("sync: %+v, %v", rep, err)
	}
	wantFile(t, a, "data/m/1/ok", "ok")
	if _, err := os.Stat(filepath.Join(filepath.Dir(a.Dir()), "escape")); err == nil {
		t.Fatal("a file was written outside the tree")
	}
	// The next sync does not meet them again (its positions moved on).
	syncPartial(t, a)
}

// Row 3: a link in the tree to a directory outside; another client puts a
// file below the link's path. Nothing is written outside.
func TestPullNeverWritesThroughALink(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		out := outside(t)
		a := newTree(t, s, nil)
		symlink(t, a, "data/sym", out)
		symlink(t, a, "data/rel", "../"+filepath.Base(out)) // relative, out of the tree too
		put(t, s, "data/sym/pwned", "pwned")
		put(t, s, "data/rel/pwned", "pwned")
		put(t, s, "data/ok", "ok")
		rep, err := a.Run(t.Context(), treesync.Scope{}, func(context.Context, *lock.Lease) error { return nil }, treesync.RunOptions{})
		if !errors.Is(err, treesync.ErrPartial) {
			t.Fatalf("run: %v", err)
		}
		t.Logf("%+v", rep)
		wantSkipped(t, rep.Skipped, "data/rel", "data/rel/pwned", "data/sym", "data/sym/pwned")
		if _, err := os.Stat(filepath.Join(out, "pwned")); err == nil {
			t.Fatal("outside/pwned was created through the link")
		}
		wantFile(t, a, "data/ok", "ok")
		st, err := a.Status(t.Context(), treesync.Scope{})
		if err != nil {
			t.Fatal(err)
		}
		wantSkipped(t, st.Skipped, "data/rel", "data/rel/pwned", "data/sym", "data/sym/pwned")
		// The way out: replace the link with a directory; the next sync
		// retries the skipped entries.
		os.Remove(filepath.Join(a.Dir(), "data/sym"))
		os.Remove(filepath.Join(a.Dir(), "data/rel"))
		if rep := syncPartial(t, a); rep.Downloaded != 2 {
			t.Fatalf("sync after the links went: %+v", rep)
		}
		wantFile(t, a, "data/sym/pwned", "pwned")
	})
}

// Row 4: a synced directory replaced by a link to an outside directory
// holding an identical file; another client deletes the file. The outside
// file stays.
func TestRemoteDeleteNeverThroughALink(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		out := outside(t)
		a, b := newTree(t, s, nil), newTree(t, s, nil)
		write(t, a, "data/d/secret", "secret")
		syncPartial(t, a)
		syncPartial(t, b)
		os.RemoveAll(filepath.Join(a.Dir(), "data/d"))
		symlink(t, a, "data/d", out)
		os.Remove(filepath.Join(b.Dir(), "data/d/secret"))
		syncPartial(t, b) // the delete
		_, err := a.Run(t.Context(), treesync.Scope{}, func(context.Context, *lock.Lease) error { return nil }, treesync.RunOptions{})
		if !errors.Is(err, treesync.ErrPartial) {
			t.Fatalf("run: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(out, "secret")); err != nil || string(b) != "secret" {
			t.Fatalf("the outside file: %q, %v; want it untouched", b, err)
		}
	})
}

// Row 5: hints naming paths behind links are never read or uploaded; hints
// that are not tree paths are ignored with a warning.
func TestHintsNeverReadThroughALink(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		out := outside(t)
		a := newTree(t, s, nil)
		write(t, a, "data/f", "f")
		syncPartial(t, a)
		symlink(t, a, "data/link", out)
		symlink(t, a, "data/s", filepath.Join(out, "secret"))
		write(t, a, "data/f", "f1")
		if err := a.MarkDirty("data/link/secret", "data/s", "data/f"); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(a.Dir(), ".lake", "dirty"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("../outside/secret\n/etc/passwd\n.lake/state.json\n")
		f.Close()
		rep := syncPartial(t, a, "data/link/secret", "data/s")
		if rep.Committed != 1 || len(rep.Warnings) != 3 {
			t.Fatalf("sync with hints behind links: %+v", rep)
		}
		wantRemote(t, s, "data/f", "f1")
		wantRemote(t, s, "data/link/secret", "")
		wantRemote(t, s, "data/s", "")
	})
}

// A damaged hints file (a line that is not text) falls back to a walk: an
// edit the hints do not name is still pushed.
func TestDamagedHintsWalk(t *testing.T) {
	s := boltStore(t)
	a := newTree(t, s, nil)
	write(t, a, "data/f", "f")
	write(t, a, "data/g", "g")
	syncPartial(t, a)
	write(t, a, "data/g", "g1")
	if err := os.WriteFile(filepath.Join(a.Dir(), ".lake", "dirty"), []byte("data/f\n\xff\xfe\x00junk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := syncPartial(t, a)
	if rep.Committed != 1 || len(rep.Warnings) != 1 {
		t.Fatalf("sync with damaged hints: %+v", rep)
	}
	wantRemote(t, s, "data/g", "g1")
}

// The state directory is never written through a link.
func TestStateDirLinkRefused(t *testing.T) {
	s := boltStore(t)
	out := outside(t)
	a := newTree(t, s, nil)
	symlink(t, a, ".lake", out)
	if _, err := a.Sync(t.Context(), treesync.Scope{}); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("sync with .lake a link: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Fatalf("outside holds %v, want only its secret", ents)
	}
}

// Row 6 from the tree's side: a local file where the store has a directory
// (and the other way round) is skipped with the way out, and the rest
// syncs; once the user renames it, the next sync completes.
func TestFileDirectoryClashInTheTree(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		a, b := newTree(t, s, nil), newTree(t, s, nil)
		write(t, b, "data/m/n", "n")
		write(t, b, "data/ok", "ok")
		write(t, b, "data/q", "q")
		syncPartial(t, b)
		write(t, a, "data/m", "local m") // a file where the store has a directory
		write(t, a, "data/q/r", "r")     // files below where the store has a file
		rep, err := a.Sync(t.Context(), treesync.Scope{})
		if !errors.Is(err, treesync.ErrPartial) {
			t.Fatalf("sync: %+v, %v", rep, err)
		}
		paths := map[string]string{}
		for _, sk := range rep.Skipped {
			paths[sk.Path] = sk.Why
		}
		if _, ok := paths["data/m/n"]; !ok {
			t.Fatalf("skipped %+v, want data/m/n named", rep.Skipped)
		}
		if _, ok := paths["data/q"]; !ok {
			t.Fatalf("skipped %+v, want data/q named", rep.Skipped)
		}
		wantFile(t, a, "data/ok", "ok")
		wantFile(t, a, "data/m", "local m")
		if c, ok := s.Driver().(interface{ ChecksClashes() bool }); ok && c.ChecksClashes() {
			// The store refused the push of data/m and data/q/r; the rest
			// of the commit went through.
			for _, p := range []string{"data/m", "data/q/r"} {
				if _, ok := paths[p]; !ok {
					t.Fatalf("skipped %+v, want %s named (the store refuses it)", rep.Skipped, p)
				}
				wantRemote(t, s, p, "")
			}
		}
		st, err := a.Status(t.Context(), treesync.Scope{})
		if err != nil || len(st.Skipped) == 0 {
			t.Fatalf("status: %+v, %v", st, err)
		}
		// The way out: move the local file and directory aside.
		os.Rename(filepath.Join(a.Dir(), "data/m"), filepath.Join(a.Dir(), "data/m.local"))
		os.Rename(filepath.Join(a.Dir(), "data/q"), filepath.Join(a.Dir(), "data/q.local"))
		rep, err = a.Sync(t.Context(), treesync.Scope{})
		if err != nil {
			t.Fatalf("sync after the rename: %+v, %v", rep, err)
		}
		wantFile(t, a, "data/m/n", "n")
		wantFile(t, a, "data/q", "q")
		wantRemote(t, s, "data/m.local", "local m")
		wantRemote(t, s, "data/q.local/r", "r")
	})
}

// TestDamagedLockRecordTakenOver: a foreign writer's bytes over the
// namespace's sync lock record stop no sync: the next one replaces the
// record at a new generation, as a missing record, fences as after any
// takeover, and commits.
func TestDamagedLockRecordTakenOver(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, nil)
		write(t, a, "data/m/1/f", "f0")
		syncPartial(t, a)
		key := "rec/" + datastore.DefaultNamespace + "/sync"
		cur, err := s.Records().GetRecord(ctx, key)
		if err != nil {
			t.Fatalf("the sync lock's record: %v", err)
		}
		if err := s.Records().CASRecord(ctx, key, metastore.ExpectValue(cur), []byte("garbage")); err != nil {
			t.Fatal(err)
		}
		write(t, a, "data/m/1/f", "f1")
		rep := syncPartial(t, a)
		if rep.Committed != 1 {
			t.Fatalf("the sync over a damaged lock record: %+v", rep)
		}
		wantRemote(t, s, "data/m/1/f", "f1")
		if got, err := s.Records().GetRecord(ctx, key); err != nil || !strings.Contains(string(got), `"token"`) {
			t.Fatalf("the lock record after the sync: %q, %v; want a lock record again", got, err)
		}
	})
}
