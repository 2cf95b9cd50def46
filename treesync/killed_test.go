package treesync_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

const killedEnv = "LAKE_TREESYNC_KILLED_WORKER"

// TestKilledWorker kills (SIGKILL) a worker process under its lock, after
// its blobs are uploaded and before its commit: nothing is visible, the
// next sync of the same directory takes the lock over and completes, and
// the orphaned blobs are reclaimed after the grace period.
func TestKilledWorker(t *testing.T) {
	lockOpts := &lock.Options{Lease: 500 * time.Millisecond, ClockSkew: 50 * time.Millisecond, Wait: 20 * time.Second}
	if os.Getenv(killedEnv) != "" {
		dir, db := os.Getenv(killedEnv), os.Getenv(killedEnv+"_DB")
		d, err := boltfs.Open(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := treesync.Open(dir, datastore.New(d), &treesync.Options{Lock: lockOpts})
		if err != nil {
			t.Fatal(err)
		}
		treesync.SetCommitHook(func() {
			os.Stdout.WriteString("uploaded\n")
			time.Sleep(time.Minute)
		})
		tr.Sync(t.Context(), treesync.Scope{})
		os.Exit(3)
	}
	dir, db := t.TempDir(), filepath.Join(t.TempDir(), "lake.db")
	s0, err := boltfs.Open(db, &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s0.Close()
	os.MkdirAll(filepath.Join(dir, "data/m/1"), 0o755)
	os.WriteFile(filepath.Join(dir, "data/m/1/f"), []byte(strings.Repeat("x", datastore.ChunkSize+10)), 0o644)

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), killedEnv+"="+dir, killedEnv+"_DB="+db)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "uploaded\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("worker said %q, want uploaded", line)
	}
	// The worker holds the bolt file: kill it, then open the store.
	cmd.Process.Kill()
	cmd.Wait()
	d, err := boltfs.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	defer s.Close()
	if files, _ := s.ListAll(t.Context(), ""); len(files) != 0 {
		t.Fatalf("a killed worker's upload is visible: %v", files)
	}
	tr, err := treesync.Open(dir, s, &treesync.Options{Lock: lockOpts})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Sync(t.Context(), treesync.Scope{})
	if err != nil || rep.Committed != 1 {
		t.Fatalf("the sync after the killed worker: %+v, %v", rep, err)
	}
	s.SetClock(func() time.Time { return time.Now().Add(2 * datastore.DefaultGrace) })
	st, err := s.Reclaim(t.Context(), datastore.ReclaimOptions{})
	if err != nil || st.Uploads != 1 || st.Chunks != 2 {
		t.Fatalf("Reclaim: %+v, %v; want the killed worker's upload and its 2 chunks", st, err)
	}
	wantRemote(t, s, "data/m/1/f", strings.Repeat("x", datastore.ChunkSize+10))
}
