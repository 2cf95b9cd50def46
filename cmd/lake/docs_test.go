package main

import (
	"os"
	"testing"

	"github.com/lakemeta/lake/internal/doctest"
)

// TestDocs runs every command block the README and docs/ mark runnable as a
// testscript against this package's lake (internal/doctest says how pages
// mark blocks), and fails on an unmarked ```sh block. LAKE_DOCS_SCRIPT=NAME
// runs only the script NAME. Run just the docs with
// `go test ./cmd/lake/ -run 'TestDocs'`.
func TestDocs(t *testing.T) {
	doctest.RunScripts(t, "../..", os.Getenv("LAKE_DOCS_SCRIPT"))
}
