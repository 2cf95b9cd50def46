package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultproxy"
)

// lockFaultRuns is how many sequential lock runs TestLockRunsUnderFaults
// makes per lock storage: a few by default, LAKE_LOCK_FAULT_RUNS (40 in
// issue 29's check) for the full run.
func lockFaultRuns(t *testing.T) int {
	s := os.Getenv("LAKE_LOCK_FAULT_RUNS")
	if s == "" {
		return 8
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("LAKE_LOCK_FAULT_RUNS=%q: want a positive number", s)
	}
	return n
}

// TestLockRunsUnderFaults (issue 29): with 8 % of DynamoDB requests faulted
// on the wire (responses lost after the write landed, 500s, throttling,
// delays), sequential `lake lock run --lease 4s` (the metastore's lock) and
// `lake data run --lease 4s` (the datastore's sync lock) through the built
// CLI each finish well within a lease, and their fencing tokens only grow.
// Before issue 29 a lost acquisition response on the datastore's records
// made the holder wait a whole lease for its own record.
func TestLockRunsUnderFaults(t *testing.T) {
	ep := ddblocal.Endpoint(t)
	p, err := faultproxy.Start(ep, 29)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	table := ddblocal.LakeTable(t, ddblocal.Client(t))
	direct := "dynamodb://" + table + "?endpoint=" + ep
	ok(t, run(t, t.TempDir(), "", "--store", direct, "init"))
	ok(t, run(t, t.TempDir(), "", "--store", direct, "data", "init"))
	t.Cleanup(func() { deleteDataTable(t, direct) })

	faulted := "dynamodb://" + table + "?endpoint=" + p.URL
	p.SetRates(map[faultproxy.Fault]float64{
		faultproxy.DropResponse: 0.03, faultproxy.ServerError: 0.02, faultproxy.Throttle: 0.02, faultproxy.Delay: 0.01})
	runs := lockFaultRuns(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"metastore", []string{"lock", "run", "faults/x", "--lease", "4s", "--"}},
		{"datastore", []string{"data", "run", "--namespace", "faults", "--lease", "4s", "--"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var last uint64
			var slowest time.Duration
			for i := range runs {
				args := append([]string{"--store", faulted}, tc.args...)
				args = append(args, "sh", "-c", `echo "$LAKE_FENCING_TOKEN"`)
				start := time.Now()
				r := run(t, dir, "", args...)
				took := time.Since(start)
				if r.code != 0 {
					t.Fatalf("run %d: exit %d after %v, stderr %q", i, r.code, took, r.stderr)
				}
				slowest = max(slowest, took)
				if took >= 3*time.Second {
					t.Errorf("run %d took %v, want under 3s (a lease is 4s)", i, took)
				}
				tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
				if err != nil {
					t.Fatalf("run %d: token %q: %v", i, r.stdout, err)
				}
				if tok <= last {
					t.Errorf("run %d: token %d after %d, want it to grow", i, tok, last)
				}
				last = tok
			}
			t.Logf("%d runs, slowest %v", runs, slowest)
		})
	}
	injected, requests := p.Injected()
	t.Logf("%d requests through the proxy, faults %v", requests, injected)
	if injected[faultproxy.DropResponse] == 0 {
		t.Errorf("no response was lost in %d requests: the test did not test", requests)
	}
}
