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
		Long: `Create what the store URL names if it does not exist yet: the bolt file and its
buckets. Running it again on an existing store changes nothing.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := storeurl.Open(cmd.Context(), g.store, &storeurl.Options{Create: true})
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
