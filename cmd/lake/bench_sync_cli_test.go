package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchSyncRefusals: bad switches, processes on bolt, a datastore that
// holds files are usage errors that say what to do.
func TestBenchSyncRefusals(t *testing.T) {
	dir := t.TempDir()
	store := "bolt://" + filepath.Join(dir, "ds.db")
	wantExit(t, "processes on bolt", run(t, dir, "", "--store", store, "bench", "sync", "--processes", "2"), 2, "lake serve")
	wantExit(t, "bad pull", run(t, dir, "", "--store", store, "bench", "sync", "--pull", "some"), 2, "pull")
	wantExit(t, "quick patch on bolt", run(t, dir, "", "--store", store, "bench", "sync", "--pull", "full-filter"), 2, "dynamodb://")
	wantExit(t, "bad scenario", run(t, dir, "", "--store", store, "bench", "sync", "--scenario", "seed005"), 2, "seed004")
	wantExit(t, "scenario on a node", run(t, dir, "", "--store", "http://127.0.0.1:1", "bench", "sync", "--scenario", "seed004"), 2, "fresh datastore")
	ok(t, run(t, dir, "", "--store", store, "data", "init"))
	ok(t, run(t, dir, "x", "--store", store, "data", "put", "data/m/1/f", "-"))
	wantExit(t, "datastore with files", run(t, dir, "", "--store", store, "bench", "sync", "--iterations", "1"), 2, "without files")
}

// TestBenchSyncScenario runs the seed's five configurations for a second
// each on bolt and checks the report holds the five series.
func TestBenchSyncScenario(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "report")
	r := ok(t, run(t, dir, "", "--store", "bolt://"+filepath.Join(dir, "s.db"), "bench", "sync", "--scenario", "seed004",
		"--budget", "5s", "--workers", "2", "--files", "2", "--interval", "250ms", "--out", out))
	if !strings.Contains(r.stdout, "5 +catalog incremental, lifecycle") || !strings.Contains(r.stderr, "bench sync: 1 all bottlenecks") {
		t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	f, err := os.Open(filepath.Join(out, "series.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]bool{}
	for _, rec := range recs[1:] {
		configs[rec[0]] = true
	}
	if len(configs) != 5 {
		t.Fatalf("series.csv holds configurations %v, want the seed's five", configs)
	}
	for i := 1; i <= 5; i++ {
		if _, err := os.Stat(filepath.Join(dir, "s.db-c"+string(rune('0'+i)))); err != nil {
			t.Errorf("configuration %d's datastore: %v", i, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); err != nil {
		t.Fatal(err)
	}
}
