package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestDataCLI runs every `lake data` command against bolt, and against
// DynamoDB Local when it is configured, and checks outputs and exit codes.
func TestDataCLI(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testDataCLI(t, "bolt://./lake.db") })
	t.Run("dynamodb", func(t *testing.T) {
		ep := ddblocal.Endpoint(t)
		testDataCLI(t, "dynamodb://"+ddblocal.TableName(t)+"?endpoint="+ep)
	})
	t.Run("s3", func(t *testing.T) { testDataCLI(t, "s3://"+s3local.Bucket(t)+"/cli") })
}

func testDataCLI(t *testing.T, store string) {
	dir := t.TempDir()
	lake := func(stdin string, args ...string) result {
		return run(t, dir, stdin, append([]string{"--store", store}, args...)...)
	}
	ok(t, lake("", "data", "init"))
	ok(t, lake("", "data", "init")) // idempotent
	if strings.HasPrefix(store, "dynamodb://") {
		t.Cleanup(func() { deleteDataTable(t, store) })
	}
	os.WriteFile(filepath.Join(dir, "content"), []byte("hello\x00world"), 0o600)
	os.WriteFile(filepath.Join(dir, "meta"), []byte(`{"kind":"raw"}`), 0o600)
	p := "data/command/shell/u1/result/1/raw"
	var first infoJSON
	if err := json.Unmarshal([]byte(ok(t, lake("", "data", "put", p, "content", "--meta", "meta")).stdout), &first); err != nil {
		t.Fatal(err)
	}
	if first.Pos != 1 || first.Partition != "command/shell/u1" || first.Size != 11 {
		t.Fatalf("put printed %+v", first)
	}
	if got := ok(t, lake("", "data", "get", p)).stdout; got != "hello\x00world" {
		t.Fatalf("get = %q", got)
	}
	ok(t, lake("second version", "data", "put", p, "-"))
	ok(t, lake("def", "data", "put", "definitions/shell.yaml", "-"))
	var st infoJSON
	json.Unmarshal([]byte(ok(t, lake("", "data", "stat", p)).stdout), &st)
	if st.Pos != 2 || st.Size != int64(len("second version")) {
		t.Fatalf("stat = %+v", st)
	}
	if got := ok(t, lake("", "data", "ls")).stdout; got != "data/command/shell/u1/result/1/raw\ndefinitions/shell.yaml\n" {
		t.Fatalf("ls = %q", got)
	}
	if got := ok(t, lake("", "data", "ls", "definitions/")).stdout; got != "definitions/shell.yaml\n" {
		t.Fatalf("ls definitions/ = %q", got)
	}
	out := ok(t, lake("", "data", "changes", "command/shell/u1", "--after", "1")).stdout
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"pos":2`) || lines[1] != `{"upTo":2}` {
		t.Fatalf("changes = %q", out)
	}
	if got := ok(t, lake("", "data", "partitions")).stdout; got != "command/shell/u1\t2\t0\ndefinitions\t1\t0\n" {
		t.Fatalf("partitions = %q", got)
	}
	ok(t, lake("", "data", "rm", "definitions/shell.yaml"))
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"data", "rm", "definitions/shell.yaml"}, exitNotFound},
		{[]string{"data", "get", "definitions/shell.yaml"}, exitNotFound},
		{[]string{"data", "stat", "nothing/here"}, exitNotFound},
		{[]string{"data", "get", "bad//path"}, exitUsage},
		{[]string{"data", "put", "only-one-arg"}, exitUsage},
		{[]string{"data", "put", "x/y", "/no/such/file"}, exitUsage},
		{[]string{"data", "changes", "command/shell/u1", "--after", "99"}, exitUsage},
		{[]string{"data", "changes", "a//b"}, exitUsage},
		{[]string{"data", "nosuch"}, exitUsage},
	} {
		r := lake("", tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, "lake: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and a lake: error", tc.args, r.code, r.stderr, tc.code)
		}
	}
	if got := ok(t, lake("", "data", "reclaim")).stdout; !strings.HasPrefix(got, "uploads 0, versions 0") {
		t.Fatalf("reclaim = %q", got)
	}
}

// deleteDataTable deletes the datastore table the CLI created for store.
func deleteDataTable(t *testing.T, store string) {
	table := strings.TrimPrefix(store, "dynamodb://")
	table, _, _ = strings.Cut(table, "?")
	c := ddblocal.Client(t)
	c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table + dynamofs.TableSuffix)})
}
