package datastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// GuardedDropper is an optional ability of a Driver (DynamoDB, S3):
// dropping a partition only while one of its paths is deleted or absent,
// judged by the drop's own reads of the partition (issue 31: the lifecycle
// drops a model only while its definition is deleted, and a read of the
// definition before the drop was a Stat's requests more a drop). A driver
// that cannot answer a call returns an error matching
// errors.ErrUnsupported, having done nothing, and DropPartitionIfDeleted
// reads the path first instead.
type GuardedDropper interface {
	// DropPartitionIfDeleted is DropPartition, unless guard (a path of
	// partition) holds a live file when the drop reads the partition,
	// before it removes anything: then it removes nothing and dropped is
	// false.
	DropPartitionIfDeleted(ctx context.Context, fence *Fence, partition, guard string, now time.Time) (st DropStats, dropped bool, err error)
}

// DropPartitionIfDeleted removes everything partition holds, as
// DropPartition does, unless guard (a path of partition: a model's
// definition) holds a live file: then it removes nothing and dropped is
// false. Where the driver can (GuardedDropper), the drop's own read of the
// partition says; elsewhere a Stat of guard before the drop does.
func (s *Store) DropPartitionIfDeleted(ctx context.Context, fence *Fence, partition, guard string) (st DropStats, dropped bool, err error) {
	if err := s.checkDrop(fence, partition); err != nil {
		return DropStats{}, false, err
	}
	if err := ValidatePath(guard); err != nil {
		return DropStats{}, false, err
	}
	if p := s.Partition(guard); p != partition {
		return DropStats{}, false, fmt.Errorf("%w: path %q is in partition %q, not %q", metastore.ErrInvalidArgument, guard, p, partition)
	}
	if gd, ok := s.d.(GuardedDropper); ok {
		st, dropped, err := gd.DropPartitionIfDeleted(ctx, fence, partition, guard, s.now())
		if !errors.Is(err, errors.ErrUnsupported) {
			return st, dropped, err
		}
	}
	got, err := s.StatMany(ctx, []string{guard})
	if err != nil {
		return DropStats{}, false, err
	}
	if in, ok := got[guard]; ok && !in.Deleted {
		return DropStats{}, false, nil
	}
	st, err = s.DropPartition(ctx, fence, partition)
	return st, err == nil, err
}
