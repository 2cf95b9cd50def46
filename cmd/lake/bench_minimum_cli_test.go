package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/bench/syncreport"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestBenchSyncPrintsMinimum (issue 31): `lake bench sync` prints, for
// each configuration, the requests, items read and items written per sync
// beside the least the work needs and the ratio.
func TestBenchSyncPrintsMinimum(t *testing.T) {
	dir := t.TempDir()
	r := ok(t, run(t, dir, "", "--store", "bolt://"+filepath.Join(dir, "s.db"), "bench", "sync",
		"--workers", "1", "--iterations", "3", "--files", "2", "--interval", "250ms", "--out", filepath.Join(dir, "report")))
	head := regexp.MustCompile(`per sync, last tenth +requests +minimum +ratio +read +minimum +ratio +written +minimum +ratio\n`)
	if !head.MatchString(r.stdout) {
		t.Fatalf("no table of minimums: %q", r.stdout)
	}
	// 2 data files and the definition, then the delete: (4 + 3 + 4)/2
	// requests (bolt: a call a file), 1 item read, (3 + 1)/2 written.
	row := regexp.MustCompile(`\n\S.* +[0-9.]+ +5\.5 +[0-9.]+× +[0-9.]+ +1\.0 +[0-9.]+× +[0-9.]+ +2\.0 +[0-9.]+×\n`)
	if !row.MatchString(r.stdout) {
		t.Fatalf("no row with the minimum 5.5, 1, 2: %q", r.stdout)
	}
}

// The minimum of the seed's loop on each backend.
func TestSyncMinimum(t *testing.T) {
	// The seed's configuration 5: 5 files, lifecycle on.
	c := syncload.Config{Mode: syncload.ModeLoop, Models: syncload.ModelsDisposable, Files: 5, Lifecycle: syncload.LifecycleOn}
	for _, x := range []struct {
		store                   string
		requests, read, written float64
	}{
		{"dynamodb://t", 4.5, 1, 6},
		{"s3://b/p", 7, 1, 6},
		{"bolt:///x.db", 7, 1, 6},
	} {
		req, read, written, ok := syncreport.Minimum(c, x.store)
		if !ok || req != x.requests || read != x.read || written != x.written {
			t.Errorf("%s: %v %v %v %v, want %v %v %v", x.store, req, read, written, ok, x.requests, x.read, x.written)
		}
	}
	c.Files = 60
	if req, _, _, _ := syncreport.Minimum(c, "dynamodb://t"); req != (4+3+4)/2.0 {
		t.Errorf("61 files on DynamoDB: %v requests, want 5.5 (3 batches)", req)
	}
	c.Files, c.Lifecycle = 5, syncload.LifecyclePrune
	if req, _, wr, _ := syncreport.Minimum(c, "s3://b"); req != 18/3.0 || wr != 12/3.0 {
		t.Errorf("prune on S3: %v requests, %v written, want 6 and 4", req, wr)
	}
	if _, _, _, ok := syncreport.Minimum(syncload.Config{Mode: syncload.ModeWriteStress}, "s3://b"); ok {
		t.Error("a minimum for write-stress")
	}
	if _, _, _, ok := syncreport.Minimum(syncload.Config{Mode: syncload.ModeLoop, Models: syncload.ModelsLongLived}, "s3://b"); ok {
		t.Error("a minimum for long-lived models")
	}
}

// TestBenchComparePrintsMinimum (issue 31): `lake bench compare` prints,
// for every single step in every state, lake's requests per operation
// beside the minimum (the raw SDK's one request) and the ratio, and the
// ratio of capacity units.
func TestBenchComparePrintsMinimum(t *testing.T) {
	dir := t.TempDir()
	store := "dynamodb://" + ddblocal.TableName(t) + "?endpoint=" + ddblocal.Endpoint(t)
	r := ok(t, run(t, dir, "", "--store", store, "bench", "compare", "--ops", "2", "--records", "0"))
	head := regexp.MustCompile(`lake units/op +raw units/op +units ratio +lake requests/op +minimum +requests ratio\n`)
	if !head.MatchString(r.stdout) {
		t.Fatalf("no minimum columns: %q", r.stdout)
	}
	// Six states of four steps; each step's minimum is one request, and
	// lake's own figure (at least one) is divided by it.
	row := regexp.MustCompile(`(?m)^ *(v1|dual|backfill|v2-authoritative|v2-only|standalone v2) +(create if absent|point read \(strong\)|CAS|delete) .* ([0-9.]+)× +([0-9.]+) +1\.00 +([0-9.]+)×$`)
	rows := row.FindAllStringSubmatch(r.stdout, -1)
	if len(rows) != 24 {
		t.Fatalf("%d rows with a minimum of 1 request, want 24: %q", len(rows), r.stdout)
	}
	for _, m := range rows {
		if n, err := strconv.ParseFloat(m[4], 64); err != nil || n < 1 || m[4] != m[5] {
			t.Errorf("%s %s: %s requests over a minimum of 1 printed as %s×", m[1], m[2], m[4], m[5])
		}
	}
}
