package main

import (
	"github.com/lakemeta/lake/metastore"
	"github.com/spf13/cobra"
)

type putOptions struct {
	valueFile string
}

func newPutCommand(g *globalOptions) *cobra.Command {
	var o putOptions
	cmd := &cobra.Command{
		Use:   "put KEY [VALUE|-]",
		Short: "Write VALUE under KEY unconditionally",
		Long: `Write VALUE under KEY, replacing any current value. VALUE "-" reads the value
from stdin; --value-file reads it from a file (for binary values). Values are
at most 350 KiB; a larger one is refused, never truncated.`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg, err := valueArg(args, o.valueFile)
			if err != nil {
				return err
			}
			v, err := readValue(arg, o.valueFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(s *metastore.Store) error {
				return s.Put(cmd.Context(), args[0], v)
			})
		},
	}
	cmd.Flags().StringVar(&o.valueFile, "value-file", "", "read the value from this file")
	return cmd
}

// valueArg returns the VALUE argument, requiring exactly one of it and
// --value-file.
func valueArg(args []string, valueFile string) (string, error) {
	switch {
	case len(args) == 2 && valueFile != "":
		return "", usagef("give the value as an argument or with --value-file, not both")
	case len(args) < 2 && valueFile == "":
		return "", usagef("missing VALUE (or - for stdin, or --value-file)")
	case len(args) == 2:
		return args[1], nil
	}
	return "", nil
}
