package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestSyncKilledDuringCommit is issue 30's "Done when", from outside: a
// `lake data sync` of 300 files in three models on DynamoDB Local is killed
// (SIGKILL) by a proxy on its wire right after its k-th commit transaction
// naming those files reached the store and was answered: k = 1 (the first
// batch staged), and 20 (all 19 batches staged, the flip made, the first
// roll-forward sent). Another client then sees 0 or 300 files through
// `ls`, `get` and `changes`, never a part, and the next sync finishes the
// work: 300 files, each model's feed whole. LAKE_TEST_SYNC_KILL_POINTS
// (comma-separated k) runs other points.
func TestSyncKilledDuringCommit(t *testing.T) {
	points := []int{1, 20}
	if env := os.Getenv("LAKE_TEST_SYNC_KILL_POINTS"); env != "" {
		points = nil
		for _, f := range strings.Split(env, ",") {
			k, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("LAKE_TEST_SYNC_KILL_POINTS: %v", err)
			}
			points = append(points, k)
		}
	}
	for _, k := range points {
		t.Run(fmt.Sprintf("dynamodb-kill-after-%d", k), func(t *testing.T) { testSyncKilled(t, k) })
	}
}

func testSyncKilled(t *testing.T, k int) {
	const models, perModel = 3, 100
	table := ddblocal.TableName(t)
	direct := "dynamodb://" + table + "?endpoint=" + ddblocal.Endpoint(t)
	ok(t, run(t, t.TempDir(), "", "--store", direct, "data", "init"))
	t.Cleanup(func() { deleteDataTable(t, direct) })

	// The proxy: forwards everything; after the k-th TransactWriteItems
	// that names a file of the sync has been answered by the store, it
	// kills the syncing process before the answer reaches it.
	target, err := url.Parse(ddblocal.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var victim *os.Process
	seen, killed := 0, false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		commit := strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") && bytes.Contains(body, []byte("data/kill/"))
		if !commit {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		mu.Lock()
		seen++
		if seen == k && victim != nil {
			victim.Kill()
			killed = true
		}
		mu.Unlock()
		for h, v := range rec.Header() {
			w.Header()[h] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(proxy.Close)
	viaProxy := "dynamodb://" + table + "?endpoint=" + proxy.URL

	dir := t.TempDir()
	for m := range models {
		d := filepath.Join(dir, "data", "kill", strconv.Itoa(m))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perModel {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", i)), []byte(fmt.Sprintf("m%d f%d", m, i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(lakeBin, "--store", viaProxy, "data", "sync", "--lease", "2s")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LAKE_STORE=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	mu.Lock()
	if err := cmd.Start(); err != nil {
		mu.Unlock()
		t.Fatal(err)
	}
	victim = cmd.Process
	mu.Unlock()
	cmd.Wait()
	mu.Lock()
	if !killed {
		mu.Unlock()
		t.Fatalf("the sync was not killed: it sent %d commit transactions, fewer than %d (stderr %q)", seen, k, stderr.String())
	}
	mu.Unlock()

	// Another client, straight to the store.
	reader := t.TempDir()
	lake := func(args ...string) result {
		return run(t, reader, "", append([]string{"--store", direct}, args...)...)
	}
	visible := func() int {
		t.Helper()
		ls := strings.Fields(ok(t, lake("data", "ls", "data/kill/")).stdout)
		fed := 0
		for m := range models {
			lines := strings.Split(strings.TrimSpace(ok(t, lake("data", "changes", fmt.Sprintf("kill/%d", m), "--after", "0")).stdout), "\n")
			fed += len(lines) - 1 // the last line is {"upTo":N}
		}
		if fed != len(ls) {
			t.Fatalf("ls lists %d files, the feeds hold %d changes", len(ls), fed)
		}
		for j, p := range ls {
			if j%25 != 0 {
				continue // a sample: each get is a process
			}
			var m, i int
			fmt.Sscanf(p, "data/kill/%d/f%d", &m, &i)
			if got := ok(t, lake("data", "get", p)).stdout; got != fmt.Sprintf("m%d f%d", m, i) {
				t.Fatalf("get %s = %q", p, got)
			}
		}
		return len(ls)
	}
	n := visible()
	if n != 0 && n != models*perModel {
		t.Fatalf("killed after %d commit transactions: %d of %d files visible to another client", k, n, models*perModel)
	}
	t.Logf("killed after %d commit transactions: %d files visible", k, n)

	// The next sync finishes the work.
	r := run(t, dir, "", "--store", direct, "data", "sync", "--wait", "1m")
	if r.code != 0 {
		t.Fatalf("the next sync: exit %d: %s", r.code, r.stderr)
	}
	if n := visible(); n != models*perModel {
		t.Fatalf("after the next sync %d of %d files are visible", n, models*perModel)
	}
}
