package main

import (
	"github.com/lakemeta/lake/metastore"
	"github.com/spf13/cobra"
)

type casOptions struct {
	expect       string
	expectFile   string
	expectAbsent bool
	valueFile    string
}

func newCASCommand(g *globalOptions) *cobra.Command {
	var o casOptions
	cmd := &cobra.Command{
		Use:   "cas KEY [NEW|-] (--expect OLD | --expect-file F | --expect-absent)",
		Short: "Write NEW under KEY only if KEY holds exactly OLD (or is absent)",
		Long: `Compare-and-swap: write NEW under KEY only if KEY currently holds exactly OLD
(--expect, or --expect-file for binary values), or does not exist
(--expect-absent, which creates). On a mismatch nothing is written and the exit
code is 4. NEW "-" reads stdin; --value-file reads the new value from a file.`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg, err := valueArg(args, o.valueFile)
			if err != nil {
				return err
			}
			expect, err := o.precondition(cmd)
			if err != nil {
				return err
			}
			v, err := readValue(arg, o.valueFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(s *metastore.Store) error {
				return s.CAS(cmd.Context(), args[0], expect, v)
			})
		},
	}
	cmd.Flags().StringVar(&o.expect, "expect", "", "the exact current value")
	cmd.Flags().StringVar(&o.expectFile, "expect-file", "", "read the exact current value from this file")
	cmd.Flags().BoolVar(&o.expectAbsent, "expect-absent", false, "require that the key does not exist (create)")
	cmd.Flags().StringVar(&o.valueFile, "value-file", "", "read the new value from this file")
	return cmd
}

func (o *casOptions) precondition(cmd *cobra.Command) (metastore.Expect, error) {
	n := 0
	for _, set := range []bool{cmd.Flags().Changed("expect"), o.expectFile != "", o.expectAbsent} {
		if set {
			n++
		}
	}
	if n != 1 {
		return metastore.Expect{}, usagef("give exactly one of --expect, --expect-file, --expect-absent")
	}
	if o.expectAbsent {
		return metastore.ExpectAbsent(), nil
	}
	v, err := readValue(o.expect, o.expectFile, nil)
	if err != nil {
		return metastore.Expect{}, err
	}
	return metastore.ExpectValue(v), nil
}
