package syncreport

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"
)

// Meta describes a report's run for its page.
type Meta struct {
	Title   string
	Store   string
	Command string
	Started time.Time
	Elapsed time.Duration
}

type chartRef struct {
	Title, PNG, SVG string
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Meta.Title}}</title>
<style>
body{font-family:sans-serif;margin:1.5em;max-width:80em}
table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #bbb;padding:.2em .5em;text-align:right}
td.l,th.l{text-align:left}img{max-width:100%;border:1px solid #ddd}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(36em,1fr));gap:1em}
code{font-size:90%}
</style></head><body>
<h1>{{.Meta.Title}}</h1>
<p>Store <code>{{.Meta.Store}}</code>; started {{.Meta.Started.UTC.Format "2006-01-02 15:04:05 UTC"}}, {{.Meta.Elapsed}} in all.<br>
Command: <code>{{.Meta.Command}}</code></p>
<p>The series are in <a href="series.csv">series.csv</a>; every chart is also an SVG (click a chart).
Rates count the iterations that succeeded; latencies are means per iteration, costs means per sync.
"first/last tenth" compare the first and the last tenth of each run's intervals.</p>
<table><tr><th class="l">configuration</th><th>iterations</th><th>failed</th><th>lock timeouts</th>
<th>iter/s first tenth</th><th>iter/s last tenth</th><th>last/first</th>
<th>items read/sync first</th><th>last</th><th>items written/sync first</th><th>last</th><th>catalog rows at end</th><th>index entries at end</th></tr>
{{range .Summaries}}<tr><td class="l"><b>{{.Name}}</b><br><code>{{.Config}}</code></td><td>{{.Iterations}}</td><td>{{.Errors}}</td><td>{{.Timeouts}}</td>
<td>{{printf "%.3f" .RateFirst}}</td><td>{{printf "%.3f" .RateLast}}</td><td>{{printf "%.2f" .RateRatio}}</td>
<td>{{printf "%.1f" .ReadFirst}}</td><td>{{printf "%.1f" .ReadLast}}</td><td>{{printf "%.1f" .WrittenFirst}}</td><td>{{printf "%.1f" .WrittenLast}}</td>
<td>{{.CatalogEnd}}</td><td>{{printf "%.0f" .IndexEnd}}</td></tr>
{{end}}</table>
<div class="charts">
{{range .Charts}}<figure><a href="{{.SVG}}"><img src="{{.PNG}}" alt="{{.Title}}"></a><figcaption>{{.Title}}</figcaption></figure>
{{end}}</div>
</body></html>
`))

// Write writes the whole report into dir (created if missing): series.csv,
// chart-*.png and chart-*.svg, and index.html. It returns the summaries.
func Write(dir string, meta Meta, runs []Run) ([]Summary, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "series.csv"))
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	err = WriteCSV(f, runs)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	var charts []chartRef
	for _, m := range Metrics {
		png, svg, err := Chart(dir, m, runs)
		if err != nil {
			return nil, err
		}
		charts = append(charts, chartRef{Title: m.Title, PNG: png, SVG: svg})
	}
	var sums []Summary
	for _, r := range runs {
		sums = append(sums, Summarize(r))
	}
	h, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	err = page.Execute(h, map[string]any{"Meta": meta, "Summaries": sums, "Charts": charts})
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("lake: write index.html: %w", err)
	}
	return sums, nil
}
