package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/reqcount"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestRunReadsNoLayoutRecord (issue 31): `lake data run` opens the
// datastore with the layout its tree remembers, as `lake data sync` does,
// and proves it by the namespace's entry its read-ahead reads for the
// lifecycle policy: a run that pulls, runs CMD and commits what CMD wrote
// sends no request for the layout record, counted on the wire by a proxy in
// front of DynamoDB Local and of versitygw. Without the tree's remembered
// layout (the negative control) the same run reads the record.
func TestRunReadsNoLayoutRecord(t *testing.T) {
	t.Run("dynamodb", func(t *testing.T) {
		p, err := reqcount.Start(ddblocal.Endpoint(t))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		store := "dynamodb://" + ddblocal.TableName(t) + "?endpoint=" + p.URL
		t.Cleanup(func() { deleteDataTable(t, store) })
		runsWithoutLayoutRead(t, p, store, nil)
	})
	t.Run("s3", func(t *testing.T) {
		p, err := reqcount.Start(s3local.Endpoint(t))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		runsWithoutLayoutRead(t, p, "s3://"+s3local.Bucket(t)+"/run", []string{"AWS_ENDPOINT_URL_S3=" + p.URL})
	})
}

func runsWithoutLayoutRead(t *testing.T, p *reqcount.Proxy, store string, env []string) {
	dir, other := t.TempDir(), t.TempDir()
	lake := func(wd string, args ...string) result {
		t.Helper()
		return runEnv(t, wd, "", env, append([]string{"--store", store, "--namespace", "ns"}, args...)...)
	}
	layoutReads := func() (n int) {
		for _, l := range p.Log() {
			if strings.Contains(l, "datastore/layout") {
				n++
			}
		}
		return n
	}
	ok(t, lake(dir, "data", "init"))
	ok(t, lake(dir, "data", "lifecycle", "--enable"))
	ok(t, lake(dir, "data", "sync"))
	ok(t, lake(other, "data", "sync"))
	src := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(src, []byte("from another writer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake(other, "data", "put", "data/t/a/in/1/raw", src))

	// A run that pulls the other writer's file, and whose command reads it
	// and writes a file of its own, which the run commits.
	p.Take()
	ok(t, lake(dir, "data", "run", "--", "sh", "-c", "mkdir -p data/t/a/out/1 && cp data/t/a/in/1/raw data/t/a/out/1/raw"))
	if n := layoutReads(); n != 0 {
		t.Errorf("the run read the layout record %d times; want none (the tree remembers it, the namespace's entry proves it)", n)
	}
	if r := ok(t, lake(other, "data", "get", "data/t/a/out/1/raw")); r.stdout != "from another writer\n" {
		t.Fatalf("the run's command saw %q, want the pulled file", r.stdout)
	}

	// The negative control: the same run in a tree that remembers no
	// layout reads the record.
	if err := os.Remove(filepath.Join(dir, ".lake", "layout")); err != nil {
		t.Fatal(err)
	}
	p.Take()
	ok(t, lake(dir, "data", "run", "--", "sh", "-c", "echo again > data/t/a/out/1/raw"))
	if n := layoutReads(); n == 0 {
		t.Errorf("a run in a tree that remembers no layout did not read the record; the count above proves nothing")
	}
}

// TestRunRememberedLayoutStale (issue 31): the datastore is deleted and
// made again under the same URL with another layout (type-id) under a tree
// that remembers models. The run proves the layout before its command
// runs, finds it stale, forgets it and runs again with the record read:
// the command runs once, on a tree holding the file pulled from the new
// datastore's partition, and what it writes is committed there.
func TestRunRememberedLayoutStale(t *testing.T) {
	dir, tree := t.TempDir(), t.TempDir()
	db := filepath.Join(dir, "lake.db")
	store := "bolt://" + db
	lake := func(wd string, args ...string) result {
		t.Helper()
		return run(t, wd, "", append([]string{"--store", store}, args...)...)
	}
	ok(t, lake(dir, "data", "init"))
	ok(t, lake(tree, "data", "run", "--", "true"))
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); err != nil || string(b) != "models" {
		t.Fatalf("the tree remembers %q (%v), want models", b, err)
	}
	recreateWithLayout(t, db, "type-id")
	src := filepath.Join(dir, "raw")
	if err := os.WriteFile(src, []byte("pulled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake(dir, "data", "put", "data/a/b/c/d/1/raw", src))

	// The command counts its runs in a file outside the tree, and copies
	// the pulled file to a new one, in partition a/b under type-id.
	count := filepath.Join(dir, "runs")
	ok(t, lake(tree, "data", "run", "--", "sh", "-c", "echo ran >> "+count+" && cp data/a/b/c/d/1/raw data/a/b/c/d/1/copy"))
	if b, err := os.ReadFile(count); err != nil || string(b) != "ran\n" {
		t.Fatalf("the command's runs: %q (%v), want one", b, err)
	}
	if r := ok(t, lake(dir, "data", "stat", "data/a/b/c/d/1/copy")); !strings.Contains(r.stdout, `"partition":"a/b"`) {
		t.Fatalf("the command's file: %s; want it in the type-id partition a/b", r.stdout)
	}
	if r := ok(t, lake(dir, "data", "get", "data/a/b/c/d/1/copy")); r.stdout != "pulled\n" {
		t.Fatalf("the command saw %q, want the file pulled from the new datastore", r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); err != nil || string(b) != "type-id" {
		t.Fatalf("the tree remembers %q (%v), want type-id", b, err)
	}
}
