package datastore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// PartitionLister is the optional ability of a driver that keeps each
// partition's files together (DynamoDB: one item collection each), so that
// one partition's files are read without reading the partition registry.
type PartitionLister interface {
	// ListPartition returns the live files of partition whose paths start
	// with prefix ("" for all), after the driver's own position pos (nil:
	// from the start), at most limit; next is nil when the listing is
	// complete. The Store has checked that partition is valid and prefix
	// is "" or starts with PartitionPrefix(partition).
	ListPartition(ctx context.Context, partition, prefix string, limit int, pos []byte) (files []Info, next []byte, err error)
}

// ListPartitionAll returns the live files of partition alone whose paths
// start with prefix ("" for the whole partition; else a prefix that starts
// with PartitionPrefix(partition)), sorted. A listing of a model's
// directory may hold other models' files under LayoutModels (nested
// partitions, layout.go); this is what wants one model's files: the
// catalog, the lifecycle, a pull's resync. On a PartitionLister (DynamoDB)
// it reads the partition's own items only; otherwise it lists the prefix
// and keeps the partition's files.
func (s *Store) ListPartitionAll(ctx context.Context, partition, prefix string) ([]Info, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if err := ValidatePartition(partition); err != nil {
		return nil, err
	}
	if prefix != "" && !strings.HasPrefix(prefix, PartitionPrefix(partition)) {
		return nil, fmt.Errorf("%w: prefix %q is not under partition %q's %q", metastore.ErrInvalidArgument, prefix, partition, PartitionPrefix(partition))
	}
	var all []Info
	if pl, ok := s.d.(PartitionLister); ok {
		var pos []byte
		for {
			files, next, err := pl.ListPartition(ctx, partition, prefix, 1000, pos)
			if err != nil {
				return nil, err
			}
			all = append(all, files...)
			if next == nil {
				break
			}
			if pos != nil && bytes.Equal(next, pos) {
				return nil, fmt.Errorf("lake: listing partition %s made no progress at %q", partition, next)
			}
			pos = next
		}
	} else {
		if prefix == "" {
			prefix = PartitionPrefix(partition)
		}
		listed, err := s.ListAll(ctx, prefix)
		if err != nil {
			return nil, err
		}
		all = listed
	}
	out := all[:0]
	for _, f := range all {
		if s.Partition(f.Path) == partition {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Path, b.Path) })
	return slices.CompactFunc(out, func(a, b Info) bool { return a.Path == b.Path }), nil
}
