package doctest

import (
	"strings"
	"testing"
	"time"
)

const benchOut = `records:           10000
raw copy:          11.453s (873 items/s)
backfill:          47.077s (212 items/s, 4.11× the raw copy's time)
precheck:          813ms
`

func figuresPage(prose string) string {
	cmd := "./lake bench migration --records 10000"
	body := strings.Join(RenderFigures(cmd, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), benchOut), "\n")
	return "# P\n\n## Cost\n\n<!-- figures: " + cmd + " -->\n" + body + "\n<!-- /figures -->\n\n" + prose + "\n\n## Next\n\nIt took 99 s.\n"
}

// A figures block's prose is checked exactly, lone durations included; the
// checks name what disagrees.
func TestExactFigures(t *testing.T) {
	for _, c := range []struct {
		name, prose, want string // want "" when the page is fine
	}{
		{"quoted", "The backfill ran at 212 items/s, 4.11× the copy's time (47 s; the precheck 0.8 s, 813 ms).", ""},
		{"stale rate", "The backfill ran at 767 items/s.", "767items/s"},
		{"stale range", "The backfill ran at 212–970 items/s.", "970items/s"},
		{"lone duration", "The copy took 14.1 s.", "14.1s"},
		{"ratio", "It took 4.5× the copy's time.", "4.5×"},
		{"a setting, said so", "The settle delay is 2 s by default.", ""},
		{"an earlier run, said so", "Earlier runs gave 767 items/s.", ""},
		{"flags in code", "Run it with `--settle 5s`.", ""},
		{"an earlier run, across lines", "Earlier runs on a quiet\nmachine gave 767 items/s.", ""},
		{"stale, on its line", "The backfill ran\nat 767 items/s.", "p.md:16: "}, // the line its sentence starts on,
	} {
		t.Run(c.name, func(t *testing.T) {
			page := figuresPage(c.prose)
			if _, errs := FigureBlocks("p.md", []byte(page)); len(errs) > 0 {
				t.Fatalf("the rendered block is malformed: %q", errs)
			}
			errs := strings.Join(ExactFigures("p.md", []byte(page)), "\n")
			switch {
			case c.want == "" && errs != "":
				t.Fatalf("a page without drift failed:\n%s", errs)
			case c.want != "" && !strings.Contains(errs, c.want):
				t.Fatalf("drift not caught (want %q): %q", c.want, errs)
			}
			// The heuristic check leaves the section to the exact one.
			if h := Figures("p.md", []byte(page), nil); len(h) > 0 {
				t.Fatalf("the heuristic check ran on a figures section: %q", h)
			}
		})
	}
}

// A block of the wrong shape fails, naming why.
func TestFigureBlockShape(t *testing.T) {
	const open = "<!-- figures: ./lake bench x -->\n"
	const head = "Measured 2026-12-02 with `./lake bench x`:\n\n"
	for _, c := range []struct{ name, page, want string }{
		{"output ok", open + head + "```\na 1.5\n```\n<!-- /figures -->\n", ""},
		{"table ok", open + head + "| a | b |\n|---|---|\n| 1 | 2.5 |\n<!-- /figures -->\n", ""},
		{"a page reference is no block", "<!-- figures: docs/locks.md -->\n", ""},
		{"a marker shown in a code block is no block", "```\n<!-- figures: ./lake bench x -->\n```\n", ""},
		{"never closed", open + head + "```\na\n```\n", "never closed"},
		{"stray close", "<!-- /figures -->\n", "closes no figures block"},
		{"no header", open + "```\na\n```\n<!-- /figures -->\n", "first line"},
		{"other command", open + "Measured 2026-12-02 with `./lake bench y`:\n\n```\na\n```\n<!-- /figures -->\n", "the header names"},
		{"bad date", open + "Measured 2026-13-02 with `./lake bench x`:\n\n```\na\n```\n<!-- /figures -->\n", "date"},
		{"ragged table", open + head + "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n<!-- /figures -->\n", "3 cells, its header 2"},
		{"no separator", open + head + "| a | b |\n| 1 | 2 |\n<!-- /figures -->\n", "separator"},
		{"prose inside", open + head + "```\na\n```\nand then words\n<!-- /figures -->\n", "neither"},
		{"two blocks", open + head + "```\na\n```\n```\nb\n```\n<!-- /figures -->\n", "more than one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs := FigureBlocks("p.md", []byte(c.page))
			got := strings.Join(errs, "\n")
			switch {
			case c.want == "" && got != "":
				t.Fatalf("a good block failed: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Fatalf("want an error with %q, got %q", c.want, got)
			}
		})
	}
}

// refigure's rewrite replaces the bodies it is given and keeps the rest of
// the page byte for byte.
func TestReplaceFigures(t *testing.T) {
	page := figuresPage("The backfill ran at 212 items/s.")
	page += "\n<!-- figures: ./lake bench other -->\nMeasured 2026-12-01 with `./lake bench other`:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n<!-- /figures -->\ntail\n"
	blocks, errs := FigureBlocks("p.md", []byte(page))
	if len(errs) > 0 || len(blocks) != 2 {
		t.Fatalf("blocks %d, errors %q", len(blocks), errs)
	}
	if got := string(ReplaceFigures([]byte(page), blocks, make([][]string, 2))); got != page {
		t.Fatalf("a rewrite of nothing changed the page:\n%s", got)
	}
	fresh := RenderFigures("./lake bench other", time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), "| a | b |\n|---|---|\n| 3 | 4 |\n")
	got := string(ReplaceFigures([]byte(page), blocks, [][]string{nil, fresh}))
	want := strings.Replace(page, "Measured 2026-12-01 with `./lake bench other`:\n\n| a | b |\n|---|---|\n| 1 | 2 |", "Measured 2026-12-03 with `./lake bench other`:\n\n| a | b |\n|---|---|\n| 3 | 4 |", 1)
	if got != want {
		t.Fatalf("rewrite:\n%s\nwant:\n%s", got, want)
	}
	if _, errs := FigureBlocks("p.md", []byte(got)); len(errs) > 0 {
		t.Fatalf("the rewritten page is malformed: %q", errs)
	}
}
