package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dstest"
)

// TestWorkingTreeRowsFromOutside replays issue 27's rows with the binary:
// a file below a file is refused (exit 4, both named) on bolt and through
// a node; .lake is refused (exit 2); a link in the tree to the outside lets
// nothing of a pulled entry out, and the run exits 9 naming it.
func TestWorkingTreeRowsFromOutside(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		dir := t.TempDir()
		ok(t, run(t, dir, "", "init"))
		ok(t, run(t, dir, "", "data", "init"))
		testWorkingTreeRows(t, dir, "bolt://"+filepath.Join(dir, "lake.db"))
	})
	t.Run("node", func(t *testing.T) {
		dir := t.TempDir()
		n := startNode(t, dir, http.DefaultClient, "http")
		testWorkingTreeRows(t, dir, "http://"+n.addr)
	})
}

func testWorkingTreeRows(t *testing.T, dir, store string) {
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", store}, args...)...) }
	ok(t, lake("data", "put", "data/x", f))
	r := lake("data", "put", "data/x/y", f)
	if r.code != exitConflict || !strings.Contains(r.stderr, "data/x/y") || !strings.Contains(r.stderr, `data/x`) {
		t.Fatalf("put below a file: exit %d, %q; want 4 naming both", r.code, r.stderr)
	}
	ok(t, lake("data", "put", "data/m/n", f))
	if r := lake("data", "put", "data/m", f); r.code != exitConflict || !strings.Contains(r.stderr, "data/m/n") {
		t.Fatalf("put over files: exit %d, %q", r.code, r.stderr)
	}
	for _, p := range []string{".lake/dirty", "data/a/.lake/lock", "data/.Lake/x"} {
		if r := lake("data", "put", p, f); r.code != exitUsage || !strings.Contains(r.stderr, "reserved") {
			t.Fatalf("put %s: exit %d, %q; want 2, reserved", p, r.code, r.stderr)
		}
	}
	// Row 3: a link to the outside, a remote entry below its path.
	tree, out := filepath.Join(dir, "A"), filepath.Join(dir, "outside")
	os.MkdirAll(filepath.Join(tree, "data"), 0o755)
	os.MkdirAll(out, 0o755)
	if err := os.Symlink("../../outside", filepath.Join(tree, "data", "sym")); err != nil {
		t.Fatal(err)
	}
	ok(t, lake("data", "put", "data/sym/pwned", f))
	r = lake("data", "run", "-C", tree, "--", "true")
	if r.code != exitPartial || !strings.Contains(r.stderr, "lake: skipped data/sym/pwned: data/sym is a symbolic link") {
		t.Fatalf("run beside a link: exit %d, %q; want 9 naming data/sym/pwned", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "pwned")); err == nil {
		t.Fatal("outside/pwned was created")
	}
	r = lake("data", "status", "-C", tree)
	if r.code != 0 || !strings.Contains(r.stdout, "skipped\tdata/sym/pwned\t") {
		t.Fatalf("status beside a link: exit %d, %q", r.code, r.stdout)
	}
	wantLakeOnce(t, "run", r.stderr)
}

// TestForeignCatalogEntryFromOutside: an entry a foreign writer left in the
// catalog scope (a path that names no model) stops no sync: lake data sync
// commits, names it on stderr and exits 9; lake data catalog --since names
// it on stderr and prints the honest rows, and so does lake data catalog
// --all. Before, each failed, and so did every sync of every namespace.
// lake data check --catalog names them and --repair removes them.
func TestForeignCatalogEntryFromOutside(t *testing.T) {
	dir := t.TempDir()
	store := "bolt://" + filepath.Join(dir, "lake.db")
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", store}, args...)...) }
	ok(t, lake("data", "init"))
	tree := filepath.Join(dir, "tree")
	f := filepath.Join(tree, "data", "m", "1", "f")
	os.MkdirAll(filepath.Dir(f), 0o755)
	if err := os.WriteFile(f, []byte("f0"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake("data", "sync", "-C", tree))
	// The foreign writer, with the bolt file to itself between two runs.
	d, err := boltfs.Open(filepath.Join(dir, "lake.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := dstest.ForeignPut(t.Context(), cat, "ns2/../../x", "x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// A row of the namespace's own partition that does not decode, for a
	// model that does not exist: no fold ever writes it again.
	if err := dstest.ForeignPut(t.Context(), cat, "default/z/9", "x", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(f, []byte("f1"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := lake("data", "sync", "-C", tree)
	if r.code != exitPartial || !strings.Contains(r.stderr, "lake: skipped ns2/../../x: names no model") || !strings.Contains(r.stderr, "delete it in the backend") || !strings.Contains(r.stderr, "lake: skipped default/z/9") {
		t.Fatalf("sync beside a foreign catalog entry: exit %d, %q; want 9 naming it", r.code, r.stderr)
	}
	if got := ok(t, lake("data", "get", "data/m/1/f")).stdout; got != "f1" {
		t.Fatalf("the sync's commit: data/m/1/f = %q, want f1", got)
	}
	r = ok(t, lake("data", "catalog", "--since", ""))
	if !strings.Contains(r.stderr, "lake: skipped ns2/../../x: names no model") || !strings.Contains(r.stdout, "changed\tdefault\tm/1\t") {
		t.Fatalf("catalog --since beside a foreign entry: %+v", r)
	}
	r = ok(t, lake("data", "catalog", "--all"))
	if !strings.Contains(r.stderr, "lake: skipped ns2/../../x: names no model") || !strings.Contains(r.stdout, "default\tm/1\t") {
		t.Fatalf("catalog --all beside a foreign entry: %+v", r)
	}
	if !strings.Contains(r.stderr, "lake: skipped default/z/9: is not a catalog row") || !strings.Contains(r.stderr, "lake data check --catalog --repair --namespace default deletes it") {
		t.Fatalf("catalog --all names the garbage row with its way out: %q", r.stderr)
	}
	// The way out: check names both, --repair moves the one the store
	// refuses aside and deletes the row.
	if r := lake("data", "check", "--catalog"); r.code != 1 || !strings.Contains(r.stdout, "catalog row default/z/9: an entry no lake client writes") {
		t.Fatalf("check --catalog: exit %d, %q", r.code, r.stdout)
	}
	ok(t, lake("data", "check", "--catalog", "--repair"))
	ok(t, lake("data", "check", "--catalog"))
	if r := ok(t, lake("data", "catalog", "--all")); strings.Contains(r.stderr, "skipped") || !strings.Contains(r.stdout, "default\tm/1\t") {
		t.Fatalf("catalog --all after the repair: %+v", r)
	}
	if err := os.WriteFile(f, []byte("f2"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake("data", "sync", "-C", tree))
}
