package main

import (
	"context"
	"fmt"
	"io"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/spf13/cobra"
)

// dataCheckOptions are the flags of lake data check.
type dataCheckOptions struct {
	lockOptions
	repair, chunks, catalog bool
}

func newDataCheckCommand(g *globalOptions) *cobra.Command {
	var o dataCheckOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check a namespace's datastore structures; --repair fixes what can be fixed",
		Long: `Read the namespace's structures (on S3: every head, log object, index entry and
pending mark; with --chunks also every live file's chunks) and report each
inconsistency with the object involved, one per line. With --repair, under the
namespace's lock NAMESPACE/sync, rebuild what can be derived (a head or an
index entry from the log, commits not rolled forward, a forged fence token
lowered to its lock record's; on DynamoDB a head, its feed position or a
shard counter from the partition's items) and move aside what cannot
(garbage moved to x/TIME/… on S3, under q#MS/… on DynamoDB, named in the
report). --catalog checks the catalog scope too, and the namespace's rows in
it: an entry no lake client writes is named, and --repair deletes it. Through a node (--store http://HOST:PORT) the check runs on the
node's own driver and the node sends the report back. Exit 0 when nothing is
left to repair, 1 otherwise; a driver without a check exits 6. See
docs/datastore.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withNamespace(cmd, func(ns *datastore.Store) error {
				scopes := []checkScope{{s: ns}}
				if o.catalog {
					cat, err := ns.CatalogStore()
					if err != nil {
						return err
					}
					scopes = append(scopes, checkScope{s: cat, rowsOf: ns})
				}
				run := func(fence *datastore.Fence) error {
					return runDataCheck(cmd.Context(), cmd.OutOrStdout(), scopes, datastore.CheckOptions{Repair: o.repair, Chunks: o.chunks, Fence: fence})
				}
				if !o.repair {
					return run(nil)
				}
				return o.underLock(cmd.Context(), ns, run)
			})
		},
	}
	o.lockOptions.addFlags(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.repair, "repair", false, "rebuild what the log holds and move garbage aside, under the namespace's lock")
	f.BoolVar(&o.chunks, "chunks", false, "also check that every live file's chunks exist")
	f.BoolVar(&o.catalog, "catalog", false, "also check the catalog scope")
	return cmd
}

// checkScope is a scope lake data check reads: a namespace, or the
// catalog scope with the rows of namespace rowsOf (catalog.CheckRows).
type checkScope struct {
	s      *datastore.Store
	rowsOf *datastore.Store
}

// runDataCheck checks each scope and prints its problems and a summary.
func runDataCheck(ctx context.Context, w io.Writer, scopes []checkScope, o datastore.CheckOptions) error {
	left := 0
	for _, sc := range scopes {
		s := sc.s
		rep, err := s.Check(ctx, o)
		if err == nil && sc.rowsOf != nil {
			var rows []datastore.Problem
			rows, err = catalog.CheckRows(ctx, sc.rowsOf, o)
			rep.Problems = append(rep.Problems, rows...)
		}
		for _, p := range rep.Problems {
			fmt.Fprintln(w, p)
		}
		if err != nil {
			return err
		}
		repaired := len(rep.Problems) - rep.Unrepaired()
		fmt.Fprintf(w, "%s: %d objects in %d partitions read, %d problems, %d repaired\n",
			scopeName(s), rep.Objects, rep.Partitions, len(rep.Problems), repaired)
		left += rep.Unrepaired()
	}
	if left > 0 {
		hint := "run lake data check --repair"
		if o.Repair {
			hint = "the lines above say what could not be repaired"
		}
		return fmt.Errorf("lake: %d problems left (%s)", left, hint)
	}
	return nil
}

func scopeName(s *datastore.Store) string {
	return "namespace " + s.NamespaceName()
}
