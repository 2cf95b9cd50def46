package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lakemeta/lake/internal/s3local"
)

// TestS3CLI: `lake lock` works on an s3:// store (its locks live in the
// bucket), and the metastore commands refuse one with exit 2.
func TestS3CLI(t *testing.T) {
	store := "s3://" + s3local.Bucket(t) + "/cli"
	dir := t.TempDir()
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", store}, args...)...) }
	first := strings.TrimSpace(ok(t, lake("lock", "run", "ns/job", "--", "sh", "-c", "echo $LAKE_FENCING_TOKEN")).stdout)
	second := strings.TrimSpace(ok(t, lake("lock", "run", "ns/job", "--", "sh", "-c", "echo $LAKE_FENCING_TOKEN")).stdout)
	a, aerr := strconv.ParseUint(first, 10, 64)
	b, berr := strconv.ParseUint(second, 10, 64)
	if aerr != nil || berr != nil || a >= b {
		t.Fatalf("tokens %q then %q: want growing tokens", first, second)
	}
	if out := ok(t, lake("lock", "status", "ns/job")).stdout; !strings.Contains(out, second) {
		t.Fatalf("status = %q, want token %s", out, second)
	}
	if out := ok(t, lake("lock", "ls", "ns")).stdout; !strings.Contains(out, "ns/job") {
		t.Fatalf("ls = %q", out)
	}
	if r := lake("lock", "run", "ns/job", "--", "sh", "-c", "exit 3"); r.code != 3 {
		t.Fatalf("exit status not passed through: %d %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"get", "k"}, {"put", "k", "v"}, {"ls"}} {
		r := lake(args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "lake: ") || !strings.Contains(r.stderr, "S3") {
			t.Errorf("%v on s3://: exit %d, stderr %q; want exit %d saying why", args, r.code, r.stderr, exitUsage)
		}
	}
}
