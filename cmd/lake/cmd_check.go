package main

import (
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/spf13/cobra"
)

func newCheckCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Check a bolt file for damage (read-only)",
		Long: `Check the bolt file named by --store (bolt://PATH) the way bbolt's own check does:
every page is reachable exactly once or free, nothing is both, keys are in order.
Before that it checks both meta pages, that the file is as long as they say, and
that every page and element lies where bbolt will look for it, so a damaged file
is reported rather than crashing the check.

The file is opened read-only with a shared lock and never written. It cannot be
checked while a node or a writing command holds it: stop the node first.

Prints "ok" and the file's figures and exits 0 when the file is sound; prints
each problem found (the first 20) on stdout, one line each, and exits 1
otherwise. A sound bbolt file that is not a lake store (no lake buckets, or zero
bytes) exits 1 too: lake init makes it one.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, ok := strings.CutPrefix(g.store, "bolt://")
			if !ok || path == "" || strings.ContainsAny(path, "?#") {
				return usagef("lake check checks a bolt file: --store bolt://PATH, got %q", g.store)
			}
			rep, err := boltstore.Check(path, 0)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, n := range rep.Notes {
				fmt.Fprintf(out, "note: %s\n", n)
			}
			if rep.Sound() {
				fmt.Fprintf(out, "ok: %s: %d keys; %d pages of %d bytes in use, file %d bytes\n", path, rep.Keys, rep.Pages, rep.PageSize, rep.Size)
				return nil
			}
			for _, p := range rep.Problems {
				fmt.Fprintf(out, "problem: %s\n", p)
			}
			if rep.Found > len(rep.Problems) {
				fmt.Fprintf(out, "... and %d more\n", rep.Found-len(rep.Problems))
			}
			if rep.NotStore {
				return fmt.Errorf("%w: %s: %s", boltstore.ErrNotStore, path, rep.Problems[0])
			}
			return fmt.Errorf("%w: %s: %d problem(s) found, the first: %s", boltstore.ErrDamaged, path, rep.Found, rep.Problems[0])
		},
	}
}
