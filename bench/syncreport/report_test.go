package syncreport_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/bench/syncreport"
	"github.com/lakemeta/lake/datastore/boltfs"
)

// runConfig runs cfg on a fresh bolt datastore and returns its series.
func runConfig(t *testing.T, cfg syncload.Config) syncreport.Run {
	t.Helper()
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "ds.db"), &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	samples, err := syncload.Run(context.Background(), cfg, syncload.Env{Driver: d}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := cfg.Workers * cfg.Iterations; len(samples) != want {
		t.Fatalf("%s: %d samples, want %d", cfg.Name, len(samples), want)
	}
	for _, s := range samples {
		if !s.OK {
			t.Fatalf("%s: worker %d iteration %d failed: %s", cfg.Name, s.Worker, s.Iteration, s.Err)
		}
	}
	return syncreport.Run{Config: cfg, Rows: syncload.Series(cfg, samples, cfg.Interval)}
}

// TestTinyScenarioReport runs the seed's first and last configurations on
// bolt for a few seconds, writes the report and checks its files and the
// shape of its series: the full pull's items read per sync grow with the
// datastore, the feed's (catalog read incrementally, lifecycle pruning)
// stay flat.
func TestTinyScenarioReport(t *testing.T) {
	base := syncload.DefaultConfig()
	base.Workers, base.Files, base.FileSize, base.Interval = 2, 3, 64, 150*time.Millisecond
	cfgs := syncload.Seed004(base, time.Second)
	full, fixed := cfgs[0], cfgs[4]
	// Bounded by iterations, not time: the same work whatever the machine.
	full.Duration, full.Iterations = 0, 40
	full.Commit = syncload.CommitChanged // the test is about the pull
	fixed.Duration, fixed.Iterations = 0, 40
	runs := []syncreport.Run{runConfig(t, full), runConfig(t, fixed)}

	dir := t.TempDir()
	sums, err := syncreport.Write(dir, syncreport.Meta{Title: "test", Store: "bolt://test", Command: "go test", Started: time.Now()}, runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 {
		t.Fatalf("%d summaries", len(sums))
	}
	checkCSV(t, filepath.Join(dir, "series.csv"), runs)
	for _, m := range syncreport.Metrics {
		checkFile(t, filepath.Join(dir, "chart-"+m.Column+".png"), []byte("\x89PNG\r\n\x1a\n"))
		checkFile(t, filepath.Join(dir, "chart-"+m.Column+".svg"), []byte("<svg"))
	}
	checkHTML(t, dir)

	for _, r := range runs {
		checkSane(t, r)
	}
	if first, last := third(runs[0], false), third(runs[0], true); last < 2*first {
		t.Errorf("full pull: items read per sync %.1f in the first third, %.1f in the last: want growth", first, last)
	}
	if first, last := third(runs[1], false), third(runs[1], true); last > 1.5*first+5 {
		t.Errorf("feed pull: items read per sync %.1f in the first third, %.1f in the last: want flat", first, last)
	}
}

// third is the mean items read per sync, weighted by syncs, over the first
// or last third of r's syncs.
func third(r syncreport.Run, last bool) float64 {
	total := 0
	for _, row := range r.Rows {
		total += row.Syncs
	}
	rows := r.Rows
	if last {
		rows = make([]syncload.Row, len(r.Rows))
		for i, row := range r.Rows {
			rows[len(r.Rows)-1-i] = row
		}
	}
	var items float64
	n := 0
	for _, row := range rows {
		if n >= total/3 {
			break
		}
		items += row.ItemsReadPerSync * float64(row.Syncs)
		n += row.Syncs
	}
	return items / float64(n)
}

func checkSane(t *testing.T, r syncreport.Run) {
	t.Helper()
	if len(r.Rows) < 3 {
		t.Fatalf("%s: %d rows, want several", r.Config.Name, len(r.Rows))
	}
	prev := 0.0
	iters := 0
	for i, row := range r.Rows {
		if row.T <= prev {
			t.Errorf("%s: row %d at %.3fs after %.3fs", r.Config.Name, i, row.T, prev)
		}
		prev = row.T
		iters += row.Iterations
		if row.IterPerSec < 0 || row.ItemsReadPerSync < 0 || row.HotKeyShare < 0 || row.HotKeyShare > 1 {
			t.Errorf("%s: row %d: %+v", r.Config.Name, i, row)
		}
		if row.Iterations > 0 && (row.IterPerSec <= 0 || row.ItemsWrittenPerSync <= 0 || row.RequestsPerSync <= 0) {
			t.Errorf("%s: row %d has iterations but no rate or cost: %+v", r.Config.Name, i, row)
		}
	}
	if want := r.Config.Workers * r.Config.Iterations; iters != want {
		t.Errorf("%s: rows count %d iterations, want %d", r.Config.Name, iters, want)
	}
}

func checkCSV(t *testing.T, name string, runs []syncreport.Run) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("series.csv does not parse: %v", err)
	}
	want := 1
	for _, r := range runs {
		want += len(r.Rows)
	}
	if len(recs) != want {
		t.Fatalf("series.csv has %d records, want %d", len(recs), want)
	}
	header := recs[0]
	if header[0] != "config" || header[1] != "t_s" || header[len(header)-1] != "hot_key" {
		t.Fatalf("series.csv header %v", header)
	}
	for _, rec := range recs[1:] {
		if len(rec) != len(header) {
			t.Fatalf("series.csv record %v has %d fields, header %d", rec, len(rec), len(header))
		}
		for i := 1; i < len(rec)-1; i++ {
			if _, err := strconv.ParseFloat(rec[i], 64); err != nil {
				t.Fatalf("series.csv %s = %q: %v", header[i], rec[i], err)
			}
		}
	}
}

func checkFile(t *testing.T, name string, magic []byte) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 1000 || !bytes.Contains(b[:min(len(b), 512)], magic) {
		t.Fatalf("%s: %d bytes, starting %q: want a chart", name, len(b), b[:min(len(b), 32)])
	}
}

// checkHTML: every src and href of index.html names a file beside it, and
// nothing is fetched from elsewhere.
func checkHTML(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Contains(page, "<script") || strings.Contains(page, "@import") || strings.Contains(page, "url(") || strings.Contains(page, "<link") || strings.Contains(page, "http") {
		t.Fatalf("index.html loads something from elsewhere:\n%s", page)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 2*len(syncreport.Metrics) {
		t.Fatalf("index.html has %d references, want the charts'", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		if strings.ContainsAny(ref, "/:\\") {
			t.Errorf("index.html references %q: want a file beside it", ref)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, ref)); err != nil {
			t.Errorf("index.html references %q: %v", ref, err)
		}
	}
}
