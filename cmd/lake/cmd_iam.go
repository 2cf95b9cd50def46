package main

import (
	"github.com/lakemeta/lake/iam"
	"github.com/spf13/cobra"
)

type iamPolicyOptions struct {
	p     iam.Params
	table string
}

func newIAMCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "iam",
		Short: "Least-privilege IAM policies for each role that runs lake on AWS",
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newIAMPolicyCommand(g))
	return cmd
}

func newIAMPolicyCommand(g *globalOptions) *cobra.Command {
	var o iamPolicyOptions
	cmd := &cobra.Command{
		Use:   "policy ROLE",
		Short: "Print the IAM policy document (JSON) of ROLE for --store in its current state",
		Long: `Print the least-privilege IAM policy document of ROLE for the store of --store,
with exact ARNs (tables, indexes, streams, the bucket and prefixes) in the
account and region of the AWS configuration or of --account and --region.

Roles:
  node                 lake serve: the metastore's reads and writes in the store's
                       migration state (and, in state v1, what dual mode adds),
                       the datastore's table or prefix
  reader               lake get, ls and the data reads
  migrator             lake dynamo-migrate: both tables, their stream, TTL
  sync-worker          lake data sync/run/status/get/put in --namespace N only
                       (DynamoDB: dynamodb:LeadingKeys; S3: the namespace's prefix)
  reshape              lake reshape on --table T (its index, sweep, rewrite)
  deny-legacy-writes   a Deny of writes to the v1 table, for legacy writers' roles
                       before finalize (the only way to close the residual window)

For a dynamodb:// store the migration state is read from the store (a read,
nothing written); --state names it instead (to prepare a policy ahead of a
step). See docs/iam.md for each role, its statements and how to apply them.

Exit codes: 0 printed, 1 the store's state could not be read (a missing
table: run lake init, or name --state), 2 bad role or flags.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.p.ReshapeTable = o.table
			if args[0] == iam.RoleSyncWorker && o.p.Namespace == "" {
				o.p.Namespace = "default"
			}
			store := g.store
			if args[0] == iam.RoleReshape && !cmd.Flags().Changed("store") && o.table != "" {
				store = "" // the reshaped table is any table, not lake's store
			}
			p, err := iam.ForStore(cmd.Context(), store, o.p)
			if err != nil {
				return err
			}
			doc, err := iam.Generate(args[0], p)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(doc.JSON())
			return err
		},
	}
	cmd.Flags().StringVar(&o.p.Namespace, "namespace", "", "sync-worker: the namespace it syncs (default: the root, \"default\")")
	cmd.Flags().StringVar(&o.table, "table", "", "reshape: the table it reshapes")
	cmd.Flags().StringVar(&o.p.Account, "account", "", "AWS account id (default AWS_ACCOUNT_ID, else the configured credentials')")
	cmd.Flags().StringVar(&o.p.Region, "region", "", "AWS region (default the store URL's ?region=, else AWS_REGION or the profile's)")
	cmd.Flags().StringVar(&o.p.Partition, "partition", "aws", "AWS partition of the ARNs (aws, aws-cn, aws-us-gov)")
	cmd.Flags().StringVar(&o.p.State, "state", "", "migration state of a dynamodb:// store (default: read from the store): v1, dual, backfill, v2-authoritative, v2-only, standalone-v2")
	return cmd
}
