package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIssue33CLIRows replays row 8 of issue 33: what a new user met on the
// CLI that disagreed with the docs.
func TestIssue33CLIRows(t *testing.T) {
	t.Run("help names s3", func(t *testing.T) {
		r := ok(t, run(t, t.TempDir(), "", "--help"))
		if !strings.Contains(r.stdout, "s3://BUCKET/PREFIX") {
			t.Fatalf("lake --help does not name s3:// stores:\n%s", r.stdout)
		}
	})

	t.Run("value size is the real one", func(t *testing.T) {
		dir := t.TempDir()
		ok(t, run(t, dir, "", "init"))
		big := bytes.Repeat([]byte{'a'}, 400_000)
		file := filepath.Join(dir, "big")
		if err := os.WriteFile(file, big, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, r := range []result{
			run(t, dir, "", "put", "k", "--value-file", file),
			run(t, dir, string(big), "put", "k", "-"),
			run(t, dir, string(big), "cas", "k", "-", "--expect-absent"),
		} {
			if r.code != exitUsage || !strings.Contains(r.stderr, "value is 400000 bytes, the limit is 358400") {
				t.Fatalf("exit %d, stderr %q; want exit 2 and the value's real size", r.code, r.stderr)
			}
		}
		if r := run(t, dir, "", "get", "k"); r.code != exitNotFound {
			t.Fatalf("the refused value was written: get exit %d", r.code)
		}
	})

	t.Run("a file a node holds gives the node hint", func(t *testing.T) {
		dir := t.TempDir()
		startNode(t, dir, http.DefaultClient, "http")
		if err := os.WriteFile(filepath.Join(dir, "result.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"get", "k"},
			{"data", "put", "data/command/shell/u1/result/1/raw", "result.json"},
			{"data", "get", "data/command/shell/u1/result/1/raw"},
			{"data", "changes", "command/shell", "--after", "0"},
		} {
			r := run(t, dir, "", args...)
			if r.code != exitError || !strings.Contains(r.stderr, "--store http://") {
				t.Fatalf("lake %s: exit %d, stderr %q; want exit 1 and the --store http:// hint", strings.Join(args, " "), r.code, r.stderr)
			}
		}
	})

	t.Run("serve of s3 on a busy port exits 2", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, store := range []string{"s3://bucket/prefix", "S3://bucket/prefix", "ftp://x"} {
			r := run(t, t.TempDir(), "", "--store", store, "serve", "--listen", l.Addr().String())
			if r.code != exitUsage || strings.Contains(r.stderr, "address already in use") {
				t.Fatalf("--store %s serve on a busy port: exit %d, stderr %q; want exit 2 naming the store", store, r.code, r.stderr)
			}
		}
	})
}
