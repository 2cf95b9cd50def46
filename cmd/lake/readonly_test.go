package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Regression tests for https://github.com/lakemeta/lake/issues/11: reads
// never write.

// holdFile starts a child that holds dir/lake.db (read-only when readOnly)
// until the test ends.
func holdFile(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), "LAKE_TEST_HOLD_FILE="+filepath.Join(dir, "lake.db"))
	if readOnly {
		holder.Env = append(holder.Env, "LAKE_TEST_HOLD_READONLY=1")
	}
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	buf := make([]byte, 8)
	if n, _ := stdout.Read(buf); string(buf[:n]) != "holding\n" {
		t.Fatalf("holder did not start: %q", buf[:n])
	}
}

// TestReadsLeaveTheFileUnchanged: get and ls (every form) leave a healthy
// store byte for byte as it was, also when the file is not writable.
func TestReadsLeaveTheFileUnchanged(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	ok(t, run(t, dir, "", "put", "tbl/a", "1"))
	ok(t, run(t, dir, "", "put", "tbl/b", "2"))
	path := filepath.Join(dir, "lake.db")
	before := sum(t, path)
	for _, args := range [][]string{{"get", "tbl/a"}, {"ls"}, {"ls", "tbl/", "--json"}, {"ls", "tbl/", "--limit", "1"}, {"check"}} {
		ok(t, run(t, dir, "", args...))
		if sum(t, path) != before {
			t.Fatalf("lake %s changed the file", strings.Join(args, " "))
		}
	}
	if r := run(t, dir, "", "get", "tbl/missing"); r.code != exitNotFound || sum(t, path) != before {
		t.Fatalf("get of a missing key: exit %d, or the file changed", r.code)
	}
	// A file without write permission can still be read.
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if r := ok(t, run(t, dir, "", "get", "tbl/b")); r.stdout != "2" {
		t.Fatalf("get on a read-only file = %q", r.stdout)
	}
}

// TestTwoReadersAtOnce: while another process reads the file, get and ls
// run beside it; a writer fails fast with the lock message.
func TestTwoReadersAtOnce(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	ok(t, run(t, dir, "", "put", "tbl/a", "1"))
	holdFile(t, dir, true)
	if r := ok(t, run(t, dir, "", "get", "tbl/a")); r.stdout != "1" {
		t.Fatalf("get beside a reader = %q", r.stdout)
	}
	ok(t, run(t, dir, "", "ls"))
	start := time.Now()
	r := run(t, dir, "", "put", "tbl/a", "2")
	if r.code != exitError || !strings.Contains(r.stderr, "locked by another process") {
		t.Fatalf("put beside a reader: exit %d, stderr %q", r.code, r.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("put took %v to fail", took)
	}
}

// TestReaderBesideANode: get, ls and check next to a running node fail
// fast; get and ls point at the node.
func TestReaderBesideANode(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	startNode(t, dir, http.DefaultClient, "http")
	for _, args := range [][]string{{"get", "tbl/a"}, {"ls"}, {"check"}} {
		start := time.Now()
		r := run(t, dir, "", args...)
		if r.code != exitError || !strings.Contains(r.stderr, "locked by another process") {
			t.Fatalf("lake %s beside a node: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
		if args[0] != "check" && !strings.Contains(r.stderr, "--store http://") {
			t.Fatalf("lake %s beside a node does not point at the node: %q", args[0], r.stderr)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("lake %s took %v to fail", args[0], took)
		}
	}
}

// TestInitMakesAStoreOfANonStore: the file every other command refuses
// (empty, another program's bbolt file) becomes a store with lake init.
func TestInitMakesAStoreOfANonStore(t *testing.T) {
	for _, row := range damagedFiles() {
		if row.name != "empty" && row.name != "foreign-bbolt-file" {
			continue
		}
		dir := t.TempDir()
		row.make(t, dir)
		ok(t, run(t, dir, "", "--store", "bolt://t.db", "init"))
		ok(t, run(t, dir, "", "--store", "bolt://t.db", "put", "tbl/a", "1"))
		if r := ok(t, run(t, dir, "", "--store", "bolt://t.db", "check")); !strings.HasPrefix(r.stdout, "ok: t.db: 1 keys") {
			t.Fatalf("%s: check after init: %q", row.name, r.stdout)
		}
	}
}
