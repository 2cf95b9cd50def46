package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockNode starts a node on a fresh bolt file and returns its --store URL.
func lockNode(t *testing.T) (dir, store string) {
	t.Helper()
	dir = t.TempDir()
	ok(t, run(t, dir, "", "init"))
	n := startNode(t, dir, http.DefaultClient, "http")
	return dir, "http://" + n.addr
}

// startLake starts lake in the background and returns a function that
// waits for it and returns its result.
func startLake(t *testing.T, dir string, args ...string) func() result {
	t.Helper()
	cmd := exec.Command(lakeBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LAKE_STORE=")
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var res result
	wait := func() result {
		once.Do(func() {
			cmd.Wait()
			res = result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
		})
		return res
	}
	t.Cleanup(func() { cmd.Process.Kill(); wait() })
	return wait
}

func TestLockRunPassesThrough(t *testing.T) {
	dir, store := lockNode(t)
	r := run(t, dir, "from stdin", "--store", store, "lock", "run", "ns/a", "--", "sh", "-c", `echo "$LAKE_LOCK_NAME $LAKE_FENCING_TOKEN"; cat; exit 7`)
	if r.code != 7 || r.stdout != "ns/a 4294967297\nfrom stdin" || r.stderr != "" {
		t.Fatalf("run: %+v", r)
	}
	// The lock was released when the command ended: the next token is the
	// next sequence number.
	r = ok(t, run(t, dir, "", "--store", store, "lock", "run", "ns/a", "--", "sh", "-c", `echo $LAKE_FENCING_TOKEN`))
	if r.stdout != "4294967298\n" {
		t.Fatalf("second run: %q", r.stdout)
	}
	r = ok(t, run(t, dir, "", "--store", store, "lock", "status", "ns/a"))
	if !strings.Contains(r.stdout, "state:    free") || !strings.Contains(r.stdout, "4294967298") {
		t.Fatalf("status: %q", r.stdout)
	}
	r = ok(t, run(t, dir, "", "--store", store, "lock", "ls", "ns"))
	if !strings.Contains(r.stdout, "ns/a") {
		t.Fatalf("ls: %q", r.stdout)
	}
	if r := run(t, dir, "", "--store", store, "lock", "ls", "other"); r.code != 0 || strings.Contains(r.stdout, "ns/a") {
		t.Fatalf("ls of another namespace: %+v", r)
	}
	if r := run(t, dir, "", "--store", store, "lock", "status", "ns/never"); r.code != exitNotFound {
		t.Fatalf("status of a lock never acquired: %+v", r)
	}
	for _, args := range [][]string{
		{"lock", "run", "no-namespace", "--", "true"},
		{"lock", "run", "ns/a", "true"},
		{"lock", "run", "ns/a", "--lease", "3s", "--heartbeat", "2s", "--", "true"},
		{"lock", "release", "ns/a", "--token", "1"},
		{"lock", "release", "ns/a", "--force", "--token", "x"},
	} {
		if r := run(t, dir, "", append([]string{"--store", store}, args...)...); r.code != exitUsage {
			t.Errorf("%v: %+v, want exit %d", args, r, exitUsage)
		}
	}
	if r := run(t, dir, "", "--store", store, "lock", "run", "ns/a", "--", "sh", "-c", "kill -KILL $$"); r.code != 128+9 {
		t.Fatalf("command killed by a signal: exit %d", r.code)
	}
}

// TestLockWaitAndForcedRelease: a held lock makes a waiter exit 8 naming
// the holder; a forced release with the holder's token stops the holder's
// command (which ignores SIGTERM, so SIGKILL after the grace period).
func TestLockWaitAndForcedRelease(t *testing.T) {
	dir, store := lockNode(t)
	holder := startLake(t, dir, "--store", store, "lock", "run", "ns/held", "--lease", "2s", "--grace", "300ms", "--holder", "the-holder",
		"--", "sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	var info struct {
		Held     bool   `json:"held"`
		Token    uint64 `json:"token"`
		Acquired string `json:"acquired"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := run(t, dir, "", "--store", store, "lock", "status", "ns/held", "--json")
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &info) == nil && info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never held: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := run(t, dir, "", "--store", store, "lock", "run", "ns/held", "--wait", "300ms", "--", "true")
	if r.code != exitLockWait || !strings.Contains(r.stderr, "held by the-holder") || !strings.Contains(r.stderr, "since "+info.Acquired) {
		t.Fatalf("wait that ran out: %+v", r)
	}
	if r := run(t, dir, "", "--store", store, "lock", "release", "ns/held", "--force", "--token", fmt.Sprint(info.Token+1)); r.code != exitConflict {
		t.Fatalf("forced release with the wrong token: %+v", r)
	}
	start := time.Now()
	ok(t, run(t, dir, "", "--store", store, "lock", "release", "ns/held", "--force", "--token", fmt.Sprint(info.Token)))
	hr := holder()
	if hr.code != exitError || !strings.Contains(hr.stderr, "lock lost") {
		t.Fatalf("holder after a forced release: %+v", hr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("holder's command stopped %v after the forced release", d)
	}
}

// TestLockRunProcessesExclude runs many `lake lock run` processes at once
// on one lock; each command makes a directory that must not exist (mkdir
// is atomic), so two commands at once would fail.
func TestLockRunProcessesExclude(t *testing.T) {
	dir, store := lockNode(t)
	occ := filepath.Join(dir, "occupied")
	var waits []func() result
	for range 8 {
		waits = append(waits, startLake(t, dir, "--store", store, "lock", "run", "ns/m", "--", "sh", "-c",
			fmt.Sprintf(`for i in 1 2 3; do mkdir %q || exit 99; sleep 0.02; rmdir %q; done`, occ, occ)))
	}
	for i, w := range waits {
		if r := w(); r.code != 0 {
			t.Errorf("process %d: %+v", i, r)
		}
	}
	r := ok(t, run(t, dir, "", "--store", store, "lock", "status", "ns/m"))
	if !strings.Contains(r.stdout, "sequence 8)") {
		t.Fatalf("status after 8 runs: %q", r.stdout)
	}
}

func TestLockHelp(t *testing.T) {
	for args, want := range map[string]string{
		"lock --help":         "NAMESPACE/NAME",
		"lock run --help":     "LAKE_FENCING_TOKEN",
		"lock status --help":  "fencing token",
		"lock ls --help":      "NAMESPACE",
		"lock release --help": "--force",
		"bench lock --help":   "raw",
	} {
		r := ok(t, run(t, t.TempDir(), "", strings.Fields(args)...))
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%s: %q lacks %q", args, r.stdout, want)
		}
	}
	if r := ok(t, run(t, t.TempDir(), "", "lock", "run", "--help")); !strings.Contains(r.stdout, "exits 8") {
		t.Errorf("lock run --help does not document exit code 8")
	}
}
