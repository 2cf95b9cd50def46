package main

import (
	"fmt"

	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

func newInitCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create what the store URL names (idempotent)",
		Long: `Create what the store URL names if it does not exist yet; running it again on an
existing store changes nothing.

  bolt://PATH       the bbolt file and its buckets
  dynamodb://TABLE  the v1 table TABLE (layouts auto and v1; a migration creates
                    TABLE_prefix_v2 when it enters dual), or with ?layout=v2 the v2
                    table with its frozen layout parameters; PAY_PER_REQUEST, waiting
                    until ACTIVE; TTL enabled on the attribute "expires" (lock
                    records' backstop; a table's own TTL is left alone)
  http://HOST:PORT  (or https://) a node: nothing to create, the node serves a
                    store that exists (lake serve creates its own bolt file); init
                    only checks the URL`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := storeurl.Open(cmd.Context(), g.store, &storeurl.Options{Create: true, Init: true})
			if err != nil {
				return err
			}
			if err := s.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "initialized %s\n", g.store)
			return nil
		},
	}
}
