package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
	"github.com/lakemeta/lake/nodeapi"
)

// Regression test for https://github.com/lakemeta/lake/issues/25: the
// datastore half of a bolt file, its locks and a node's datastore endpoints
// meet damage as the metastore half does: an error, never a crash, a hang
// or a write by a command that only reads.
//
// CI runs a sample (sweepCopies copies, a node on every sweepNodeEvery-th);
// LAKE_DAMAGE_SWEEP=N runs N copies, a node on each fourth, and logs the
// figures (the check is N ≥ 300):
//
//	LAKE_DAMAGE_SWEEP=320 go test -count=1 -run TestDamageSweep -v -timeout 60m ./cmd/lake/
//
// LAKE_DAMAGE_SEED=N draws other damage (the default is 25).

const (
	sweepCopies    = 8
	sweepNodeEvery = 4
	// sweepTimeout is a hang: the bound.
	sweepTimeout = 10 * time.Second
)

// sweepFixture makes dir/base.db: 300 kv keys, 22 datastore files in two
// namespaces (some of several chunks' worth of bytes, so that overflow pages
// exist), and two locks.
func sweepFixture(t *testing.T, dir string) string {
	t.Helper()
	ok(t, run(t, dir, "", "--store", "bolt://base.db", "init"))
	path := filepath.Join(dir, "base.db")
	bolttest.Update(t, path, func(tx *boltfile.Tx) error {
		b := tx.Bucket([]byte("data"))
		for i := range 300 {
			if err := b.Put(fmt.Appendf(nil, "tbl/k%05d", i), bytes.Repeat([]byte{'v'}, 200+i*7)); err != nil {
				return err
			}
		}
		return nil
	})
	d, err := boltfs.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	for i, ns := range []string{datastore.DefaultNamespace, "ns2"} {
		n, err := s.Namespace(ns)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 11 {
			body := bytes.Repeat([]byte{byte('a' + j)}, 100+j*j*900)
			if _, err := n.Put(t.Context(), fmt.Sprintf("data/m/%d/f%02d", i+1, j), bytes.NewReader(body), []byte("meta")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"team/a", "team/b"} {
		ok(t, run(t, dir, "", "--store", "bolt://base.db", "lock", "run", name, "--", "true"))
	}
	return path
}

// sweepCommand is one command run on every damaged copy.
type sweepCommand struct {
	args  []string
	read  bool // only reads: the file must keep every byte
	stdin string
}

var sweepCommands = []sweepCommand{
	{args: []string{"get", "tbl/k00150"}, read: true},
	{args: []string{"ls", "tbl/"}, read: true},
	{args: []string{"check"}, read: true},
	{args: []string{"lock", "ls", "team"}, read: true},
	{args: []string{"lock", "status", "team/a"}, read: true},
	{args: []string{"data", "ls"}, read: true},
	{args: []string{"data", "get", "data/m/1/f07"}, read: true},
	{args: []string{"data", "stat", "data/m/1/f03"}, read: true},
	{args: []string{"data", "partitions"}, read: true},
	{args: []string{"data", "changes", "m/1"}, read: true},
	{args: []string{"data", "namespaces"}, read: true},
	{args: []string{"data", "lock", "ls", "default"}, read: true},
	{args: []string{"data", "--namespace", "ns2", "ls"}, read: true},
	{args: []string{"data", "--namespace", "ns2", "get", "data/m/2/f10"}, read: true},
	{args: []string{"data", "--namespace", "ns2", "stat", "data/m/2/f01"}, read: true},
	{args: []string{"data", "--namespace", "ns2", "partitions"}, read: true},
	{args: []string{"data", "--namespace", "ns2", "changes", "m/2"}, read: true},
	{args: []string{"put", "tbl/new", "v"}},
	{args: []string{"data", "put", "data/m/1/new", "-"}, stdin: "new"},
	{args: []string{"data", "--namespace", "ns2", "put", "data/m/2/new", "-"}, stdin: "new"},
}

// sweepTally counts what the sweep found.
type sweepTally struct {
	copies, runs, crashes, hangs, changedReads, nodes, nodeFailures, bigRSS int
	// succeeded, damaged and otherErr classify the command runs: exit 0, an
	// error naming the damage, another error (not found, not a store, …).
	succeeded, damaged, otherErr int
	// maxRSS is the largest peak resident set of a command run, in KiB.
	maxRSS   int64
	examples []string
}

func (s *sweepTally) fail(kind *int, format string, args ...any) {
	*kind++
	if len(s.examples) < 20 {
		s.examples = append(s.examples, fmt.Sprintf(format, args...))
	}
}

// crashed reports a trace of a crash in stderr, or a death by signal.
func crashed(stderr string, err error) bool {
	for _, bad := range []string{"panic:", "fatal error", "goroutine ", "SIGBUS", "SIGSEGV", "stack overflow"} {
		if strings.Contains(stderr, bad) {
			return true
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() != syscall.SIGKILL {
			return true
		}
	}
	return false
}

// sweepMaxRSS is the bound on a command's memory, in KiB.
const sweepMaxRSS = 256 << 10

// runBounded runs lake with args in dir, killed after sweepTimeout.
func runBounded(dir, stdin string, args ...string) (stderr string, hung bool, err error) {
	r := runMeasured(dir, stdin, args...)
	return r.stderr, r.hung, r.err
}

// measuredRun is what runMeasured saw.
type measuredRun struct {
	stderr string
	hung   bool
	rss    int64 // peak resident set, KiB
	err    error
}

// runMeasured is runBounded that also returns the peak resident set of the
// process, in KiB.
func runMeasured(dir, stdin string, args ...string) measuredRun {
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakeBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LAKE_STORE=", "LAKE_TOKEN=", "LAKE_TOKEN_FILE=")
	cmd.Stdin = strings.NewReader(stdin)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	r := measuredRun{err: cmd.Run()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.rss = ru.Maxrss
		}
	}
	r.stderr, r.hung = errb.String(), ctx.Err() != nil
	return r
}

func TestDamageSweep(t *testing.T) {
	copies, nodeEvery := sweepCopies, sweepNodeEvery
	if v := os.Getenv("LAKE_DAMAGE_SWEEP"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LAKE_DAMAGE_SWEEP=%q: want a number of copies", v)
		}
		copies, nodeEvery = n, 4
	}
	// LAKE_DAMAGE_SEED varies the generated damage between sweeps.
	seed := uint64(25)
	if v := os.Getenv("LAKE_DAMAGE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LAKE_DAMAGE_SEED=%q: want a number", v)
		}
		seed = n
	}
	dir := t.TempDir()
	base := sweepFixture(t, dir)
	dm := bolttest.NewDamager(t, base)
	sound, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	// On the sound file every command succeeds, and every read leaves it
	// byte for byte as it was: the sweep below drives real work.
	soundCopy := filepath.Join(dir, "sound.db")
	for _, c := range sweepCommands {
		if err := os.WriteFile(soundCopy, sound, 0o600); err != nil {
			t.Fatal(err)
		}
		ok(t, run(t, dir, c.stdin, append([]string{"--store", "bolt://sound.db"}, c.args...)...))
		if c.read && sum(t, soundCopy) != sha256.Sum256(sound) {
			t.Fatalf("lake %s changed a sound file", strings.Join(c.args, " "))
		}
	}
	var tally sweepTally
	start := time.Now()
	for i := range copies {
		rng := rand.New(rand.NewPCG(uint64(i), seed))
		path := filepath.Join(dir, "c.db")
		if err := os.WriteFile(path, sound, 0o600); err != nil {
			t.Fatal(err)
		}
		what := dm.Apply(t, rng, path, i)
		tally.copies++
		for _, c := range sweepCommands {
			before := sum(t, path)
			r := runMeasured(dir, c.stdin, append([]string{"--store", "bolt://c.db"}, c.args...)...)
			stderr, err, hung, rss := r.stderr, r.err, r.hung, r.rss
			tally.runs++
			switch {
			case err == nil:
				tally.succeeded++
			case strings.Contains(stderr, "bolt file is damaged"):
				tally.damaged++
			default:
				tally.otherErr++
			}
			tally.maxRSS = max(tally.maxRSS, rss)
			if rss > sweepMaxRSS {
				tally.fail(&tally.bigRSS, "copy %d (%s): lake %s peaked at %d MiB", i, what, strings.Join(c.args, " "), rss>>10)
			}
			switch {
			case hung:
				tally.fail(&tally.hangs, "copy %d (%s): lake %s hung", i, what, strings.Join(c.args, " "))
			case crashed(stderr, err):
				tally.fail(&tally.crashes, "copy %d (%s): lake %s crashed: %.300s", i, what, strings.Join(c.args, " "), stderr)
			}
			if c.read && sum(t, path) != before {
				tally.fail(&tally.changedReads, "copy %d (%s): lake %s changed the file", i, what, strings.Join(c.args, " "))
			}
		}
		if i%nodeEvery == 0 {
			if err := os.WriteFile(path, sound, 0o600); err != nil {
				t.Fatal(err)
			}
			dm.Apply(t, rand.New(rand.NewPCG(uint64(i), seed)), path, i)
			tally.nodes++
			if msg := sweepNode(t, dir); msg != "" {
				tally.fail(&tally.nodeFailures, "copy %d (%s): node: %s", i, what, msg)
			}
		}
	}
	t.Logf("%d damaged copies, %d command runs, %d nodes in %v: %d crashes, %d hangs over %v, %d reads that changed the file, %d node failures, %d runs over %d MiB (peak %d MiB)",
		tally.copies, tally.runs, tally.nodes, time.Since(start).Round(time.Second), tally.crashes, tally.hangs, sweepTimeout, tally.changedReads, tally.nodeFailures,
		tally.bigRSS, sweepMaxRSS>>10, tally.maxRSS>>10)
	t.Logf("runs: %d succeeded, %d refused naming the damage, %d other errors", tally.succeeded, tally.damaged, tally.otherErr)
	if os.Getenv("LAKE_DAMAGE_TABLE") == "1" {
		// The docs' figures block (docs/bolt.md): `… -v | grep '^|'`.
		fmt.Println("| seed | copies | command runs | succeeded | refused naming the damage | other errors | nodes | crashes | hangs | reads that changed the file | node failures | peak RSS of a run (MiB) |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
		fmt.Printf("| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", seed, tally.copies, tally.runs, tally.succeeded, tally.damaged, tally.otherErr,
			tally.nodes, tally.crashes, tally.hangs, tally.changedReads, tally.nodeFailures, tally.maxRSS>>10)
	}
	if tally.crashes+tally.hangs+tally.changedReads+tally.nodeFailures+tally.bigRSS > 0 {
		t.Fatalf("the sweep found:\n%s", strings.Join(tally.examples, "\n"))
	}
}

// sweepNode runs a node on dir/c.db and drives its kv and datastore
// endpoints; it returns what went wrong, or "". A node may refuse to start
// (exit 1, one `lake: ` line); one that starts answers every request (JSON
// 503 `unavailable` for damage, never a dropped connection), stops being
// ready once it answered one, and stays up until SIGTERM.
func sweepNode(t *testing.T, dir string) string {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(lakeBin, "--store", "bolt://c.db", "serve", "--listen", addr, "--catalog-interval", "100ms")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LAKE_STORE=", "LAKE_TOKEN=", "LAKE_TOKEN_FILE=")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	if !waitHealthy(addr, done) {
		select {
		case <-done:
		case <-time.After(sweepTimeout):
			return "neither started nor exited"
		}
		if crashed(stderr.String(), waitErr) || cmd.ProcessState.ExitCode() != exitError {
			return fmt.Sprintf("refused to start with exit %d: %.300s", cmd.ProcessState.ExitCode(), stderr)
		}
		return ""
	}
	base := "http://" + addr
	client := &http.Client{Timeout: sweepTimeout}
	unavailable := false
	// answer checks one HTTP answer: any status but a 5xx other than 503
	// `unavailable`.
	answer := func(what string, resp *http.Response, err error) string {
		if err != nil {
			return fmt.Sprintf("%s: no answer: %v", what, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode < 500 {
			return ""
		}
		var e nodeapi.Error
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Code != nodeapi.CodeUnavailable {
			return fmt.Sprintf("%s: %d %.200s, want 503 unavailable", what, resp.StatusCode, body)
		}
		unavailable = true
		return ""
	}
	for _, p := range []string{nodeapi.KVPrefix + "tbl/k00150", nodeapi.ListPath + "?prefix=tbl/&limit=1000"} {
		resp, err := client.Get(base + p)
		if msg := answer("GET "+p, resp, err); msg != "" {
			return msg
		}
	}
	for _, op := range []struct{ path, body string }{
		{nodeapi.DataPrefix + nodeapi.DataList, `{"prefix":"data/","limit":100}`},
		{nodeapi.DataPrefix + nodeapi.DataPartitions, `{}`},
		{nodeapi.DataPrefix + nodeapi.DataStat + "?namespace=ns2", `{"paths":["data/m/2/f01"]}`},
	} {
		resp, err := client.Post(base+op.path, "application/json", strings.NewReader(op.body))
		if msg := answer("POST "+op.path, resp, err); msg != "" {
			return msg
		}
	}
	// Through the node's client: every datastore endpoint a read and a put
	// use, chunks included.
	for _, args := range [][]string{
		{"data", "ls"}, {"data", "get", "data/m/1/f07"}, {"data", "--namespace", "ns2", "ls"},
		{"data", "--namespace", "ns2", "changes", "m/2"}, {"data", "put", "data/m/1/new", "-"},
		{"data", "--namespace", "ns2", "put", "data/m/2/new", "-"}, {"put", "tbl/new", "v"}, {"lock", "ls", "team"},
	} {
		out, hung, err := runBounded(dir, "new", append([]string{"--store", base}, args...)...)
		switch {
		case hung:
			return fmt.Sprintf("lake %s through the node hung", strings.Join(args, " "))
		case crashed(out, err):
			return fmt.Sprintf("lake %s through the node crashed: %.300s", strings.Join(args, " "), out)
		case strings.Contains(out, "EOF") || strings.Contains(out, "outcome unknown") || strings.Contains(out, "connection reset"):
			return fmt.Sprintf("lake %s through the node: the node dropped the request: %.300s", strings.Join(args, " "), out)
		case strings.Contains(out, "unavailable"):
			unavailable = true
		}
	}
	select {
	case <-done:
		return fmt.Sprintf("the node died: %.300s", stderr)
	default:
	}
	if unavailable {
		if resp, err := client.Get(base + nodeapi.ReadyPath); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			if err == nil {
				resp.Body.Close()
			}
			return "the node answered 503 unavailable but stayed ready"
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(sweepTimeout):
		return "the node did not stop on SIGTERM"
	}
	if crashed(stderr.String(), nil) {
		return fmt.Sprintf("a crash in the node's stderr: %.300s", stderr)
	}
	return ""
}
