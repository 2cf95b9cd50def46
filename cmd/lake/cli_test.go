package main

import (
	"bytes"
	"encoding/json"
	"github.com/spf13/cobra"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/rogpeppe/go-internal/testscript"
)

var lakeBin string

func TestMain(m *testing.M) {
	// The test binary is also the command lake of the docs' testscripts
	// (docs_test.go): invoked under that name, it runs main.
	testscript.Main(cliTests{m}, map[string]func(){"lake": main})
}

// cliTests runs the package's tests around the binary they build.
type cliTests struct{ m *testing.M }

func (c cliTests) Run() int {
	m := c.m
	// In the child role the test binary holds a bolt file open, as a node
	// would (or, with LAKE_TEST_HOLD_READONLY set, as a reader), until it is
	// killed.
	if path := os.Getenv("LAKE_TEST_HOLD_FILE"); path != "" {
		d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: os.Getenv("LAKE_TEST_HOLD_READONLY") != ""})
		if err != nil {
			os.Exit(7)
		}
		os.Stdout.WriteString("holding\n")
		time.Sleep(time.Minute)
		d.Close()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "lake-cli-test")
	if err != nil {
		panic(err)
	}
	lakeBin = filepath.Join(dir, "lake")
	if out, err := exec.Command("go", "build", "-o", lakeBin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	return code
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs lake in dir with args and stdin.
func run(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	return runEnv(t, dir, stdin, nil, args...)
}

// runEnv is run with env added to lake's environment (an endpoint through
// a counting proxy, say).
func runEnv(t *testing.T, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(lakeBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "LAKE_STORE="), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func ok(t *testing.T, r result) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	ok(t, run(t, dir, "", "init")) // idempotent
	ok(t, run(t, dir, "", "put", "tbl/orders", "v1"))
	if r := ok(t, run(t, dir, "", "get", "tbl/orders")); r.stdout != "v1" {
		t.Fatalf("get = %q", r.stdout)
	}
	ok(t, run(t, dir, "", "cas", "tbl/orders", "v2", "--expect", "v1"))
	if r := run(t, dir, "", "cas", "tbl/orders", "v3", "--expect", "v1"); r.code != exitConflict {
		t.Fatalf("stale cas: exit %d", r.code)
	}
	ok(t, run(t, dir, "", "cas", "tbl/users", "u", "--expect-absent"))
	if r := run(t, dir, "", "cas", "tbl/users", "u", "--expect-absent"); r.code != exitConflict {
		t.Fatalf("second create: exit %d", r.code)
	}
	ok(t, run(t, dir, "from stdin", "put", "append-operation/orders/000001", "-"))
	if r := ok(t, run(t, dir, "", "get", "append-operation/orders/000001")); r.stdout != "from stdin" {
		t.Fatalf("stdin value = %q", r.stdout)
	}
	if r := ok(t, run(t, dir, "", "ls", "tbl/")); r.stdout != "tbl/orders\ntbl/users\n" {
		t.Fatalf("ls tbl/ = %q", r.stdout)
	}
	if r := ok(t, run(t, dir, "", "ls")); strings.Count(r.stdout, "\n") != 3 {
		t.Fatalf("ls = %q", r.stdout)
	}
	if r := run(t, dir, "", "rm", "tbl/orders", "--expect", "v1"); r.code != exitConflict {
		t.Fatalf("rm with wrong value: exit %d", r.code)
	}
	ok(t, run(t, dir, "", "rm", "tbl/orders", "--expect", "v2"))
	if r := run(t, dir, "", "get", "tbl/orders"); r.code != exitNotFound {
		t.Fatalf("get after rm: exit %d", r.code)
	}
}

func TestBinaryValuesAndJSON(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	bin := []byte{0, 1, 2, 0xff, '\n', 0xfe}
	file := filepath.Join(dir, "bin")
	os.WriteFile(file, bin, 0o600)
	ok(t, run(t, dir, "", "put", "tbl/bin", "--value-file", file))
	if r := ok(t, run(t, dir, "", "get", "tbl/bin")); r.stdout != string(bin) {
		t.Fatalf("binary get = %x", r.stdout)
	}
	r := ok(t, run(t, dir, "", "ls", "tbl/", "--json"))
	var it struct {
		Key   string
		Value []byte
	}
	if err := json.Unmarshal([]byte(r.stdout), &it); err != nil || it.Key != "tbl/bin" || !bytes.Equal(it.Value, bin) {
		t.Fatalf("ls --json = %q (%v)", r.stdout, err)
	}
	ok(t, run(t, dir, "", "cas", "tbl/bin", "new", "--expect-file", file))
	ok(t, run(t, dir, "", "rm", "tbl/bin", "--expect", "new"))
}

// TestPaging walks a listing page by page with the printed cursor.
func TestPaging(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	for _, k := range []string{"tbl/a", "tbl/b", "tbl/c", "tbl/d", "tbl/e", "other"} {
		ok(t, run(t, dir, "", "put", k, "x"))
	}
	var got []string
	cursor := ""
	for i := 0; ; i++ {
		if i > 10 {
			t.Fatal("paging never ends")
		}
		args := []string{"ls", "tbl/", "--limit", "2", "--json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		r := ok(t, run(t, dir, "", args...))
		cursor = ""
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var obj map[string]string
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Fatalf("bad line %q", line)
			}
			if c, ok := obj["cursor"]; ok {
				cursor = c
			} else {
				got = append(got, obj["key"])
			}
		}
		if cursor == "" {
			break
		}
	}
	if strings.Join(got, ",") != "tbl/a,tbl/b,tbl/c,tbl/d,tbl/e" {
		t.Fatalf("paged keys = %v", got)
	}
	r := ok(t, run(t, dir, "", "ls", "tbl/", "--limit", "2"))
	if !strings.HasPrefix(r.stderr, "cursor: ") || r.stdout != "tbl/a\ntbl/b\n" {
		t.Fatalf("plain page: stdout %q stderr %q", r.stdout, r.stderr)
	}
}

// TestBadInput: every bad input gives one line on stderr, starting with
// "lake: ", and its documented exit code; never a panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	missing := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 350*1024+1), 0o600)
	tests := []struct {
		name string
		dir  string
		args []string
		code int
	}{
		{"unknown command", dir, []string{"frobnicate"}, exitUsage},
		{"unknown flag", dir, []string{"ls", "--bogus"}, exitUsage},
		{"missing argument", dir, []string{"get"}, exitUsage},
		{"extra argument", dir, []string{"get", "a", "b"}, exitUsage},
		{"empty key", dir, []string{"put", "", "v"}, exitUsage},
		{"key not UTF-8", dir, []string{"get", "a\x01b\xff"}, exitUsage},
		{"long key", dir, []string{"get", strings.Repeat("k", 1025)}, exitUsage},
		{"reserved key", dir, []string{"put", "__lake__/x", "v"}, exitUsage},
		{"oversized value", dir, []string{"put", "tbl/big", "--value-file", big}, exitUsage},
		{"missing value file", dir, []string{"put", "tbl/x", "--value-file", filepath.Join(dir, "none")}, exitUsage},
		{"value twice", dir, []string{"put", "tbl/x", "v", "--value-file", big}, exitUsage},
		{"no value", dir, []string{"put", "tbl/x"}, exitUsage},
		{"cas without expectation", dir, []string{"cas", "tbl/x", "v"}, exitUsage},
		{"cas with two expectations", dir, []string{"cas", "tbl/x", "v", "--expect", "a", "--expect-absent"}, exitUsage},
		{"rm without expectation", dir, []string{"rm", "tbl/x"}, exitUsage},
		{"bad cursor", dir, []string{"ls", "tbl/", "--limit", "2", "--cursor", "garbage"}, exitUsage},
		{"cursor without limit", dir, []string{"ls", "--cursor", "x"}, exitUsage},
		{"bad limit", dir, []string{"ls", "--limit", "0"}, exitUsage},
		{"limit not a number", dir, []string{"ls", "--limit", "ten"}, exitUsage},
		{"bad store URL", dir, []string{"--store", "lake.db", "get", "x"}, exitUsage},
		{"unknown scheme", dir, []string{"--store", "ftp://x", "get", "x"}, exitUsage},
		{"missing store", missing, []string{"get", "x"}, exitError},
		{"not found", dir, []string{"get", "tbl/none"}, exitNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.dir, "", tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "lake: ") {
				t.Fatalf("stderr is not one lake: line: %q", r.stderr)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") {
				t.Fatalf("stderr shows a crash: %q", r.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(missing, "lake.db")); !os.IsNotExist(err) {
		t.Fatal("a read on a missing store created it")
	}
}

// TestFileHeldByAnotherProcess: while another process holds the bolt file,
// the CLI fails fast with a message that points to the node.
func TestFileHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), "LAKE_TEST_HOLD_FILE="+filepath.Join(dir, "lake.db"))
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	buf := make([]byte, 8)
	if n, _ := stdout.Read(buf); string(buf[:n]) != "holding\n" {
		t.Fatalf("holder did not start: %q", buf[:n])
	}
	start := time.Now()
	r := run(t, dir, "", "get", "tbl/a")
	if r.code != exitError || !strings.Contains(r.stderr, "locked by another process") || !strings.Contains(r.stderr, "--store http://") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v to fail", took)
	}
}

func TestHelp(t *testing.T) {
	// Every command of the tree, so that a new one cannot ship without
	// help: walked from the root, not listed by hand.
	var paths []string
	var walk func(prefix string, c *cobra.Command)
	walk = func(prefix string, c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			path := strings.TrimSpace(prefix + " " + sub.Name())
			if sub.Short == "" {
				t.Errorf("lake %s has no short description", path)
			}
			paths = append(paths, path)
			walk(path, sub)
		}
	}
	walk("", newRootCommand())
	if len(paths) < 40 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	for _, c := range append([]string{""}, paths...) {
		args := append(strings.Fields(c), "--help")
		r := ok(t, run(t, t.TempDir(), "", args...))
		if !strings.Contains(r.stdout, "Usage:") {
			t.Fatalf("lake %s --help: %q", c, r.stdout)
		}
	}
}
