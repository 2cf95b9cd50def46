package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression test for https://github.com/lakemeta/lake/issues/25: the
// datastore's reads never write the bolt file, and a missing or empty file
// is an error naming `lake init`, as for the store's commands.
func TestDataReadsNeverWrite(t *testing.T) {
	dir := t.TempDir()
	reads := [][]string{
		{"data", "ls"}, {"data", "get", "data/m/1/f"}, {"data", "stat", "data/m/1/f"}, {"data", "partitions"},
		{"data", "changes", "m/1"}, {"data", "namespaces"}, {"data", "--namespace", "other", "ls"},
		{"data", "--namespace", "other", "partitions"}, {"data", "lock", "ls", "default"}, {"lock", "ls", "team"},
	}
	t.Run("missing-file", func(t *testing.T) {
		for _, args := range reads {
			r := run(t, dir, "", append([]string{"--store", "bolt://missing.db"}, args...)...)
			if r.code != exitError || !strings.Contains(r.stderr, "lake init") {
				t.Fatalf("lake %s on a missing file: exit %d, %q", strings.Join(args, " "), r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
				t.Fatalf("lake %s created the file", strings.Join(args, " "))
			}
		}
	})
	t.Run("empty-file", func(t *testing.T) {
		path := filepath.Join(dir, "empty.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range append(reads, []string{"data", "put", "data/m/1/f", "-"}) {
			r := run(t, dir, "x", append([]string{"--store", "bolt://empty.db"}, args...)...)
			if r.code != exitError || !strings.Contains(r.stderr, "init") {
				t.Fatalf("lake %s on an empty file: exit %d, %q", strings.Join(args, " "), r.code, r.stderr)
			}
			if st, err := os.Stat(path); err != nil || st.Size() != 0 {
				t.Fatalf("lake %s changed the empty file (%v)", strings.Join(args, " "), err)
			}
		}
		// data init makes it a file with the datastore's buckets.
		ok(t, run(t, dir, "", "--store", "bolt://empty.db", "data", "init"))
		ok(t, run(t, dir, "", "--store", "bolt://empty.db", "data", "ls"))
	})
	t.Run("store-without-datastore", func(t *testing.T) {
		// A store lake init made: no datastore bucket yet. Reads see an
		// empty datastore and leave every byte; the first write makes the
		// buckets it needs.
		ok(t, run(t, dir, "", "--store", "bolt://s.db", "init"))
		path := filepath.Join(dir, "s.db")
		before := sum(t, path)
		for _, args := range reads {
			r := run(t, dir, "", append([]string{"--store", "bolt://s.db"}, args...)...)
			if r.code != 0 && !(args[1] == "get" || args[1] == "stat") {
				t.Fatalf("lake %s: exit %d, %q", strings.Join(args, " "), r.code, r.stderr)
			}
			if sum(t, path) != before {
				t.Fatalf("lake %s changed the file", strings.Join(args, " "))
			}
		}
		ok(t, run(t, dir, "x", "--store", "bolt://s.db", "data", "--namespace", "other", "put", "data/m/1/f", "-"))
		before = sum(t, path)
		for _, args := range reads {
			run(t, dir, "", append([]string{"--store", "bolt://s.db"}, args...)...)
			if sum(t, path) != before {
				t.Fatalf("lake %s changed the file", strings.Join(args, " "))
			}
		}
		if r := ok(t, run(t, dir, "", "--store", "bolt://s.db", "data", "--namespace", "other", "ls")); r.stdout != "data/m/1/f\n" {
			t.Fatalf("ls: %q", r.stdout)
		}
	})
}
