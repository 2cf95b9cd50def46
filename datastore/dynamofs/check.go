package dynamofs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

var _ datastore.Checker = (*Driver)(nil)

// maxCheckPages bounds the pages of one Scan or Query of the check, so
// that a table that keeps answering with a LastEvaluatedKey cannot hold it
// forever (a thousand pages of 1 MB is a gigabyte of keys).
const maxCheckPages = 1000

// Check implements datastore.Checker (lake data check) for d's namespace.
// A commit is one TransactWriteItems here, so the table holds no
// half-applied commit; what it can hold is what another client of the
// table left. Check reads every partition the registry names and every one
// that holds file items (a Scan of the namespace's file item keys), then
// each partition's head and files (a Query), and reports:
//
//   - a file item without a position, a live one without a version, one
//     whose path is of another partition, two paths at one position;
//   - a partition that holds files but is not registered (Partitions, List
//     and the catalog miss it): --repair registers it;
//   - a head missing, or behind the partition's last position (pulls stop
//     short of it), or whose index position is beyond its shard's counter
//     (ChangedPartitions misses it);
//   - with Chunks, a live file whose chunks are missing.
//
// Only the registry is repaired yet; the other problems are reported
// without a fix.
func (d *Driver) Check(ctx context.Context, o datastore.CheckOptions) (datastore.CheckReport, error) {
	var rep datastore.CheckReport
	if o.Repair && o.Fence != nil {
		cur, err := d.GetRecord(ctx, o.Fence.Key)
		if err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return rep, err
		}
		if err != nil || string(cur) != string(o.Fence.Token) {
			return rep, metastore.Conflict(o.Fence.Key, datastore.FenceReason)
		}
	}
	name := func(pk, sk string) string { return fmt.Sprintf("dynamodb:%s/%s/%s", d.table, pk, sk) }
	add := func(p datastore.Problem) { rep.Problems = append(rep.Problems, p) }
	registered, err := d.Partitions(ctx)
	if err != nil {
		return rep, err
	}
	holding, err := d.filePartitions(ctx)
	if err != nil {
		return rep, err
	}
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(registered), holding...))))
	rep.Partitions = len(all)
	counters := map[string]uint64{}
	var keys []item
	for _, sh := range shardNames() {
		keys = append(keys, d.counterKey(sh))
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		return rep, err
	}
	for _, it := range got {
		counters[strings.TrimPrefix(strings.TrimPrefix(getS(it, attrPK), d.pfx), "n#")] = getN(it, "n")
	}
	for _, part := range all {
		files, err := d.partitionFiles(ctx, part)
		if err != nil {
			return rep, err
		}
		rep.Objects += len(files) + 1
		var maxPos uint64
		at := map[uint64]string{}
		for _, f := range files {
			switch {
			case f.Pos == 0:
				add(datastore.Problem{Object: name(d.filePK(part), f.Path), What: "a file item without a position"})
			case !f.Deleted && f.Version == "":
				add(datastore.Problem{Object: name(d.filePK(part), f.Path), What: "a live file item without a version"})
			case d.partition(f.Path) != part || datastore.ValidatePath(f.Path) != nil:
				add(datastore.Problem{Object: name(d.filePK(part), f.Path), What: "a file item whose path is not one of partition " + part})
			case at[f.Pos] != "":
				add(datastore.Problem{Object: name(d.filePK(part), f.Path), What: fmt.Sprintf("at position %d, like %q", f.Pos, at[f.Pos])})
			default:
				at[f.Pos] = f.Path
				maxPos = max(maxPos, f.Pos)
				if o.Chunks && !f.Deleted {
					n, err := d.countChunks(ctx, f.Version)
					if err != nil {
						return rep, err
					}
					if n < f.Chunks {
						add(datastore.Problem{Object: name(d.filePK(part), f.Path), What: fmt.Sprintf("version %s has %d of its %d chunks: its content is lost (put the file again)", f.Version, n, f.Chunks)})
					}
				}
			}
		}
		if len(files) > 0 && !slices.Contains(registered, part) {
			p := datastore.Problem{Object: name(d.registryKeyPK(part), "r"), What: "missing: partition " + part + " holds files but is not registered", Fix: "register it"}
			if o.Repair {
				d.registered.Delete(d.regKey(part)) // the process's cache says nothing of the table
				if err := d.register(ctx, part); err != nil {
					return rep, err
				}
				p.Repaired = true
			}
			add(p)
		}
		hk := d.headKey(part)
		h, err := d.getItem(ctx, hk)
		if err != nil {
			return rep, err
		}
		hname := name(getS(hk, attrPK), part)
		switch {
		case h == nil && len(files) > 0:
			add(datastore.Problem{Object: hname, What: fmt.Sprintf("missing: partition %q holds changes up to %d but has no head", part, maxPos)})
		case h == nil:
		case getN(h, "seq") < maxPos:
			add(datastore.Problem{Object: hname, What: fmt.Sprintf("head %d is behind the partition's last change at %d", getN(h, "seq"), maxPos)})
		case getN(h, attrPos) > counters[shard(part)]:
			add(datastore.Problem{Object: hname, What: fmt.Sprintf("index position %d is beyond shard %s's counter %d (ChangedPartitions misses it)", getN(h, attrPos), shard(part), counters[shard(part)])})
		}
	}
	if err := d.checkCommits(ctx, o, add); err != nil { // whole.go
		return rep, err
	}
	return rep, nil
}

func (d *Driver) registryKeyPK(part string) string { return getS(d.registryKey(shard(part)), attrPK) }

// filePartitions scans the namespace's file item keys for the partitions
// that hold files.
func (d *Driver) filePartitions(ctx context.Context) ([]string, error) {
	pre := d.pk("f#")
	e, err := build(expression.NewBuilder().WithFilter(expression.Name(attrPK).BeginsWith(pre)).
		WithProjection(expression.NamesList(expression.Name(attrPK))))
	if err != nil {
		return nil, err
	}
	in := &dynamodb.ScanInput{TableName: &d.table, FilterExpression: e.Filter(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true)}
	seen := map[string]bool{}
	for range maxCheckPages {
		var out *dynamodb.ScanOutput
		err := d.retry(ctx, func() error {
			var err error
			out, err = d.api.Scan(ctx, in)
			return err
		})
		if err != nil {
			return nil, d.classify(err, "")
		}
		for _, it := range out.Items {
			seen[strings.TrimPrefix(getS(it, attrPK), pre)] = true
		}
		if out.LastEvaluatedKey == nil {
			var parts []string
			for p := range seen {
				parts = append(parts, p)
			}
			slices.Sort(parts)
			return parts, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return nil, fmt.Errorf("lake: dynamodb check: the scan of %s did not end within %d pages", d.table, maxCheckPages)
}

// partitionFiles reads every file item of part.
func (d *Driver) partitionFiles(ctx context.Context, part string) ([]datastore.Info, error) {
	e, err := build(expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(expression.Value(d.filePK(part)))))
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	var out []datastore.Info
	for range maxCheckPages {
		page, err := d.query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			out = append(out, fileInfo(it))
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return nil, fmt.Errorf("lake: dynamodb check: the files of partition %q did not end within %d pages", part, maxCheckPages)
}

// countChunks counts the chunk items of version.
func (d *Driver) countChunks(ctx context.Context, version string) (int, error) {
	e, err := build(expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(expression.Value(d.chunkPK(version)))))
	if err != nil {
		return 0, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(),
		ExpressionAttributeValues: e.Values(), Select: types.SelectCount}
	n := 0
	for range maxCheckPages {
		page, err := d.query(ctx, in)
		if err != nil {
			return 0, err
		}
		n += int(page.Count)
		if page.LastEvaluatedKey == nil {
			return n, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return n, nil
}
