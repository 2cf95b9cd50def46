package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestS3LockRunIsTheSyncLock (issue 28, found from outside): on s3://,
// `lake lock run NS/sync` holds the very lock `lake data sync` takes (one
// keyspace of lock records per datastore, not two), so a held one makes the
// other wait; and a `lock run` that takes the lock over from a dead holder
// fences the namespace's partitions before its command runs, as a sync
// does, so the dead holder's commit cannot land after it.
func TestS3LockRunIsTheSyncLock(t *testing.T) {
	bucket := s3local.Bucket(t)
	store := "s3://" + bucket + "/cli"
	dir := t.TempDir()
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", store}, args...)...) }
	if err := os.MkdirAll(filepath.Join(dir, "w", "data", "m", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w", "data", "m", "1", "a"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake("data", "init"))
	ok(t, lake("data", "sync", "-C", "w"))

	// A holder that dies with the lock held.
	holder := exec.Command(lakeBin, "--store", store, "lock", "run", "--lease", "2s", "default/sync", "--", "sleep", "60")
	holder.Dir, holder.Env = dir, append(os.Environ(), "LAKE_STORE=")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); holder.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(lake("lock", "status", "default/sync").stdout, "held") {
		if time.Now().After(deadline) {
			t.Fatal("the holder never showed as holding default/sync")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A sync with something to push needs the lock (one with nothing to do
	// ends before it: docs/sync.md).
	if err := os.WriteFile(filepath.Join(dir, "w", "data", "m", "1", "a"), []byte("a2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := lake("data", "sync", "-C", "w", "--wait", "200ms"); r.code != exitLockWait {
		t.Fatalf("data sync while lock run holds NS/sync: exit %d (%q), want %d", r.code, r.stderr, exitLockWait)
	}
	if st := lake("data", "lock", "status", "default/sync").stdout; !strings.Contains(st, "held") {
		t.Fatalf("lake data lock status does not show lock run's hold: %q", st)
	}
	syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)

	logObjects := func() int {
		c := s3local.Client(t)
		out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("cli/l/m%2F1/")})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Contents)
	}
	before := logObjects()
	ok(t, lake("lock", "run", "--lease", "2s", "--wait", "30s", "default/sync", "--", "true"))
	if after := logObjects(); after != before+1 {
		t.Fatalf("partition m/1's log went from %d to %d objects across the takeover; want one fence object more", before, after)
	}
	// A sync after it commits as usual.
	if err := os.WriteFile(filepath.Join(dir, "w", "data", "m", "1", "a"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, lake("data", "sync", "-C", "w")).stdout; !strings.Contains(out, "committed 1") {
		t.Fatalf("sync after the takeover: %q", out)
	}
}
