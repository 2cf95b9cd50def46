package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lakemeta/lake/metastore"
	"github.com/spf13/cobra"
)

type lsOptions struct {
	limit  int
	cursor string
	json   bool
}

func newLsCommand(g *globalOptions) *cobra.Command {
	var o lsOptions
	cmd := &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List the keys under PREFIX, sorted",
		Long: `List the keys that start with PREFIX (all keys when PREFIX is omitted), one per
line, sorted. --json prints one object per line, {"key":..., "value":...} with
the value in base64, so binary values survive.

With --limit N, one page of at most N items is listed (sorted within the page)
and, when more remain, the cursor to continue: on stderr as "cursor: C", or with
--json as a last line {"cursor":"C"}. Pass it back with --cursor C and the same
PREFIX. A page may be empty while a cursor is still returned; keep going until
none is.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			if o.cursor != "" && o.limit == 0 {
				return usagef("--cursor needs --limit")
			}
			if cmd.Flags().Changed("limit") && (o.limit < 1 || o.limit > metastore.MaxListLimit) {
				return usagef("--limit must be 1 to %d, got %d", metastore.MaxListLimit, o.limit)
			}
			s, err := g.openReader(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			var items []metastore.Item
			var next string
			if o.limit == 0 {
				items, err = s.ListAll(cmd.Context(), prefix)
			} else {
				var page metastore.Page
				page, err = s.List(cmd.Context(), prefix, o.limit, o.cursor)
				items, next = page.Items, page.Cursor
				slices.SortFunc(items, func(a, b metastore.Item) int { return strings.Compare(a.Key, b.Key) })
			}
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), items, next)
		},
	}
	cmd.Flags().IntVar(&o.limit, "limit", 0, "list one page of at most N items")
	cmd.Flags().StringVar(&o.cursor, "cursor", "", "continue a paged listing from this cursor")
	cmd.Flags().BoolVar(&o.json, "json", false, "one JSON object per line with the key and the base64 value")
	return cmd
}

type lsItem struct {
	Key   string `json:"key"`
	Value []byte `json:"value"` // encoding/json writes []byte as base64
}

func (o *lsOptions) print(stdout, stderr io.Writer, items []metastore.Item, next string) error {
	if o.json {
		enc := json.NewEncoder(stdout)
		for _, it := range items {
			if err := enc.Encode(lsItem{Key: it.Key, Value: it.Value}); err != nil {
				return err
			}
		}
		if next != "" {
			return enc.Encode(map[string]string{"cursor": next})
		}
		return nil
	}
	for _, it := range items {
		if _, err := fmt.Fprintln(stdout, it.Key); err != nil {
			return err
		}
	}
	if next != "" {
		fmt.Fprintf(stderr, "cursor: %s\n", next)
	}
	return nil
}
