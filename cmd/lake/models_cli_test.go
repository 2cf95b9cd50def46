package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/nodeapi"
)

// TestDataModelsOfSeveralSegmentsCLI: seed 004's own example, a type of two
// segments (command/shell), is one partition per model: stat, partitions
// and changes name command/shell/u1 and command/shell/u2 apart, model rm
// takes TYPE/ID with such a type, and prune --apply drops u1 alone, never
// u2 nor the model command/shell whose paths share u1's directory
// (issue 30).
func TestDataModelsOfSeveralSegmentsCLI(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testModelsCLI(t, "bolt://./lake.db") })
	t.Run("dynamodb", func(t *testing.T) {
		testModelsCLI(t, "dynamodb://"+ddblocal.TableName(t)+"?endpoint="+ddblocal.Endpoint(t))
	})
	t.Run("s3", func(t *testing.T) { testModelsCLI(t, "s3://"+s3local.Bucket(t)+"/models") })
}

func testModelsCLI(t *testing.T, store string) {
	dir := t.TempDir()
	lake := func(args ...string) result {
		return run(t, dir, "x", append([]string{"--store", store}, args...)...)
	}
	ok(t, lake("data", "init"))
	if strings.HasPrefix(store, "dynamodb://") {
		t.Cleanup(func() { deleteDataTable(t, store) })
	}
	short := "data/command/shell/u1/1/raw" // model command/shell: data u1, version 1
	for _, p := range []string{"data/command/shell/u1/model.yaml", "data/command/shell/u1/result/1/raw",
		"data/command/shell/u2/model.yaml", "data/command/shell/u2/result/1/raw", short} {
		ok(t, lake("data", "put", p, "-"))
	}
	if got := ok(t, lake("data", "stat", "data/command/shell/u1/result/1/raw")).stdout; !strings.Contains(got, `"partition":"command/shell/u1"`) {
		t.Fatalf("stat = %s", got)
	}
	parts := ok(t, lake("data", "partitions")).stdout
	for _, want := range []string{"command/shell\t", "command/shell/u1\t", "command/shell/u2\t"} {
		if !strings.Contains(parts, want) {
			t.Fatalf("partitions = %q, missing %q", parts, want)
		}
	}
	if got := ok(t, lake("data", "changes", "command/shell/u2", "--after", "0")).stdout; strings.Count(got, `"path"`) != 2 || strings.Contains(got, "/u1/") {
		t.Fatalf("changes of command/shell/u2 = %s", got)
	}
	ok(t, lake("data", "model", "rm", "command/shell/u1"))
	cat := ok(t, lake("data", "catalog", "--all")).stdout
	if !strings.Contains(cat, "default\tcommand/shell/u1\torphaned\t") || !strings.Contains(cat, "default\tcommand/shell/u2\tlive\t") {
		t.Fatalf("catalog after model rm command/shell/u1:\n%s", cat)
	}
	if r := ok(t, lake("data", "prune")); !strings.HasPrefix(r.stdout, "drop-model\tdefault\tcommand/shell/u1\t") || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("prune lists %q", r.stdout)
	}
	ok(t, lake("data", "prune", "--apply"))
	if got := ok(t, lake("data", "ls")).stdout; got != short+"\ndata/command/shell/u2/model.yaml\ndata/command/shell/u2/result/1/raw\n" {
		t.Fatalf("after prune --apply: ls = %q", got)
	}
	if r := lake("data", "model", "rm", "command/shell/u1"); r.code != exitNotFound {
		t.Fatalf("model rm of the pruned model: %+v, want exit 3", r)
	}
}

// TestDataLayoutOfOlderDatastoreCLI: a bolt file written by lake before
// issue 30 (files under the type/id rule, no layout record) keeps its
// partitions: the CLI records type-id at its first open and a new file of
// the same type/id goes to the same partition.
func TestDataLayoutOfOlderDatastoreCLI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.db")
	d, err := boltfs.Open(path, &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	old := datastore.New(d)
	old.SetLayout(datastore.LayoutTypeID)
	if _, err := old.Put(context.Background(), "data/command/shell/u1/result/1/raw", strings.NewReader("one"), nil); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	lake := func(args ...string) result {
		return run(t, dir, "two", append([]string{"--store", "bolt://" + path}, args...)...)
	}
	if got := ok(t, lake("data", "get", "data/command/shell/u1/result/1/raw")).stdout; got != "one" {
		t.Fatalf("get = %q", got)
	}
	if got := ok(t, lake("data", "put", "data/command/shell/u2/result/1/raw", "-")).stdout; !strings.Contains(got, `"partition":"command/shell"`) || !strings.Contains(got, `"pos":2`) {
		t.Fatalf("put into the older datastore = %s", got)
	}
	if got := ok(t, lake("data", "partitions")).stdout; !strings.HasPrefix(got, "command/shell\t") || strings.Count(got, "\n") != 1 {
		t.Fatalf("partitions = %q", got)
	}
}

// TestDataLayoutThroughNodeCLI: a node serves its bolt file's layout, and a
// client reads it through the node (one record read at open): a fresh file
// gets one partition per model, an older file (written under type/id, no
// record) keeps its partitions.
func TestDataLayoutThroughNodeCLI(t *testing.T) {
	for _, c := range []struct {
		name, want string
		older      bool
	}{{"new", "command/shell/u2", false}, {"older", "command/shell", true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ok(t, run(t, dir, "", "--store", "bolt://./t.db", "init"))
			if c.older {
				d, err := boltfs.Open(filepath.Join(dir, "t.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				old := datastore.New(d)
				old.SetLayout(datastore.LayoutTypeID)
				if _, err := old.Put(context.Background(), "data/command/shell/u1/result/1/raw", strings.NewReader("one"), nil); err != nil {
					t.Fatal(err)
				}
				if err := old.Close(); err != nil {
					t.Fatal(err)
				}
			}
			n := startNode(t, dir, http.DefaultClient, "http", "--store", "bolt://t.db")
			lake := func(args ...string) result {
				return run(t, dir, "two", append([]string{"--store", "http://" + n.addr}, args...)...)
			}
			if got := ok(t, lake("data", "put", "data/command/shell/u2/result/1/raw", "-")).stdout; !strings.Contains(got, `"partition":"`+c.want+`"`) {
				t.Fatalf("put through the node = %s, want partition %s", got, c.want)
			}
			if got := ok(t, lake("data", "stat", "data/command/shell/u2/result/1/raw")).stdout; !strings.Contains(got, `"partition":"`+c.want+`"`) {
				t.Fatalf("stat through the node = %s", got)
			}
		})
	}
}

// A client that is not lake (raw HTTP) cannot change or delete the
// datastore's layout record through a node: 400, and the record stays.
func TestNodeRefusesLayoutRecordWrites(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "--store", "bolt://./t.db", "init"))
	n := startNode(t, dir, http.DefaultClient, "http", "--store", "bolt://t.db")
	post := func(body string) (int, string) {
		resp, err := http.Post("http://"+n.addr+nodeapi.DataPrefix+nodeapi.DataRecord, nodeapi.JSONMIMEType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, body := range []string{
		`{"op":"cas","key":"datastore/layout","expect":"bW9kZWxz","value":"dHlwZS1pZA=="}`,
		`{"op":"delete","key":"datastore/layout","expect":"bW9kZWxz"}`,
	} {
		if code, got := post(body); code != http.StatusBadRequest || !strings.Contains(got, "written once") {
			t.Fatalf("%s: %d %s, want 400", body, code, got)
		}
	}
	code, got := post(`{"op":"get","key":"datastore/layout"}`)
	if code != http.StatusOK || !strings.Contains(got, `"bW9kZWxz"`) { // "models"
		t.Fatalf("layout record after the refused writes: %d %s", code, got)
	}
}
