package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestDataCheckCLI (issue 28, row 4): a head deleted by a foreign client
// makes the file vanish (get exits 3); lake data check names the object and
// exits 1, lake data check --repair rebuilds it under the lock and exits 0,
// and the file is back; the catalog scope is checked and reclaimed from the
// CLI. On a sound bolt file it finds nothing.
func TestDataCheckCLI(t *testing.T) {
	bucket := s3local.Bucket(t)
	store := "s3://" + bucket + "/cli"
	dir := t.TempDir()
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", store}, args...)...) }
	src := filepath.Join(dir, "src")
	os.WriteFile(src, []byte("hello"), 0o644)
	ok(t, lake("data", "put", "data/m/1/f", src))
	if _, err := s3local.Client(t).DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String("cli/h/m%2F1")}); err != nil {
		t.Fatal(err)
	}
	if r := lake("data", "get", "data/m/1/f"); r.code != exitNotFound {
		t.Fatalf("get under a deleted head: exit %d, want %d (the damage repaired below)", r.code, exitNotFound)
	}
	r := lake("data", "check")
	if r.code != exitError || !strings.Contains(r.stdout, "cli/h/m%2F1") || !strings.Contains(r.stderr, "lake data check --repair") {
		t.Fatalf("check: exit %d, stdout %q, stderr %q; want exit 1 naming the head", r.code, r.stdout, r.stderr)
	}
	r = ok(t, lake("data", "check", "--repair", "--chunks"))
	if !strings.Contains(r.stdout, "repaired") {
		t.Errorf("check --repair said %q", r.stdout)
	}
	ok(t, lake("data", "check", "--catalog"))
	if out := ok(t, lake("data", "reclaim", "--catalog")).stdout; !strings.Contains(out, "uploads") {
		t.Errorf("reclaim --catalog said %q", out)
	}
	if out := ok(t, lake("data", "get", "data/m/1/f")).stdout; out != "hello" {
		t.Errorf("get after the repair: %q", out)
	}
	bolt := "bolt://" + filepath.Join(t.TempDir(), "lake.db")
	ok(t, run(t, dir, "", "--store", bolt, "data", "init"))
	if r := run(t, dir, "", "--store", bolt, "data", "check", "--repair", "--catalog"); r.code != exitOK || !strings.Contains(r.stdout, "0 problems") {
		t.Errorf("check on a sound bolt file: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
