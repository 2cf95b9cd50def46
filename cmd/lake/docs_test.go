package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/internal/doctest"
	"github.com/spf13/cobra"
)

// TestDocs runs every command block the README and docs/ mark runnable as a
// testscript against this package's lake (internal/doctest says how pages
// mark blocks), and fails on an unmarked ```sh block. LAKE_DOCS_SCRIPT=NAME
// runs only the script NAME. Run just the docs with
// `go test ./cmd/lake/ -run 'TestDocs'`.
func TestDocs(t *testing.T) {
	doctest.RunScripts(t, "../..", os.Getenv("LAKE_DOCS_SCRIPT"))
}

// cobraTree is the CLI's command tree for the docs' checks.
type cobraTree struct{ root *cobra.Command }

func (c cobraTree) Lookup(words []string) (int, bool) {
	cmd := c.root
	n := 0
	for _, w := range words {
		var next *cobra.Command
		for _, sub := range cmd.Commands() {
			if sub.Name() == w || sub.HasAlias(w) {
				next = sub
				break
			}
		}
		if next == nil {
			break
		}
		cmd, n = next, n+1
	}
	return n, cmd.HasSubCommands()
}

// TestDocsProse fails when a page of the README or docs/ names a `lake …`
// command that does not exist, says an existing command is not built, quotes
// a figure its section's measured tables do not hold, or states one limit
// with two values; a figures block (<!-- figures: COMMAND -->, refreshed by
// `go run ./internal/doctest/cmd/refigure`) of the wrong shape, or prose
// beside it quoting a figure it does not hold, fails too.
func TestDocsProse(t *testing.T) {
	pages, err := doctest.Pages("../..")
	if err != nil {
		t.Fatal(err)
	}
	tree := cobraTree{newRootCommand()}
	for _, p := range pages {
		src, err := os.ReadFile(filepath.Join("../..", p))
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		errs = append(errs, doctest.Commands(p, src, tree)...)
		errs = append(errs, doctest.NotBuilt(p, src, tree)...)
		errs = append(errs, doctest.Figures(p, src, func(other string) ([]float64, []float64) {
			b, err := os.ReadFile(filepath.Join("../..", other))
			if err != nil {
				t.Errorf("%s: figures from %s: %v", p, other, err)
				return nil, nil
			}
			return doctest.FigureNumbers(b)
		})...)
		errs = append(errs, doctest.Limits(p, src)...)
		errs = append(errs, doctest.BareLake(p, src)...)
		errs = append(errs, doctest.Sources(p, src)...)
		_, blockErrs := doctest.FigureBlocks(p, src)
		errs = append(errs, append(blockErrs, doctest.ExactFigures(p, src)...)...)
		for _, e := range errs {
			t.Error(e)
		}
	}
}
