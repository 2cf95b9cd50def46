package doctest

import (
	"strings"
	"testing"
)

// tree is a fake CLI: lake data run|sync, lake lock run, lake serve.
type tree map[string][]string

func (tr tree) Lookup(words []string) (int, bool) {
	path := ""
	n := 0
	for _, w := range words {
		found := false
		for _, sub := range tr[path] {
			if sub == w {
				found = true
			}
		}
		if !found {
			break
		}
		path = strings.TrimSpace(path + " " + w)
		n++
	}
	return n, len(tr[path]) > 0
}

var cli = tree{"": {"data", "lock", "serve"}, "data": {"run", "sync"}, "lock": {"run"}}

// The checks catch each kind of drift issue 33 found, and pass the
// corrected page.
func TestChecksCatchDrift(t *testing.T) {
	const table = "| run | ratio | p99 ms |\n|---|---|---|\n| five | 0.90 | 1663.95 |\n\n"
	for _, c := range []struct {
		name, page string
		check      func([]byte) []string
		want       string // "" when the page is fine
	}{
		{"ratio", "## R\n\n" + table + "The rate ends at 0.94× the first.\n", figures, "0.94×"},
		{"ratio ok", "## R\n\n" + table + "The rate ends at 0.90× the first.\n", figures, ""},
		{"range", "## R\n\n" + table + "It takes over at once (4–209 ms).\n", figures, "209ms"},
		{"p99", "## R\n\n" + table + "The polling is unfair: p99 3 s.\n", figures, "3s"},
		{"p99 ok", "## R\n\n" + table + "The polling is unfair: p99 1,664 ms, about 2 s.\n", figures, ""},
		{"earlier run", "## R\n\n" + table + "Two earlier runs gave 0.94× and 0.84×.\n", figures, ""},
		{"limits", "up to 50 keys per transaction\n\nand up to 25 keys per transaction\n", func(b []byte) []string { return Limits("p.md", b) }, "up to 25"},
		{"not built", "## Not built\n\n- `lake data run` does not exist yet.\n", func(b []byte) []string { return NotBuilt("p.md", b, cli) }, "lake data run"},
		{"not built, really", "- `lake data frobnicate` is not built yet.\n", func(b []byte) []string { return NotBuilt("p.md", b, cli) }, ""},
		{"unknown command", "Run `lake data frobnicate DIR`.\n", func(b []byte) []string { return Commands("p.md", b, cli) }, `no command "frobnicate"`},
		{"unknown in a block", "```sh\n./lake --store s3://b/p lock frob x\n```\n", func(b []byte) []string { return Commands("p.md", b, cli) }, `no command "frob"`},
		{"known commands", "`lake data run|sync`, `lake --store URL serve`, `lake lock run NAME -- x`\n", func(b []byte) []string { return Commands("p.md", b, cli) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := strings.Join(c.check([]byte(c.page)), "\n")
			switch {
			case c.want == "" && errs != "":
				t.Fatalf("a page without drift failed:\n%s", errs)
			case c.want != "" && !strings.Contains(errs, c.want):
				t.Fatalf("drift not caught (want %q): %q", c.want, errs)
			}
		})
	}
}

func figures(b []byte) []string { return Figures("p.md", b, nil) }

// Every sh block needs a marker; marked blocks assemble into scripts with
// their files.
func TestScripts(t *testing.T) {
	page := "<!-- testscript-file: demo work/m.sh -->\n```sh\necho hi\n```\n\n" +
		"<!-- testscript: demo needs=node -->\n```sh\n./lake serve &\n```\n\n" +
		"<!-- not run: a benchmark -->\n```sh\n./lake bench x\n```\n"
	s, err := Scripts(Blocks("p.md", []byte(page)))
	if err != nil {
		t.Fatal(err)
	}
	ar := s["demo"].Txtar()
	for _, want := range []string{"exec bash -eu -o pipefail .doc/script.sh", "# p.md:7\n./lake serve &\n", "-- work/m.sh --\necho hi\n"} {
		if !strings.Contains(ar, want) {
			t.Fatalf("txtar lacks %q:\n%s", want, ar)
		}
	}
	if _, err := Scripts(Blocks("p.md", []byte("```sh\n./lake serve\n```\n"))); err == nil || !strings.Contains(err.Error(), "without a marker") {
		t.Fatalf("an unmarked block: %v", err)
	}
	if _, err := Scripts(Blocks("p.md", []byte("<!-- not run: -->\n```sh\nx\n```\n"))); err == nil {
		t.Fatal("a not-run marker without a reason passed")
	}
}

// A section of measured figures names its command and date.
func TestSources(t *testing.T) {
	table := "| run | p50 ms | p99 ms |\n|---|---|---|\n| a | 0.42 | 6.71 |\n| b | 1.5 | 9 |\n"
	for _, c := range []struct {
		page string
		ok   bool
	}{
		{"## F\n\n" + table, false},
		{"## F\n\nMeasured 2026-12-01 with `./lake bench lock --runs 3`:\n\n" + table, true},
		{"## F\n\nMeasured with `./lake bench lock`:\n\n" + table, false},
		{"## F\n\n<!-- unsourced: an example -->\n" + table, true},
		{"## F\n\n| code | status | exit |\n|---|---|---|\n| a | 404 | 3 |\n| b | 409 | 4 |\n", true},
	} {
		if errs := Sources("p.md", []byte(c.page)); (len(errs) == 0) != c.ok {
			t.Errorf("page %q: errors %q, want ok=%v", c.page, errs, c.ok)
		}
	}
	if errs := BareLake("p.md", []byte("<!-- not run: x -->\n```sh\nlake serve\n```\n")); len(errs) != 1 {
		t.Errorf("bare lake: %q", errs)
	}
}
