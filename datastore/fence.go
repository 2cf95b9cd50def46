package datastore

import "context"

// Fencer is the optional ability of a driver whose Commit cannot check its
// fence in the same atomic write as its entries (S3 writes one object at a
// time, so a holder that checked its lock record may pause before its
// write and land it after a takeover). Such a driver closes the gap with
// fence entries: a new holder writes one into each partition's feed, at the
// feed's next position, before it reads; from then on no commit under an
// older token of the same lock lands in that feed, and every one that
// landed before is ordered before what the new holder reads.
//
// Drivers that fence inside the commit's atomic write (bolt, DynamoDB, a
// node over either) do not implement it: for them a takeover needs nothing.
type Fencer interface {
	// FencePartitions appends a fence entry for fence to the feed of each
	// of partitions that exists (a partition without a head is skipped: a
	// stale holder registers a partition before it checks its fence, so a
	// partition the caller did not see was registered after the takeover
	// and its first position is raced for like any other). It fails with
	// a fence conflict if fence.Key does not hold fence.Token.
	FencePartitions(ctx context.Context, fence Fence, partitions []string) error
}

// FenceTakeover is what a new holder of a namespace's lock calls before it
// reads, when its acquisition broke another holder (a takeover, or a
// forced release: lock.Lease.TookOver). On a Fencer driver it fences every
// registered partition of s's namespace and s's namespace's partition of
// the catalog scope, so that a stale holder's commit either landed before
// the fence (and the new holder reads it) or is refused; elsewhere it does
// nothing. It returns the number of partitions fenced.
func (s *Store) FenceTakeover(ctx context.Context, fence *Fence) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	f, ok := s.d.(Fencer)
	if fence == nil || !ok {
		return 0, nil
	}
	parts, err := s.d.Partitions(ctx)
	if err != nil {
		return 0, err
	}
	if err := f.FencePartitions(ctx, *fence, parts); err != nil {
		return 0, err
	}
	cat, err := s.CatalogStore()
	if err != nil {
		return 0, err
	}
	if cf, ok := cat.d.(Fencer); ok {
		if err := cf.FencePartitions(ctx, *fence, []string{s.NamespaceName()}); err != nil {
			return 0, err
		}
	}
	return len(parts) + 1, nil
}
