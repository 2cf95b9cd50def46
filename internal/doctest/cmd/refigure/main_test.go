package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refigure re-runs a block's command and rewrites the block with its
// output and today's date; a failing command leaves its block as it was
// and fails the run; -list runs nothing.
func TestRefigure(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("go.mod", []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const ok = "printf 'rate: 2.5 items/s\\n'"
	const bad = "echo partial; false"
	page := "# P\n\nIntro.\n\n<!-- figures: " + ok + " -->\nMeasured 2026-01-01 with `" + ok + "`:\n\n```\nrate: 1.0 items/s\n```\n<!-- /figures -->\n\n" +
		"<!-- figures: " + bad + " -->\nMeasured 2026-01-01 with `" + bad + "`:\n\n```\nold\n```\n<!-- /figures -->\ntail\n"
	path := filepath.Join("docs", "p.md")
	if err := os.MkdirAll("docs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := refigure(true, "", []string{path}); err != nil {
		t.Fatalf("-list: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != page {
		t.Fatalf("-list changed the page:\n%s", b)
	}
	err := refigure(false, "", []string{path})
	if err == nil || !strings.Contains(err.Error(), "1 commands failed") {
		t.Fatalf("a failing command: %v", err)
	}
	b, _ := os.ReadFile(path)
	today := time.Now().UTC().Format(time.DateOnly)
	want := strings.Replace(page, "Measured 2026-01-01 with `"+ok+"`:\n\n```\nrate: 1.0 items/s\n```", "Measured "+today+" with `"+ok+"`:\n\n```\nrate: 2.5 items/s\n```", 1)
	if string(b) != want {
		t.Fatalf("page after refigure:\n%s\nwant:\n%s", b, want)
	}
	if err := refigure(false, "^nothing$", []string{path}); err != nil {
		t.Fatalf("-run matching nothing: %v", err)
	}
}
