package boltfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

var _ datastore.Checker = (*Driver)(nil)

// bQuarantine holds what Check's repair moved aside, keyed by the bucket
// and key it came from and the time it was moved ("TIME BUCKET/KEY").
//
// NB: a bucket name of the file format.
var bQuarantine = []byte("datastore.quarantine")

// Check implements datastore.Checker (lake data check) for d's namespace,
// in one transaction (read-only, or with Repair one write transaction,
// fenced like a commit). A commit is one transaction on bolt, so a bolt
// file holds no half-applied commit; what it can hold is what a foreign
// writer of the file, or a bug, left:
//
//   - a files record that is not JSON: moved to datastore.quarantine;
//   - a file whose feed entry is missing (pullers never see it), whose
//     partition is not registered, or whose head is behind its position:
//     the feed entry, registry entry or head rebuilt from the file;
//   - a head that is missing or not JSON: rebuilt from the partition's
//     files, its floor at its head (every puller of it resyncs once);
//   - a partition missing from the change index (ChangedPartitions skips
//     it): given a new index position;
//   - a feed or index entry that names no current change (stale or
//     garbage): deleted (a path keeps one feed entry, its latest change);
//   - with Chunks, a live file whose chunks are missing: reported only.
func (d *Driver) Check(ctx context.Context, o datastore.CheckOptions) (datastore.CheckReport, error) {
	var rep datastore.CheckReport
	run := func(tx *boltfile.Tx) error {
		rep = datastore.CheckReport{}
		if o.Repair && o.Fence != nil {
			cur := tx.Bucket(bRecords).Get([]byte(o.Fence.Key))
			if cur == nil || !bytes.Equal(cur, o.Fence.Token) {
				return metastore.Conflict(o.Fence.Key, datastore.FenceReason)
			}
		}
		c := &boltChecker{d: d, tx: tx, o: o, rep: &rep}
		return c.run()
	}
	if o.Repair {
		return rep, d.update(ctx, run)
	}
	return rep, d.view(ctx, run)
}

type boltChecker struct {
	d   *Driver
	tx  *boltfile.Tx
	o   datastore.CheckOptions
	rep *datastore.CheckReport
}

func (c *boltChecker) name(bucket []byte, key string) string {
	if c.d.ns == nil {
		return "bolt:" + string(bucket) + "/" + key
	}
	return "bolt:datastore.ns/" + string(c.d.ns) + "/" + string(bucket) + "/" + key
}

// problem records a problem and, when repairing, runs fix.
func (c *boltChecker) problem(bucket []byte, key, what, fix string, repair func() error) error {
	p := datastore.Problem{Object: c.name(bucket, key), What: what, Fix: fix}
	if repair == nil {
		p.Fix = ""
	} else if c.o.Repair {
		if err := repair(); err != nil {
			return err
		}
		p.Repaired = true
	}
	c.rep.Problems = append(c.rep.Problems, p)
	return nil
}

// quarantine moves bucket's key aside into datastore.quarantine.
func (c *boltChecker) quarantine(bucket []byte, key []byte) (string, func() error) {
	qk := c.o.Now.UTC().Format(time.RFC3339Nano) + " " + c.name(bucket, strconv.Quote(string(key)))
	return "move it to " + string(bQuarantine), func() error {
		q, err := c.tx.CreateBucketIfNotExists(bQuarantine)
		if err != nil {
			return err
		}
		b := c.d.bkt(c.tx, bucket)
		if err := q.Put([]byte(qk), bytes.Clone(b.Get(key))); err != nil {
			return err
		}
		return b.Delete(key)
	}
}

type boltPart struct {
	maxPos uint64
	head   *headRec
}

func (c *boltChecker) run() error {
	d, tx := c.d, c.tx
	files, feed, heads := d.bkt(tx, bFiles), d.bkt(tx, bFeed), d.bkt(tx, bHeads)
	index, registry := d.bkt(tx, bIndex), d.bkt(tx, bRegistry)
	if done, err := c.missingBuckets(); done || err != nil {
		return err
	}
	parts := map[string]*boltPart{}
	part := func(p string) *boltPart {
		if parts[p] == nil {
			parts[p] = &boltPart{}
		}
		return parts[p]
	}
	type file struct {
		path string
		rec  fileRec
	}
	var live []file
	var garbage [][]byte
	// Files: each a JSON record of a valid path.
	err := files.ForEach(func(k, v []byte) error {
		c.rep.Objects++
		var rec fileRec
		if json.Unmarshal(v, &rec) != nil || datastore.ValidatePath(string(k)) != nil || rec.Pos == 0 {
			garbage = append(garbage, bytes.Clone(k))
			return nil
		}
		live = append(live, file{string(k), rec})
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range garbage {
		fix, f := c.quarantine(bFiles, k)
		if err := c.problem(bFiles, string(k), "not a file record of a valid path", fix, f); err != nil {
			return err
		}
	}
	// Heads, as they are.
	err = heads.ForEach(func(k, v []byte) error {
		c.rep.Objects++
		var h headRec
		if json.Unmarshal(v, &h) == nil {
			part(string(k)).head = &h
		} else {
			part(string(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range live {
		p := d.partition(f.path)
		bp := part(p)
		bp.maxPos = max(bp.maxPos, f.rec.Pos)
		fk := feedKey(p, f.rec.Pos)
		if !bytes.Equal(feed.Get(fk), []byte(f.path)) {
			if err := c.problem(bFeed, fmt.Sprintf("%s@%d", p, f.rec.Pos), fmt.Sprintf("missing: the change feed has no entry for %q at %d (pullers never see it)", f.path, f.rec.Pos),
				"put it back", func() error { return feed.Put(fk, []byte(f.path)) }); err != nil {
				return err
			}
		}
		if registry.Get([]byte(p)) == nil {
			if err := c.problem(bRegistry, p, "missing: partition "+p+" holds files but is not registered", "register it",
				func() error { return registry.Put([]byte(p), nil) }); err != nil {
				return err
			}
		}
		if c.o.Chunks && !f.rec.Deleted {
			chunks := d.bkt(tx, bChunks)
			for i := range f.rec.Chunks {
				if chunks.Get(chunkKey(f.rec.Version, i)) == nil {
					if err := c.problem(bChunks, fmt.Sprintf("%s/%d", f.rec.Version, i), fmt.Sprintf("missing: chunk %d of %q (version %s): its content is lost (put the file again)", i, f.path, f.rec.Version), "", nil); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	var iseq uint64
	meta := d.bkt(tx, bMeta)
	if raw := meta.Get(keyISeq); len(raw) == 8 {
		iseq = binary.BigEndian.Uint64(raw)
	}
	names := make([]string, 0, len(parts))
	for p := range parts {
		names = append(names, p)
	}
	slices.Sort(names)
	c.rep.Partitions = len(names)
	for _, p := range names {
		bp := parts[p]
		h := bp.head
		fix := func(what, how string, change func(h *headRec)) error {
			return c.problem(bHeads, p, what, how, func() error {
				nh := headRec{}
				if h != nil {
					nh = *h
				}
				change(&nh)
				if index.Get(u64(nh.ISeq)) == nil || !bytes.Equal(index.Get(u64(nh.ISeq)), []byte(p)) {
					iseq++
					nh.ISeq = iseq
					if err := index.Put(u64(iseq), []byte(p)); err != nil {
						return err
					}
					if err := meta.Put(keyISeq, u64(iseq)); err != nil {
						return err
					}
				}
				bp.head = &nh
				return putJSON(heads, []byte(p), nh)
			})
		}
		switch {
		case h == nil && bp.maxPos > 0:
			if err := fix(fmt.Sprintf("missing or not a head: partition %q holds changes up to %d", p, bp.maxPos),
				"rebuild it from the files, its floor at its head (pullers resync it once)",
				func(nh *headRec) { nh.Seq, nh.Floor = bp.maxPos, bp.maxPos }); err != nil {
				return err
			}
		case h == nil && heads.Get([]byte(p)) != nil:
			if err := fix(fmt.Sprintf("not a head (partition %q holds no change)", p), "rebuild it empty",
				func(nh *headRec) {}); err != nil {
				return err
			}
		case h == nil:
		case h.Seq < bp.maxPos:
			if err := fix(fmt.Sprintf("head %d is behind the partition's last change at %d", h.Seq, bp.maxPos),
				"raise it", func(nh *headRec) { nh.Seq = bp.maxPos }); err != nil {
				return err
			}
		case !bytes.Equal(index.Get(u64(h.ISeq)), []byte(p)):
			if err := fix(fmt.Sprintf("partition %q is missing from the change index (ChangedPartitions skips it)", p),
				"give it a new index position", func(*headRec) {}); err != nil {
				return err
			}
		}
	}
	// Feed entries that name no current change.
	var stale [][]byte
	err = feed.ForEach(func(k, v []byte) error {
		c.rep.Objects++
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) != i+9 {
			stale = append(stale, bytes.Clone(k))
			return nil
		}
		p, pos := string(k[:i]), binary.BigEndian.Uint64(k[i+1:])
		var rec fileRec
		ok, err := getJSON(files, v, &rec)
		if err != nil || !ok || rec.Pos != pos || d.partition(string(v)) != p {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := c.problem(bFeed, strconv.Quote(string(k)), "a feed entry that names no current change", "delete it",
			func() error { return feed.Delete(k) }); err != nil {
			return err
		}
	}
	// Index entries that name no partition's current index position.
	stale = nil
	err = index.ForEach(func(k, v []byte) error {
		c.rep.Objects++
		bp := parts[string(v)]
		if len(k) != 8 || bp == nil || bp.head == nil || bp.head.ISeq != binary.BigEndian.Uint64(k) {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := c.problem(bIndex, strconv.Quote(string(k)), "a change index entry that is not its partition's current one", "delete it",
			func() error { return index.Delete(k) }); err != nil {
			return err
		}
	}
	return nil
}

// checkedBkts are the buckets the check reads.
var checkedBkts = [][]byte{bFiles, bFeed, bHeads, bIndex, bRegistry, bChunks, bMeta}

// missingBuckets reports, in a read-only check, the buckets of d's
// namespace that do not exist, and says whether the check is done: a
// namespace nothing was written to has none (a write creates them), so
// there is nothing to check; one missing beside the others was deleted by
// another writer of the file, and the rest of the check cannot walk it. A
// call on a nil bucket would panic, which the file's guard takes for a
// damaged page and poisons the store (a node's too), so it MUST not be
// reached. A repair runs in a write transaction, which has created them.
func (c *boltChecker) missingBuckets() (bool, error) {
	var missing [][]byte
	for _, b := range checkedBkts {
		if c.d.bkt(c.tx, b) == nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	if len(missing) == len(checkedBkts) {
		return true, nil
	}
	for _, b := range missing {
		if err := c.problem(b, "", "missing: the bucket is gone, so the rest of the check cannot read it", "", nil); err != nil {
			return true, err
		}
	}
	return true, nil
}
