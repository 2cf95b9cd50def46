package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestDataRunWorkers runs ten worker processes at once, each in its own
// directory, each running `lake data run` in a loop: an increment of a
// counter on a shared model under one namespace, and a file of its own
// model under its own namespace; against a node over one bolt file (the
// datastore and its locks served beside the KV API) and against DynamoDB
// Local. No increment is lost, every worker's files arrive, and a path
// changed on both sides is a conflict reported with exit 4, never
// overwritten.
func TestDataRunWorkers(t *testing.T) {
	t.Run("node", func(t *testing.T) {
		dir := t.TempDir()
		n := startNode(t, dir, http.DefaultClient, "http")
		testDataRunWorkers(t, "http://"+n.addr)
	})
	t.Run("dynamodb", func(t *testing.T) {
		store := "dynamodb://" + ddblocal.TableName(t) + "?endpoint=" + ddblocal.Endpoint(t)
		ok(t, run(t, t.TempDir(), "", "--store", store, "data", "init"))
		t.Cleanup(func() { deleteDataTable(t, store) })
		testDataRunWorkers(t, store)
	})
	t.Run("s3", func(t *testing.T) {
		// Lock and fenced commits over S3's conditional requests (docs/s3.md):
		// the lease needs a clock-skew bound of at least 2 s there, which
		// takeovers use; these workers never die, so the default serves.
		store := "s3://" + s3local.Bucket(t) + "/sync"
		ok(t, run(t, t.TempDir(), "", "--store", store, "data", "init"))
		testDataRunWorkers(t, store)
	})
}

func testDataRunWorkers(t *testing.T, store string) {
	const workers, iterations = 10, 2
	dirs, ownDirs := make([]string, workers), make([]string, workers)
	for i := range dirs {
		dirs[i], ownDirs[i] = t.TempDir(), t.TempDir()
	}
	lake := func(dir string, args ...string) result {
		return run(t, dir, "", append([]string{"--store", store}, args...)...)
	}
	var wg sync.WaitGroup
	errs := make(chan string, workers*iterations*2)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iterations {
				r := lake(dirs[w], "data", "run", "--namespace", "shared", "--model", "shared/1", "--wait", "3m", "--",
					"sh", "-c", `n=$(cat data/shared/1/counter 2>/dev/null || echo 0); mkdir -p data/shared/1; echo $((n+1)) > data/shared/1/counter`)
				if r.code != 0 {
					errs <- fmt.Sprintf("worker %d shared run %d: exit %d: %s", w, i, r.code, r.stderr)
					return
				}
				own := fmt.Sprintf("data/w%d/1", w)
				r = lake(ownDirs[w], "data", "run", "--namespace", fmt.Sprintf("w%d", w), "--model", fmt.Sprintf("w%d/1", w), "--",
					"sh", "-c", fmt.Sprintf(`mkdir -p %s && echo "$LAKE_FENCING_TOKEN" > %s/iter-%d`, own, own, i))
				if r.code != 0 {
					errs <- fmt.Sprintf("worker %d own run %d: exit %d: %s", w, i, r.code, r.stderr)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	check := t.TempDir()
	if got := ok(t, lake(check, "data", "get", "--namespace", "shared", "data/shared/1/counter")).stdout; strings.TrimSpace(got) != strconv.Itoa(workers*iterations) {
		t.Fatalf("counter = %q, want %d: lost updates", got, workers*iterations)
	}
	for w := range workers {
		files := strings.Fields(ok(t, lake(check, "data", "ls", "--namespace", fmt.Sprintf("w%d", w), fmt.Sprintf("data/w%d/", w))).stdout)
		if len(files) != iterations {
			t.Fatalf("worker %d's model holds %v, want %d files", w, files, iterations)
		}
	}

	// A conflict: worker 0 changes the counter without the lock, worker 1
	// changes it through a run; worker 0's sync is refused, naming it.
	a, b := dirs[0], dirs[1]
	ok(t, lake(a, "data", "sync", "--namespace", "shared"))
	ok(t, lake(b, "data", "sync", "--namespace", "shared"))
	os.WriteFile(filepath.Join(a, "data/shared/1/counter"), []byte("from a\n"), 0o644)
	ok(t, lake(b, "data", "run", "--namespace", "shared", "--", "sh", "-c", "echo from b > data/shared/1/counter"))
	r := lake(a, "data", "status", "--namespace", "shared")
	if !strings.Contains(r.stdout, "data/shared/1/counter") || !strings.Contains(r.stdout, "CONFLICT") {
		t.Fatalf("status: %+v", r)
	}
	r = lake(a, "data", "sync", "--namespace", "shared")
	if r.code != exitConflict || !strings.Contains(r.stderr, "data/shared/1/counter") {
		t.Fatalf("sync of a conflict: %+v, want exit 4 naming the path", r)
	}
	if got := ok(t, lake(check, "data", "get", "--namespace", "shared", "data/shared/1/counter")).stdout; got != "from b\n" {
		t.Fatalf("the conflict overwrote the remote: %q", got)
	}
	ok(t, lake(a, "data", "sync", "--namespace", "shared", "--prefer", "remote"))
	if b, _ := os.ReadFile(filepath.Join(a, "data/shared/1/counter")); string(b) != "from b\n" {
		t.Fatalf("--prefer remote left %q", b)
	}
	// A failed command pushes nothing, and its exit status is lake's.
	r = lake(a, "data", "run", "--namespace", "shared", "--", "sh", "-c", "echo broken > data/shared/1/counter; exit 5")
	if r.code != 5 {
		t.Fatalf("failed run: %+v, want exit 5", r)
	}
	if got := ok(t, lake(check, "data", "get", "--namespace", "shared", "data/shared/1/counter")).stdout; got != "from b\n" {
		t.Fatalf("a failed run pushed %q", got)
	}
}

// TestDataRunLockLost breaks the lock of a running `lake data run` with
// `lake data lock release --force`: its command is stopped, lake exits 1
// saying the lock was lost, and nothing it wrote is committed.
func TestDataRunLockLost(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, http.DefaultClient, "http")
	store := "http://" + n.addr
	work := t.TempDir()
	wait := startLake(t, work, "--store", store, "data", "run", "--namespace", "t", "--lease", "600ms", "--grace", "1s", "--",
		"sh", "-c", "echo partial > f; touch started; exec sleep 30")
	for range 200 {
		if _, err := os.Stat(filepath.Join(work, "started")); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	r := ok(t, run(t, dir, "", "--store", store, "data", "lock", "status", "t/sync", "--json"))
	var info struct {
		Held  bool   `json:"held"`
		Token uint64 `json:"token"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || !info.Held {
		t.Fatalf("lock status: %q (%v)", r.stdout, err)
	}
	if got := ok(t, run(t, dir, "", "--store", store, "data", "lock", "ls", "t")).stdout; !strings.Contains(got, "t/sync") {
		t.Fatalf("lock ls: %q", got)
	}
	ok(t, run(t, dir, "", "--store", store, "data", "lock", "release", "t/sync", "--force", "--token", strconv.FormatUint(info.Token, 10)))
	broken := time.Now()
	res := wait()
	if took := time.Since(broken); took > 10*time.Second {
		t.Fatalf("the run took %v to stop after its lock was broken", took)
	}
	if res.code != exitError || !strings.Contains(res.stderr, "lock") {
		t.Fatalf("the run after its lock was broken: %+v, want exit 1 naming the lock", res)
	}
	if r := run(t, dir, "", "--store", store, "data", "get", "--namespace", "t", "f"); r.code != exitNotFound {
		t.Fatalf("a run whose lock was broken committed f: %+v", r)
	}
}
