package s3fs

import (
	"context"
	"slices"
	"strings"
)

// A directory claim (claims.go) registers the partition it is made in, so
// that the next claim and every later put there read it from the head and
// a takeover fences it. A partition that holds only claims (typically
// "data", claimed by every model below it, with no file of its own) holds
// no file: Partitions and ChangedPartitions do not name it, as on the other
// drivers, whose claims are not partitions. A takeover's fence entries and
// a reclaim's compaction still reach it (listPartitions with all).

// listPartitions returns the partitions with a head, sorted; without all,
// those that hold only claims are left out. Only the heads that can hold
// claims are read for that (claimHost): normally "data" alone, one GET.
func (d *Driver) listPartitions(ctx context.Context, all bool) ([]string, error) {
	listed, claimsOnly, err := d.partitionsAndClaims(ctx, !all)
	if all {
		return append(listed, claimsOnly...), err
	}
	return listed, err
}

// partitionsAndClaims returns the partitions with a head, sorted; with
// sift, those that hold only claims are apart, in claimsOnly.
func (d *Driver) partitionsAndClaims(ctx context.Context, sift bool) (listed, claimsOnly []string, err error) {
	keys, err := d.c.listAll(ctx, d.prefix+"h/", "")
	if err != nil {
		return nil, nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		p, ok := d.headPartition(k.key)
		if !ok {
			continue // not a head: lake data check reports it
		}
		out = append(out, p)
	}
	slices.Sort(out)
	if !sift {
		return out, nil, nil
	}
	listed = out[:0:0]
	for _, p := range out {
		if claimHost(p, out) {
			h, _, ok, err := d.readHead(ctx, p)
			if err != nil {
				return nil, nil, err
			}
			if ok && h.ClaimsOnly {
				claimsOnly = append(claimsOnly, p)
				continue
			}
		}
		listed = append(listed, p)
	}
	return listed, claimsOnly, nil
}

// claimHost reports whether p, among the partitions parts, can hold a
// claim: a claim is made in the partition of a directory above a model's
// files (Layout.ClaimParts), which is a partition of one segment (that of
// data/'s shallow paths) or another model whose name is a prefix of a
// partition's.
func claimHost(p string, parts []string) bool {
	if !strings.Contains(p, "/") {
		return true
	}
	i, _ := slices.BinarySearch(parts, p+"/")
	return i < len(parts) && strings.HasPrefix(parts[i], p+"/")
}

// claimsOnlyPartitions returns the partitions left out of Partitions for
// holding only claims.
func (d *Driver) claimsOnlyPartitions(ctx context.Context) ([]string, error) {
	_, out, err := d.partitionsAndClaims(ctx, true)
	return out, err
}

// PositionsSparse implements dstest.SparsePositions: a fence entry, a
// directory claim and a guard each take a position of a partition's log
// (claims.go).
func (d *Driver) PositionsSparse() bool { return true }
