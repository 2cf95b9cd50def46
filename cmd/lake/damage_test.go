package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
	"github.com/lakemeta/lake/nodeapi"
)

// Regression tests for https://github.com/lakemeta/lake/issues/11: on a
// damaged file the CLI and the node answer one `lake:` line or an error
// response, never crash, and never write.

const fixtureKeys = 3000

// bigStore makes dir/t.db: a store of fixtureKeys keys with 1 KiB values
// written in one transaction (about 6 MiB, nearly every page in use).
func bigStore(t *testing.T, dir string) string {
	t.Helper()
	ok(t, run(t, dir, "", "--store", "bolt://t.db", "init"))
	// The datastore's layout recorded too, as a node's first start would:
	// the tests then see that a node on a damaged file writes nothing.
	ok(t, run(t, dir, "", "--store", "bolt://t.db", "data", "init"))
	path := filepath.Join(dir, "t.db")
	bolttest.Update(t, path, func(tx *boltfile.Tx) error {
		b := tx.Bucket([]byte("data"))
		for i := range fixtureKeys {
			if err := b.Put(fmt.Appendf(nil, "tbl/k%05d", i), []byte(strings.Repeat("v", 1024))); err != nil {
				return err
			}
		}
		return nil
	})
	return path
}

// treePages returns the ids of the leaf and branch pages of the file.
func treePages(t *testing.T, path string) []int {
	t.Helper()
	return bolttest.Pages(t, path, "leaf", "branch")
}

func overwritePages(t *testing.T, path string, ids []int, fill func([]byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, id := range ids {
		page := make([]byte, 4096)
		fill(page)
		if _, err := f.WriteAt(page, int64(id)*4096); err != nil {
			t.Fatal(err)
		}
	}
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// damagedFile is one row of issue 11's table: how the file is made, and
// whether Open's cheap checks refuse it (else the damage lies in the page
// tree and is met by a read).
type damagedFile struct {
	name    string
	make    func(t *testing.T, dir string) string
	atOpen  bool
	message string // in the error line
}

func damagedFiles() []damagedFile {
	truncated := func(size int64) func(*testing.T, string) string {
		return func(t *testing.T, dir string) string {
			path := bigStore(t, dir)
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	rows := []damagedFile{
		{"truncated-8KiB", truncated(8 << 10), true, "truncated"},
		{"truncated-16KiB", truncated(16 << 10), true, "truncated"},
		{"truncated-2MiB", truncated(2 << 20), true, "truncated"},
		{"zeroed-meta-pages", func(t *testing.T, dir string) string {
			path := bigStore(t, dir)
			overwritePages(t, path, []int{0, 1}, func([]byte) {})
			return path
		}, true, "meta page"},
		{"zeroed-tree-pages", func(t *testing.T, dir string) string {
			path := bigStore(t, dir)
			ids := treePages(t, path)
			overwritePages(t, path, ids[len(ids)/2:len(ids)/2+4], func([]byte) {})
			return path
		}, false, "lake check"},
		{"empty", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "t.db")
			os.WriteFile(path, nil, 0o600)
			return path
		}, true, "init`"},
		{"foreign-bbolt-file", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "t.db")
			bolttest.Update(t, path, func(tx *boltfile.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
			return path
		}, true, "init`"},
	}
	for seed := uint64(1); seed <= 3; seed++ {
		rows = append(rows, damagedFile{fmt.Sprintf("random-pages-seed%d", seed), func(t *testing.T, dir string) string {
			path := bigStore(t, dir)
			rng := rand.New(rand.NewPCG(seed, 0))
			ids := treePages(t, path)
			pick := []int{ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]}
			overwritePages(t, path, pick, func(p []byte) {
				for i := range p {
					p[i] = byte(rng.UintN(256))
				}
			})
			return path
		}, false, "lake check"})
	}
	return rows
}

// assertOneLakeLine checks that stderr is one `lake: ` line with no trace
// of a crash.
func assertOneLakeLine(t *testing.T, what, stderr, want string) {
	t.Helper()
	for _, bad := range []string{"panic", "fatal error", "goroutine", "SIGBUS", "SIGSEGV"} {
		if strings.Contains(stderr, bad) {
			t.Fatalf("%s: %q on stderr:\n%s", what, bad, stderr)
		}
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "lake: ") || !strings.Contains(stderr, want) {
		t.Fatalf("%s: stderr is not one `lake: ` line with %q: %q", what, want, stderr)
	}
}

// TestCLIOnDamagedFiles: get, ls, put and check on each damaged file exit 1
// with one `lake: ` line (get and put may succeed when the damage is off
// their path and the file opens), and the file keeps every byte unless a
// put succeeded.
func TestCLIOnDamagedFiles(t *testing.T) {
	for _, row := range damagedFiles() {
		t.Run(row.name, func(t *testing.T) {
			dir := t.TempDir()
			path := row.make(t, dir)
			before := sum(t, path)
			store := "--store=bolt://t.db"
			for _, args := range [][]string{{"ls"}, {"ls", "tbl/", "--limit", "10000"}, {"check"}, {"get", "tbl/k01500"}, {"put", "tbl/new", "v"}} {
				r := run(t, dir, "", append([]string{store}, args...)...)
				if len(args) > 1 && args[1] == "tbl/" {
					// A page is bounded by bytes too: follow the cursor
					// page by page until one meets the damage.
					r = pageUntilError(t, dir, store, r)
				}
				what := "lake " + strings.Join(args, " ")
				mayPass := !row.atOpen && (args[0] == "get" || args[0] == "put")
				if r.code == 0 && mayPass {
					continue
				}
				if r.code != exitError {
					t.Fatalf("%s: exit %d, want 1; stderr %q", what, r.code, r.stderr)
				}
				want := row.message
				if args[0] == "check" && !row.atOpen {
					want = "damaged"
				}
				assertOneLakeLine(t, what, r.stderr, want)
				if args[0] == "check" && !strings.Contains(r.stdout, "problem: ") {
					t.Fatalf("check printed no problem: %q", r.stdout)
				}
				if args[0] != "put" && sum(t, path) != before {
					t.Fatalf("%s changed the file", what)
				}
			}
			if row.atOpen && sum(t, path) != before {
				t.Fatal("put changed a file refused at open")
			}
		})
	}
}

// TestNodeOnDamagedFiles: `lake serve` on each damaged file either refuses
// to start (exit 1, one `lake: ` line) or starts and answers a list that
// meets the damage with 503, stays up, refuses every later write, and exits
// on SIGTERM; the file keeps every byte and no crash is printed.
func TestNodeOnDamagedFiles(t *testing.T) {
	for _, row := range damagedFiles() {
		t.Run(row.name, func(t *testing.T) {
			dir := t.TempDir()
			path := row.make(t, dir)
			before := sum(t, path)
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			cmd := exec.Command(lakeBin, "--store", "bolt://t.db", "serve", "--listen", addr, "--catalog-interval", "100ms")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "LAKE_STORE=", "LAKE_TOKEN=", "LAKE_TOKEN_FILE=")
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-done })
			up := waitHealthy(addr, done)
			if row.atOpen {
				if up {
					t.Fatalf("the node started on a file Open refuses:\n%s", stderr)
				}
				if code := cmd.ProcessState.ExitCode(); code != exitError {
					t.Fatalf("exit %d, want 1:\n%s", code, stderr)
				}
				assertOneLakeLine(t, "lake serve", lastLine(stderr.String()), row.message)
			} else {
				if !up {
					t.Fatalf("the node did not start:\n%s", stderr)
				}
				nodeMeetsDamage(t, addr)
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("the node did not stop on SIGTERM:\n%s", stderr)
				}
			}
			for _, bad := range []string{"panic", "fatal error", "goroutine ", "SIGBUS", "SIGSEGV"} {
				if strings.Contains(stderr.String(), bad) {
					t.Fatalf("%q in the node's stderr:\n%s", bad, stderr)
				}
			}
			if sum(t, path) != before {
				t.Fatal("the node changed the damaged file")
			}
		})
	}
}

// nodeMeetsDamage lists the whole prefix through the node, from several
// clients at once: each answer is 503 naming `lake check`, the node stays
// up, and a later write is refused.
func nodeMeetsDamage(t *testing.T, addr string) {
	t.Helper()
	base := "http://" + addr
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// A page is bounded by bytes too: follow the cursor until a
			// page meets the damage.
			cursor := ""
			for range 100 {
				code, body := httpGet(t, base+nodeapi.ListPath+"?prefix=tbl/&limit=10000"+cursor)
				if code == http.StatusOK {
					var page struct {
						Cursor string `json:"cursor"`
					}
					if err := json.Unmarshal(body, &page); err != nil || page.Cursor == "" {
						t.Errorf("the listing ended without meeting the damage (%v)", err)
						return
					}
					cursor = "&cursor=" + url.QueryEscape(page.Cursor)
					continue
				}
				if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "lake check") {
					t.Errorf("list over damage: %d %.300s", code, body)
				}
				return
			}
			t.Error("100 pages without meeting the damage")
		})
	}
	wg.Wait()
	if code, _ := httpGet(t, base+nodeapi.HealthPath); code != http.StatusOK {
		t.Fatalf("the node is not healthy after the damage: %d", code)
	}
	// Alive but no longer ready: a load balancer stops sending it requests.
	if code, body := httpGet(t, base+nodeapi.ReadyPath); code != http.StatusServiceUnavailable || !strings.Contains(string(body), "lake check") {
		t.Fatalf("readyz after the damage: %d %s", code, body)
	}
	resp := httpPut(t, http.DefaultClient, base+nodeapi.KVPrefix+"tbl/new", "", []byte("v"))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a write after the damage: %d, want 503", resp.StatusCode)
	}
}

// waitHealthy polls /healthz until it answers 200 (true) or the process
// exits (false).
func waitHealthy(addr string, done <-chan struct{}) bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return false
		default:
		}
		if resp, err := http.Get("http://" + addr + nodeapi.HealthPath); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

// TestNodeOnAFileCutShortUnderneath: a file truncated while a node serves
// it makes bbolt's map raise SIGBUS in the request that reads past the end;
// the node answers 503 naming `lake check`, stays up, writes nothing more,
// and prints no crash.
func TestNodeOnAFileCutShortUnderneath(t *testing.T) {
	dir := t.TempDir()
	path := bigStore(t, dir)
	n := startNode(t, dir, http.DefaultClient, "http", "--store", "bolt://t.db")
	if code, _ := httpGet(t, "http://"+n.addr+nodeapi.KVPrefix+"tbl/k00001"); code != http.StatusOK {
		t.Fatalf("get before the cut: %d", code)
	}
	if err := os.Truncate(path, 16<<10); err != nil {
		t.Fatal(err)
	}
	after := sum(t, path)
	nodeMeetsDamage(t, n.addr)
	if code := n.stop(t, syscall.SIGTERM); code != 0 && code != exitError {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, n.stderr)
	}
	for _, bad := range []string{"panic", "fatal error", "goroutine ", "SIGBUS", "unexpected fault"} {
		if strings.Contains(n.stderr.String(), bad) {
			t.Fatalf("%q in the node's stderr:\n%s", bad, n.stderr)
		}
	}
	if !strings.Contains(n.stderr.String(), "faulted reading a damaged page") {
		t.Errorf("the node's log does not show the contained fault:\n%s", n.stderr)
	}
	if sum(t, path) != after {
		t.Fatal("the poisoned node wrote to the file")
	}
}

// pageUntilError continues a `lake ls PREFIX --limit N` whose first page is
// r, page after page with the cursor it printed, and returns the first
// result that is not a page with a cursor.
func pageUntilError(t *testing.T, dir, store string, r result) result {
	t.Helper()
	for range 100 {
		c, ok := strings.CutPrefix(strings.TrimSpace(r.stderr), "cursor: ")
		if r.code != 0 || !ok {
			return r
		}
		r = run(t, dir, "", store, "ls", "tbl/", "--limit", "10000", "--cursor", c)
	}
	return r
}
