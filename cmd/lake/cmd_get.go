package main

import (
	"github.com/spf13/cobra"
)

func newGetCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "get KEY",
		Short: "Print the value of KEY (strongly consistent)",
		Long: `Print the value of KEY to stdout, byte for byte, with no newline added.
A missing key exits with code 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openReader(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(v)
			return err
		},
	}
}
