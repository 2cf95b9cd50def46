// Command refigure re-runs the commands that the README and docs/ name in
// their figures blocks (<!-- figures: COMMAND --> … <!-- /figures -->, see
// internal/doctest) and rewrites each block with the command's output and
// today's date, so that a maintainer refreshes a page's figures with one
// command, from the repository's root:
//
//	source the test servers' environment (scripts/dynamodb-local, scripts/s3-local)
//	go run ./internal/doctest/cmd/refigure [-list] [-run REGEXP] [PAGE ...]
//
// It builds ./lake before the first command that runs it (the pages run
// ./lake, as the README builds it). -run keeps the blocks whose command matches REGEXP; -list
// prints the blocks and runs nothing. A command that fails leaves its
// block as it was and makes refigure exit 1. Then `go test ./cmd/lake/ -run
// TestDocsProse` names every figure of the prose that the new output no
// longer holds.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/lakemeta/lake/internal/doctest"
)

func main() {
	list := flag.Bool("list", false, "print the figures blocks and their commands; run nothing")
	run := flag.String("run", "", "re-run only the blocks whose command matches this regular expression")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/doctest/cmd/refigure [-list] [-run REGEXP] [PAGE ...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := refigure(*list, *run, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "refigure:", err)
		os.Exit(1)
	}
}

func refigure(list bool, run string, pages []string) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run me from the repository's root: %v", err)
	}
	only, err := regexp.Compile(run)
	if err != nil {
		return fmt.Errorf("-run: %v", err)
	}
	if len(pages) == 0 {
		if pages, err = doctest.Pages("."); err != nil {
			return err
		}
	}
	built, failed := false, 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			return err
		}
		blocks, errs := doctest.FigureBlocks(filepath.ToSlash(page), src)
		bodies := make([][]string, len(blocks))
		changed := false
		for i, b := range blocks {
			if !only.MatchString(b.Command) {
				continue
			}
			fmt.Printf("%s:%d: %s\n", b.Page, b.Line, b.Command)
			if list {
				continue
			}
			if !built && strings.Contains(b.Command, "./lake") {
				fmt.Println("building ./lake")
				if out, err := exec.Command("go", "build", "-o", "lake", "./cmd/lake").CombinedOutput(); err != nil {
					return fmt.Errorf("go build ./cmd/lake: %v\n%s", err, out)
				}
				built = true
			}
			var stdout bytes.Buffer
			cmd := exec.Command("bash", "-eu", "-o", "pipefail", "-c", b.Command)
			cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "%s:%d: `%s`: %v; the block is left as it was\n", b.Page, b.Line, b.Command, err)
				failed++
				continue
			}
			fmt.Printf("  done in %v\n", time.Since(start).Round(time.Second))
			bodies[i] = doctest.RenderFigures(b.Command, time.Now().UTC(), stdout.String())
			changed = true
		}
		if len(errs) > 0 && changed {
			return fmt.Errorf("%s: malformed figures blocks, not rewritten:\n%v", page, errs)
		}
		if changed {
			if err := os.WriteFile(page, doctest.ReplaceFigures(src, blocks, bodies), 0o644); err != nil {
				return err
			}
			fmt.Printf("rewrote %s\n", page)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d commands failed", failed)
	}
	return nil
}
