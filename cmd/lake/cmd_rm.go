package main

import (
	"github.com/lakemeta/lake/metastore"
	"github.com/spf13/cobra"
)

type rmOptions struct {
	expect     string
	expectFile string
}

func newRmCommand(g *globalOptions) *cobra.Command {
	var o rmOptions
	cmd := &cobra.Command{
		Use:   "rm KEY (--expect OLD | --expect-file F)",
		Short: "Delete KEY only if it holds exactly OLD",
		Long: `Delete KEY only if it currently holds exactly OLD (--expect, or --expect-file for
binary values). A different value, or a missing key, deletes nothing and exits
with code 4.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hasExpect := cmd.Flags().Changed("expect")
			if hasExpect == (o.expectFile != "") {
				return usagef("give exactly one of --expect, --expect-file")
			}
			expected, err := readValue(o.expect, o.expectFile, nil)
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(s *metastore.Store) error {
				return s.Delete(cmd.Context(), args[0], expected)
			})
		},
	}
	cmd.Flags().StringVar(&o.expect, "expect", "", "the exact current value")
	cmd.Flags().StringVar(&o.expectFile, "expect-file", "", "read the exact current value from this file")
	return cmd
}
