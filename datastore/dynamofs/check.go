package dynamofs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
// each partition's head and files (a Query), and reports, with what
// --repair does (every write conditional on what the check read; the
// caller holds the namespace's lock):
//
//   - a file item that cannot be derived (a live one without a version,
//     one whose path is not of its partition): moved aside to
//     q#MS/PK/SK, named in the report (checkrepair.go);
//   - a file item without a position, or at another path's position (a
//     pull reads one of them): given the partition's next position;
//   - a partition that holds files but is not registered (Partitions, List
//     and the catalog miss it): registered;
//   - a head missing or not a head (its seq not a number): rebuilt at the
//     partition's last change, its floor there (a puller behind resyncs);
//     a head behind the last change (pulls stop short of it): moved to it;
//     a head with no index position (ChangedPartitions never reports it):
//     put in the feed. Each of these moves the head to its shard's next
//     index position and the counter with it, in one transaction;
//   - a head whose index position is beyond its shard's counter
//     (ChangedPartitions misses it): the counter raised to it;
//   - a head at another head's index position (a reader that knows the
//     other partition may take this one's move for it): moved to its
//     shard's next index position;
//   - commit records not settled (whole.go): settled;
//   - with Chunks, a live file whose chunks are missing: reported only
//     (its content is lost; put it again).
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
	now := time.Now()
	// indexed: the partition whose head holds each index position, by
	// shard (each position is given to one head by the commit that moves
	// the counter).
	indexed := map[string]map[uint64]string{}
	// remembered: each head's earlier index positions (prevpos.go), to
	// compare with every head's position once all are read.
	type earlier struct {
		part, name string
		prev       []uint64
	}
	var remembered []earlier
	// fix runs repair when repairing, and adds p (repaired, or with the
	// repair's error); without a repair p is reported as it is.
	fix := func(p datastore.Problem, repair func() error) error {
		if o.Repair && repair != nil {
			if err := repair(); err != nil {
				if ctx.Err() != nil {
					return err
				}
				p.Fix += "; failed: " + strings.TrimPrefix(err.Error(), "lake: ")
			} else {
				p.Repaired = true
			}
		}
		add(p)
		return nil
	}
	for _, part := range all {
		its, err := d.partitionItems(ctx, part)
		if err != nil {
			return rep, err
		}
		rep.Objects += len(its) + 1
		var maxPos uint64
		at := map[uint64]string{}
		posOf := map[string]uint64{} // path → its item's position
		type move struct {
			it      item
			problem int // its index in rep.Problems
		}
		var moves []move // items to give the partition's next position
		for _, it := range its {
			f := fileInfo(it)
			obj := name(d.filePK(part), f.Path)
			quarantine := func(what string) error {
				to := d.quarantineKey(now, it)
				return fix(datastore.Problem{Object: obj, What: what, Fix: "move it aside to " + name(getS(to, attrPK), getS(to, attrSK))},
					func() error { return d.quarantine(ctx, it, to) })
			}
			switch {
			case d.partition(f.Path) != part || datastore.ValidatePath(f.Path) != nil:
				err = quarantine("a file item whose path is not one of partition " + part)
			case !f.Deleted && f.Version == "":
				err = quarantine("a live file item without a version")
			case f.Pos == 0:
				moves = append(moves, move{it, len(rep.Problems)})
				add(datastore.Problem{Object: obj, What: "a file item without a position (no pull reads it)", Fix: "give it the partition's next position"})
			case at[f.Pos] != "":
				moves = append(moves, move{it, len(rep.Problems)})
				add(datastore.Problem{Object: obj, What: fmt.Sprintf("at position %d, like %q (a pull reads one of them)", f.Pos, at[f.Pos]), Fix: "give it the partition's next position"})
			default:
				at[f.Pos] = f.Path
				posOf[f.Path] = f.Pos
				maxPos = max(maxPos, f.Pos)
				if o.Chunks && !f.Deleted {
					n, err := d.countChunks(ctx, f.Version)
					if err != nil {
						return rep, err
					}
					if n < f.Chunks {
						add(datastore.Problem{Object: obj, What: fmt.Sprintf("version %s has %d of its %d chunks: its content is lost (put the file again)", f.Version, n, f.Chunks)})
					}
				}
			}
			if err != nil {
				return rep, err
			}
		}
		files := len(its)
		if files > 0 && !slices.Contains(registered, part) {
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
		sh := shard(part)
		_, seqIsN := h["seq"].(*types.AttributeValueMemberN)
		switch {
		case h == nil && files > 0:
			err = fix(datastore.Problem{Object: hname, What: fmt.Sprintf("missing: partition %q holds changes up to %d but has no head (its files are not found, nor pulled)", part, maxPos),
				Fix: fmt.Sprintf("create it at %d (floor there: a puller behind it resyncs) and put it in the feed", maxPos)},
				func() error { return d.reindex(ctx, part, nil, maxPos, true) })
		case h == nil:
		case h["seq"] != nil && !seqIsN:
			err = fix(datastore.Problem{Object: hname, What: "not a partition head (its seq is not a number)",
				Fix: fmt.Sprintf("rebuild it at %d (floor there: a puller behind it resyncs) and put it in the feed", maxPos)},
				func() error { return d.reindex(ctx, part, h, maxPos, true) })
		case getN(h, "seq") < maxPos:
			err = fix(datastore.Problem{Object: hname, What: fmt.Sprintf("head %d is behind the partition's last change at %d (pulls stop short of it)", getN(h, "seq"), maxPos),
				Fix: fmt.Sprintf("move it to %d and put it in the feed", maxPos)},
				func() error { return d.reindex(ctx, part, h, maxPos, false) })
		case h[attrPos] == nil && getN(h, "seq") > 0:
			err = fix(datastore.Problem{Object: hname, What: "missing from the feed: the head has no index position (ChangedPartitions never reports the partition)",
				Fix: "put it in the feed"},
				func() error { return d.reindex(ctx, part, h, getN(h, "seq"), false) })
		case getN(h, attrPos) > counters[sh]:
			pos := getN(h, attrPos)
			err = fix(datastore.Problem{Object: hname, What: fmt.Sprintf("index position %d is beyond shard %s's counter %d, item %s (ChangedPartitions misses it)", pos, sh, counters[sh], name(d.pk("n#"+sh), "n")),
				Fix: fmt.Sprintf("raise the counter to %d", pos)},
				func() error { return d.raiseCounter(ctx, sh, pos) })
			counters[sh] = max(counters[sh], pos)
		case h[attrPos] != nil && indexed[sh][getN(h, attrPos)] != "":
			// Written by no lake: a reader that knows the other partition
			// takes this one's move for it (knownFill, feed.go), where a
			// Query of the shard would return both.
			pos := getN(h, attrPos)
			err = fix(datastore.Problem{Object: hname, What: fmt.Sprintf("index position %d of shard %s is also the head of %q's (a reader that knows %q may miss this partition's change)", pos, sh, indexed[sh][pos], indexed[sh][pos]),
				Fix: "put it in the feed at the shard's next position"},
				func() error { return d.reindex(ctx, part, h, getN(h, "seq"), false) })
		}
		if err != nil {
			return rep, err
		}
		if what := recentProblem(h, at, posOf); what != "" {
			// Written by no lake: a reader of the feed by these paths
			// would miss the change at that position (recentpaths.go).
			if err := fix(datastore.Problem{Object: hname, What: what, Fix: "forget its recent paths"},
				func() error { return d.forgetHeadAttr(ctx, part, attrRecent) }); err != nil {
				return rep, err
			}
		}
		if prev := prevOf(h); len(prev) > 0 {
			remembered = append(remembered, earlier{part: part, name: hname, prev: prev})
		}
		if h != nil && h[attrPos] != nil {
			if indexed[sh] == nil {
				indexed[sh] = map[uint64]string{}
			}
			if pos := getN(h, attrPos); indexed[sh][pos] == "" {
				indexed[sh][pos] = part
			}
		}
		if o.Repair {
			// After the head's own repair: a moved item goes above it.
			for _, m := range moves {
				p := &rep.Problems[m.problem]
				if err := d.reposition(ctx, part, m.it); err != nil {
					if ctx.Err() != nil {
						return rep, err
					}
					p.Fix += "; failed: " + strings.TrimPrefix(err.Error(), "lake: ")
					continue
				}
				p.Repaired = true
			}
		}
	}
	for _, e := range remembered {
		// Written by no lake (each position goes to one head): a reader
		// that knows this partition would take the other's move for one
		// of its own (knownFill, feed.go).
		sh := shard(e.part)
		for _, p := range e.prev {
			if owner := indexed[sh][p]; owner != "" && owner != e.part {
				if err := fix(datastore.Problem{Object: e.name, What: fmt.Sprintf("remembers index position %d of shard %s as its own, but it is the head of %q's (a reader that knows %q may miss that partition's change)", p, sh, owner, e.part),
					Fix: "forget its earlier positions"},
					func() error { return d.forgetHeadAttr(ctx, e.part, attrPrev) }); err != nil {
					return rep, err
				}
				break
			}
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

// partitionItems reads every file item of part, as stored.
func (d *Driver) partitionItems(ctx context.Context, part string) ([]item, error) {
	e, err := build(expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(expression.Value(d.filePK(part)))))
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	var out []item
	for range maxCheckPages {
		page, err := d.query(ctx, in)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
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
