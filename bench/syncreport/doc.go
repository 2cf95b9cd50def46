// Package syncreport writes the report of `lake bench sync`: the time
// series of each run as CSV, one chart per metric (PNG and SVG, drawn with
// gonum.org/v1/plot, every run a line of its own), and an index.html that
// gathers them and opens offline: it references only the files beside it
// and embeds no script or font.
package syncreport
