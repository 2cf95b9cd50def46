package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Exit codes and messages of issue 12 (rows 8 and 9, and the newcomer
// trial's findings).

func wantExit(t *testing.T, what string, r result, code int, stderr string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, stderr) {
		t.Fatalf("%s: exit %d, stderr %q; want exit %d and %q", what, r.code, r.stderr, code, stderr)
	}
	if lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n"); code != 0 && (len(lines) != 1 || !strings.HasPrefix(lines[0], "lake: ")) {
		t.Fatalf("%s: stderr is not one lake: line: %q", what, r.stderr)
	}
}

func TestBadPortIsUsage(t *testing.T) {
	dir := t.TempDir()
	wantExit(t, "node port", run(t, dir, "", "--store", "http://127.0.0.1:99999", "get", "k"), 2, "99999")
	wantExit(t, "endpoint port", run(t, dir, "", "--store", "dynamodb://t?endpoint=http://127.0.0.1:70000&region=us-east-1", "get", "k"), 2, "70000")
}

func TestValueFileDirectoryIsUsage(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	wantExit(t, "put --value-file DIR", run(t, dir, "", "put", "tbl/a", "--value-file", dir), 2, "is a directory")
	wantExit(t, "cas --expect-file DIR", run(t, dir, "", "cas", "tbl/a", "x", "--expect-file", dir), 2, "is a directory")
}

// TestServeBindsFirst: a node that cannot listen creates nothing.
func TestServeBindsFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	wantExit(t, "serve on a port in use", run(t, dir, "", "serve", "--listen", ln.Addr().String()), 1, "address already in use")
	for _, f := range []string{"lake.db", "lake.db.node-id"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("serve that could not bind created %s", f)
		}
	}
}

func TestUnknownBenchCommand(t *testing.T) {
	wantExit(t, "bench nodee", run(t, t.TempDir(), "", "bench", "nodee"), 2, `unknown command "nodee"`)
}

func TestConnectionRefusedSuggestsServe(t *testing.T) {
	addr := "127.0.0.1:" + itoa(freePort(t))
	wantExit(t, "no node", run(t, t.TempDir(), "", "--store", "http://"+addr, "get", "tbl/a"), 1, "lake serve")
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestAWSLogsStayOffStderr: with a region and no credentials, the SDK's
// own warning (its IMDSv1 fallback) goes to lake's logger at debug; stderr
// holds lake's one line.
func TestAWSLogsStayOffStderr(t *testing.T) {
	imds := httptest.NewServer(http.NotFoundHandler()) // a metadata service that has nothing
	defer imds.Close()
	dir := t.TempDir()
	cmd := exec.Command(lakeBin, "--store", "dynamodb://t?region=us-east-1&endpoint=http://127.0.0.1:1", "get", "tbl/a")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds.URL}
	out, err := cmd.CombinedOutput()
	ee, isExit := err.(*exec.ExitError)
	if !isExit {
		t.Fatalf("lake: %v\n%s", err, out)
	}
	wantExit(t, "no credentials", result{"", string(out), ee.ExitCode()}, 1, "lake: ")
}

func TestHelpListsEveryStoreKind(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"--help"}, {"init", "--help"}} {
		r := ok(t, run(t, dir, "", args...))
		for _, kind := range []string{"bolt://", "dynamodb://", "http://HOST:PORT"} {
			if !strings.Contains(r.stdout, kind) {
				t.Errorf("lake %s does not mention %s:\n%s", strings.Join(args, " "), kind, r.stdout)
			}
		}
	}
}

// TestBenchNodeLeavesUserStoreAlone: bench node refuses a store with user
// keys unless told, and removes its own keys afterwards.
func TestBenchNodeLeavesUserStoreAlone(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	ok(t, run(t, dir, "", "put", "tbl/mine", "v"))
	args := []string{"bench", "node", "--ops", "20", "--clients", "2", "--keys", "5"}
	wantExit(t, "bench node on a user store", run(t, dir, "", args...), 6, "holds user keys")
	ok(t, run(t, dir, "", append(args, "--allow-user-keys")...))
	if r := ok(t, run(t, dir, "", "ls")); r.stdout != "tbl/mine\n" {
		t.Fatalf("after bench node the store holds %q, want only tbl/mine", r.stdout)
	}
}
