package syncreport

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Metric is one chart: a column of the series and how to title it.
type Metric struct {
	Column, Title, Unit string
	// Counted marks a count or rate, drawn for every interval; the others
	// (means per iteration or sync, sizes) are drawn only for the
	// intervals in which an iteration ended: a stalled interval has no
	// latency to show, not a latency of zero.
	Counted bool
}

// Metrics are the charts of a report, in order.
var Metrics = []Metric{
	{"iter_per_s", "Iterations per second (all workers)", "iterations/s", true},
	{"items_read_per_sync", "Items read per sync (datastore calls)", "items", false},
	{"items_written_per_sync", "Items written per sync", "items", false},
	{"requests_per_sync", "Requests per sync (datastore calls)", "requests", false},
	{"store_items_read_per_sync", "Items the store read per sync (DynamoDB ScannedCount, S3 objects)", "items", false},
	{"store_requests_per_sync", "Store requests per sync (DynamoDB, S3)", "requests", false},
	{"lock_wait_ms", "Lock wait per iteration", "ms", false},
	{"pull_ms", "Pull per iteration", "ms", false},
	{"work_ms", "Work (method run) per iteration", "ms", false},
	{"push_ms", "Push (upload, batch stat) per iteration", "ms", false},
	{"commit_ms", "Commit per iteration", "ms", false},
	{"catalog_ms", "Catalog read per iteration", "ms", false},
	{"prune_ms", "Prune (lifecycle sync) per iteration", "ms", false},
	{"index_written_per_sync", "Index entries written per sync", "entries", false},
	{"catalog_rows", "Catalog rows", "rows", false},
	{"index_entries", "Namespace index entries", "entries", false},
	{"lock_timeouts", "Lock timeouts per interval", "timeouts", true},
	{"errors", "Failed iterations per interval", "iterations", true},
	{"hot_key_share", "Hottest key's share of the load (DynamoDB partition key, S3 prefix: items read)", "share", false},
}

// column returns the named column of every row of r as points (t, value).
func column(r Run, m Metric) (plotter.XYs, error) {
	name := m.Column
	pts := make(plotter.XYs, 0, len(r.Rows))
	for _, row := range r.Rows {
		if !m.Counted && row.Iterations == 0 {
			continue
		}
		names, vals := row.Columns()
		found := false
		for i, n := range names {
			if n == name {
				pts = append(pts, plotter.XY{X: row.T, Y: vals[i]})
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("lake: no column %q", name)
		}
	}
	return pts, nil
}

// Chart draws metric m for every run (a line each) and saves it as
// DIR/chart-COLUMN.png and .svg. It returns the two file names.
func Chart(dir string, m Metric, runs []Run) (png, svg string, err error) {
	p := plot.New()
	p.Title.Text = m.Title
	p.X.Label.Text = "seconds since the start of the configuration's run"
	p.Y.Label.Text = m.Unit
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	top := 0.0
	for i, r := range runs {
		pts, err := column(r, m)
		if err != nil {
			return "", "", err
		}
		if len(pts) == 0 {
			continue
		}
		for _, pt := range pts {
			top = max(top, pt.Y)
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return "", "", fmt.Errorf("lake: chart %s: %w", m.Column, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		l.Width = vg.Points(1.5)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		sc.Radius = vg.Points(2)
		p.Add(l, sc)
		p.Legend.Add(r.Config.Name, l, sc)
	}
	// Headroom above the data for the legend, a line per run.
	if top == 0 {
		top = 1
	}
	p.Y.Max = top * (1.15 + 0.12*float64(len(runs)))
	png, svg = "chart-"+m.Column+".png", "chart-"+m.Column+".svg"
	for _, name := range []string{png, svg} {
		if err := p.Save(18*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return "", "", fmt.Errorf("lake: save chart %s: %w", name, err)
		}
	}
	return png, svg, nil
}
