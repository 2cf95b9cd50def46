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
buckets. Running it again on an existing store changes nothing.

init is also the one command that makes an existing file a bolt store: a
zero-byte file, or another program's bbolt file (lake's two buckets are added
beside what is there). Every other command refuses such a file. A damaged file
is refused unchanged; see lake check.`,
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
