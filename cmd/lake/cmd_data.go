package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/spf13/cobra"
)

func newDataCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "The file-tree datastore: whole files by path, and a change feed per model",
		Long: `The datastore keeps a tree of whole files, each with metadata, addressed by path
(data/TYPE/ID/NAME/VERSION/raw for a model's data), in the store of --store:
buckets of its own in the bolt file (made by ` + "`lake init`" + ` or ` + "`lake data init`" + `), the DynamoDB
table TABLE_files for dynamodb://TABLE (created by ` + "`lake data init`" + `), or
objects under PREFIX/ in the bucket of s3://BUCKET/PREFIX (docs/s3.md).

Every change gets a position in its partition's feed (the model TYPE/ID for
data/TYPE/ID/…, else the path's first segment), assigned by the store, so
` + "`lake data changes PARTITION --after POS`" + ` returns exactly what changed since POS.

--namespace N addresses namespace N: its own files, feeds, index and lock
N/sync (default "default", the datastore's root). A model TYPE/ID is defined
by data/TYPE/ID/model.yaml; ` + "`lake data catalog`" + ` lists every model of every
namespace, ` + "`lake data model rm`" + ` orphans one, ` + "`lake data prune`" + ` and the
namespace's lifecycle (` + "`lake data lifecycle`" + `) expire what is done.
See docs/datastore.md and docs/lifecycle.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&g.namespace, "namespace", datastore.DefaultNamespace,
		"the namespace: its own files, feeds, index and lock (NAMESPACE/sync); \"default\" is the datastore's root")
	cmd.AddCommand(newDataInitCommand(g), newDataPutCommand(g), newDataGetCommand(g), newDataStatCommand(g),
		newDataLsCommand(g), newDataRmCommand(g), newDataChangesCommand(g), newDataPartitionsCommand(g), newDataReclaimCommand(g),
		newDataSyncCommand(g), newDataRunCommand(g), newDataStatusCommand(g), newDataLockCommand(g),
		newDataNamespacesCommand(g), newDataLifecycleCommand(g), newDataModelCommand(g), newDataPruneCommand(g), newDataCatalogCommand(g),
		newDataCheckCommand(g))
	return cmd
}

// withNamespace opens the datastore of --store and runs fn with the Store of
// --namespace.
func (g *globalOptions) withNamespace(cmd *cobra.Command, fn func(ns *datastore.Store) error) error {
	if err := datastore.ValidateNamespace(g.namespace); err != nil {
		return usageError{lakeerr.Wrap(err, "--namespace")}
	}
	return g.withData(cmd, false, func(s *datastore.Store) error {
		ns, err := s.Namespace(g.namespace)
		if err != nil {
			return err
		}
		return fn(ns)
	})
}

// withData opens the datastore of --store, runs fn with it, and closes it.
func (g *globalOptions) withData(cmd *cobra.Command, create bool, fn func(*datastore.Store) error) error {
	return g.openData(cmd, &dsurl.Options{Create: create}, fn)
}

// withDataReader is withData for a command that only reads: a bolt file is
// opened read-only (a shared lock) and keeps every byte.
func (g *globalOptions) withDataReader(cmd *cobra.Command, fn func(*datastore.Store) error) error {
	return g.openData(cmd, &dsurl.Options{ReadOnly: true}, fn)
}

// withNamespaceReader is withNamespace for a command that only reads.
func (g *globalOptions) withNamespaceReader(cmd *cobra.Command, fn func(ns *datastore.Store) error) error {
	if err := datastore.ValidateNamespace(g.namespace); err != nil {
		return usageError{lakeerr.Wrap(err, "--namespace")}
	}
	return g.withDataReader(cmd, func(s *datastore.Store) error {
		ns, err := s.Namespace(g.namespace)
		if err != nil {
			return err
		}
		return fn(ns)
	})
}

func (g *globalOptions) openData(cmd *cobra.Command, opts *dsurl.Options, fn func(*datastore.Store) error) error {
	s, err := dsurl.Open(cmd.Context(), g.store, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

func newDataInitCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the datastore of the store URL (idempotent)",
		Long: `Create the datastore: the bolt file and its datastore buckets, or the DynamoDB
table TABLE_files (PAY_PER_REQUEST, with its local index bypos), waiting until
it is ACTIVE, or the S3 bucket of s3://BUCKET/PREFIX if it does not exist.
Running it again changes nothing.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withData(cmd, true, func(*datastore.Store) error {
				fmt.Fprintf(cmd.OutOrStdout(), "initialized datastore of %s\n", g.store)
				return nil
			})
		},
	}
}

// infoJSON is how the CLI prints a file's state. Meta is base64.
type infoJSON struct {
	Path      string `json:"path"`
	Partition string `json:"partition"`
	Pos       uint64 `json:"pos"`
	Deleted   bool   `json:"deleted,omitempty"`
	Version   string `json:"version,omitempty"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256,omitempty"`
	Meta      string `json:"meta,omitempty"`
	Time      string `json:"time"`
}

func printFileInfo(w io.Writer, i datastore.Info) error {
	return json.NewEncoder(w).Encode(infoJSON{Path: i.Path, Partition: i.Partition, Pos: i.Pos, Deleted: i.Deleted,
		Version: i.Version, Size: i.Size, SHA256: i.SHA256, Meta: base64.StdEncoding.EncodeToString(i.Meta),
		Time: i.Time.UTC().Format(time.RFC3339Nano)})
}

func newDataPutCommand(g *globalOptions) *cobra.Command {
	var metaFile string
	cmd := &cobra.Command{
		Use:   "put PATH FILE|-",
		Short: "Write FILE (or stdin) as the new version of PATH",
		Long: `Write the content of FILE ("-" reads stdin) as the new version of PATH, whole:
chunks first, metadata last, so readers see the old version or the new one.
--meta FILE sets the file's metadata (at most 64 KiB, opaque bytes). Prints the
change as one JSON line (its position, version, size, SHA-256).`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var meta []byte
			if metaFile != "" {
				b, err := os.ReadFile(metaFile)
				if err != nil {
					return usageError{lakeerr.Wrap(err, "--meta")}
				}
				meta = b
			}
			r := cmd.InOrStdin()
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return usagef("%v", err)
				}
				defer f.Close()
				r = f
			}
			return g.withNamespace(cmd, func(s *datastore.Store) error {
				info, err := s.Put(cmd.Context(), args[0], r, meta)
				if err != nil {
					return err
				}
				return printFileInfo(cmd.OutOrStdout(), info)
			})
		},
	}
	cmd.Flags().StringVar(&metaFile, "meta", "", "file holding the metadata")
	return cmd
}

func newDataGetCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "get PATH",
		Short: "Print the content of PATH (strongly consistent, one version whole)",
		Long: `Print the content of PATH to stdout, byte for byte, streamed one 256 KiB chunk at a
time (memory does not grow with the file). A missing or deleted path exits with
code 3. A file that does not match its size and SHA-256 exits with code 1 and
"damaged file" naming the path; what was printed before is then incomplete (its
last chunk is never printed) and must be discarded.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withNamespaceReader(cmd, func(s *datastore.Store) error {
				_, err := s.GetTo(cmd.Context(), args[0], cmd.OutOrStdout())
				return err
			})
		},
	}
}

func newDataStatCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "stat PATH",
		Short: "Print the state of PATH as one JSON line",
		Long: `Print PATH's latest version as one JSON line: path, partition, pos, version, size,
sha256, meta (base64), time. A missing or deleted path exits with code 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withNamespaceReader(cmd, func(s *datastore.Store) error {
				info, err := s.Stat(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printFileInfo(cmd.OutOrStdout(), info)
			})
		},
	}
}

func newDataLsCommand(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List the live files under PREFIX, sorted",
		Long: `List the paths of the live files under PREFIX (all without it), one per line,
sorted. --json prints each file's state as one JSON line instead.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			return g.withNamespaceReader(cmd, func(s *datastore.Store) error {
				files, err := s.ListAll(cmd.Context(), prefix)
				if err != nil {
					return err
				}
				for _, f := range files {
					if asJSON {
						if err := printFileInfo(cmd.OutOrStdout(), f); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintln(cmd.OutOrStdout(), lsLine(f.Path))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per file")
	return cmd
}

// lsLine is how `data ls` prints a path: as is, or Go-quoted if it holds a
// control character (lake refuses such paths, but a foreign writer can
// store one), so that one line is always one path (issue 26).
func lsLine(p string) string {
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(p)
	}
	return p
}

func newDataRmCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "rm PATH",
		Short: "Delete PATH, leaving a tombstone that pullers see",
		Long: `Delete PATH. Its partition's feed gets a tombstone at the next position, which
pullers see. A missing or already deleted path exits with code 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withNamespace(cmd, func(s *datastore.Store) error {
				info, err := s.Delete(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printFileInfo(cmd.OutOrStdout(), info)
			})
		},
	}
}

func newDataChangesCommand(g *globalOptions) *cobra.Command {
	var after uint64
	var limit int
	cmd := &cobra.Command{
		Use:   "changes PARTITION",
		Short: "Print the changes of PARTITION after a position",
		Long: `Print the changes of PARTITION (a model TYPE/ID, or a top-level directory) whose
positions are greater than --after (0: from the start), in position order, one
JSON line each (the path's latest state; "deleted":true for a tombstone), at
most --limit, then a last line {"upTo":N}: every change at or below N has been
printed; pass N as --after next time. A position below the tombstone horizon
fails ("resync the partition", exit 1).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withNamespaceReader(cmd, func(s *datastore.Store) error {
				changes, upTo, err := s.Changes(cmd.Context(), args[0], after, limit)
				if err != nil {
					return err
				}
				for _, c := range changes {
					if err := printFileInfo(cmd.OutOrStdout(), c); err != nil {
						return err
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "{\"upTo\":%d}\n", upTo)
				return nil
			})
		},
	}
	cmd.Flags().Uint64Var(&after, "after", 0, "the position already seen")
	cmd.Flags().IntVar(&limit, "limit", 1000, "most changes to print (1 to 10000)")
	return cmd
}

func newDataPartitionsCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "partitions",
		Short: "List the partitions that have had a change, with their heads",
		Long: `List every partition that has had a change, one per line: its name, the position
of its latest change (head) and its tombstone floor, tab-separated.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withNamespaceReader(cmd, func(s *datastore.Store) error {
				parts, err := s.Partitions(cmd.Context())
				if err != nil {
					return err
				}
				for _, p := range parts {
					h, err := s.Head(cmd.Context(), p)
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", p, strconv.FormatUint(h.Seq, 10), strconv.FormatUint(h.Floor, 10))
				}
				return nil
			})
		},
	}
}

func newDataReclaimCommand(g *globalOptions) *cobra.Command {
	var o datastore.ReclaimOptions
	var catalog bool
	cmd := &cobra.Command{
		Use:   "reclaim",
		Short: "Delete expired uploads, replaced versions' chunks and old tombstones",
		Long: `Delete the chunks of uploads that never committed (older than --upload-grace) and
of versions replaced longer ago than --grace, and purge tombstones older than
--horizon from the feed (raising their partitions' floors: a puller behind a
floor must resync). --catalog reclaims the catalog scope instead. Prints what
it removed.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withNamespace(cmd, func(s *datastore.Store) error {
				if catalog {
					// The catalog scope is a namespace of its own,
					// reclaimed like one.
					cat, err := s.CatalogStore()
					if err != nil {
						return err
					}
					s = cat
				}
				st, err := s.Reclaim(cmd.Context(), o)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "uploads %d, versions %d, chunks %d, tombstones %d\n", st.Uploads, st.Versions, st.Chunks, st.Tombstones)
				if st.LiveKept > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "kept %d versions queued as replaced that their paths still hold (lake data check reports them)\n", st.LiveKept)
				}
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&o.Grace, "grace", datastore.DefaultGrace, "how long a replaced version's chunks stay")
	cmd.Flags().DurationVar(&o.UploadGrace, "upload-grace", datastore.DefaultGrace, "how long an upload may stay uncommitted")
	cmd.Flags().DurationVar(&o.Horizon, "horizon", datastore.DefaultHorizon, "how long a tombstone stays in the feed")
	cmd.Flags().BoolVar(&catalog, "catalog", false, "reclaim the catalog scope (every namespace's catalog rows) instead of --namespace")
	return cmd
}
