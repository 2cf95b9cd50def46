package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	store string
	// namespace is `lake data`'s --namespace.
	namespace string
}

func newRootCommand() *cobra.Command {
	var g globalOptions
	root := &cobra.Command{
		Use:   "lake",
		Short: "lake keeps a data lake's metadata in a store that stays cheap to read by prefix",
		Long: `lake keeps a data lake's metadata (catalog entries, append operations, manifests,
leases) in a key-value store with strongly consistent reads, conditional writes and
paged prefix listing; beside it, fenced lease locks (lake lock), a file-tree datastore
with a change feed (lake data), a live v1 -> v2 migration of its DynamoDB table
(lake dynamo-migrate) and online reshaping of any DynamoDB table (lake reshape).
The store is named by a URL:

  bolt://PATH       an embedded bbolt file (default bolt://./lake.db)
  dynamodb://TABLE  Amazon DynamoDB (?layout=auto|v1|v2, ?endpoint=URL, ?region=NAME;
                    TABLE from LAKE_DYNAMODB_TABLE when empty)
  http://HOST:PORT  a metadata node (lake serve); also https://, with an optional
                    path prefix; token from LAKE_TOKEN or the file LAKE_TOKEN_FILE
  s3://BUCKET/PREFIX  objects under PREFIX/ in an S3 bucket: lake data and lake lock
                    only (the key-value commands refuse it, exit 2); AWS_ENDPOINT_URL_S3
                    names an S3-compatible server

Exit codes: 0 ok, 1 error, 2 usage or invalid input, 3 not found, 4 conflict,
5 writes paused (retry later), 6 refused (the current state forbids it),
7 diverged copy during a migration (run lake dynamo-migrate repair),
8 a lock wait ran out, 9 a sync that synced all but the paths it named,
10 a sync whose commit stood but a step after it failed (run sync again).`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	defStore := os.Getenv("LAKE_STORE")
	if defStore == "" {
		defStore = storeurl.Default
	}
	root.PersistentFlags().StringVar(&g.store, "store", defStore, "store URL (env LAKE_STORE)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newInitCommand(&g),
		newCheckCommand(&g),
		newGetCommand(&g),
		newPutCommand(&g),
		newCASCommand(&g),
		newRmCommand(&g),
		newLsCommand(&g),
		newBenchCommand(&g),
		newIAMCommand(&g),
		newServeCommand(&g),
		newMigrateCommand(&g),
		newLockCommand(&g),
		newReshapeCommand(&g),
		newDataCommand(&g),
	)
	// Unknown subcommands and bad argument counts are usage errors too.
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q; run `lake --help`", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

// subcommandsOnly is the Args of a command that only groups subcommands:
// an argument is a mistyped subcommand, and is named as such.
func subcommandsOnly(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q; run `%s --help`", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

// exactArgs is cobra.ExactArgs whose error is a usage error naming the
// arguments the command takes.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d; usage: %s", cmd.Name(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("%s takes %d to %d arguments, got %d; usage: %s", cmd.Name(), lo, hi, len(args), cmd.UseLine())
		}
		return nil
	}
}

// openStore opens the store named by --store.
func (g *globalOptions) openStore(ctx context.Context) (*metastore.Store, error) {
	return storeurl.Open(ctx, g.store, nil)
}

// openReader opens the store named by --store for a command that only
// reads: a bolt file is opened read-only and left byte for byte as it was.
func (g *globalOptions) openReader(ctx context.Context) (*metastore.Store, error) {
	return storeurl.Open(ctx, g.store, &storeurl.Options{ReadOnly: true})
}

// withStore opens the store of --store, runs fn with it, and closes it.
func (g *globalOptions) withStore(ctx context.Context, fn func(*metastore.Store) error) error {
	s, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

// readValue resolves a value given as an argument ("-" reads stdin) or, when
// file is set, read from that file. It never truncates: one byte over the
// limit is read so that the store refuses it with a clear error.
func readValue(arg, file string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	switch {
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return nil, usagef("%v", err)
		}
		defer f.Close()
		// A directory opens fine and fails only when read: refuse it as
		// the usage error it is.
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, usagef("%s is a directory, not a file holding a value", file)
		}
		r = f
	case arg == "-":
		r = stdin
	default:
		return []byte(arg), nil
	}
	b, err := io.ReadAll(io.LimitReader(r, metastore.MaxValueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("lake: read value: %w", err)
	}
	if len(b) > metastore.MaxValueBytes {
		// The message states the value's real size, not the limit plus the
		// one byte read to detect it: the rest is counted (up to a bound,
		// so that an endless stdin cannot hold the command).
		n, err := io.Copy(io.Discard, io.LimitReader(r, maxCountedValue))
		if err != nil {
			return nil, fmt.Errorf("lake: read value: %w", err)
		}
		size := fmt.Sprintf("%d bytes", int64(len(b))+n)
		if n == maxCountedValue {
			size = fmt.Sprintf("more than %d bytes", int64(len(b))+n)
		}
		return nil, fmt.Errorf("%w: value is %s, the limit is %d (350 KiB)", metastore.ErrInvalidValue, size, metastore.MaxValueBytes)
	}
	return b, metastore.ValidateValue(b)
}

// maxCountedValue bounds how much of an oversized value readValue reads to
// report its size.
const maxCountedValue = 1 << 30
