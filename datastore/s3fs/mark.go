package s3fs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"

	"github.com/lakemeta/lake/metastore"
)

// Compaction's mark, kept in the store: k/PARTITION holds the
// examinedMark of the partition's log (how far compaction has read it, and
// the tombstones it saw there not yet past the horizon), so that a reclaim
// in a new process (every lake data sync is one, and the lifecycle's
// reclaim runs in it) reads only the log objects written since, not every
// object of the grace period again. The mark is trusted only while the
// object it names is still there with the same LastModified (see
// compact); a damaged or foreign mark costs one full read and is
// replaced. The process also keeps the mark it last read or wrote, with
// its ETag, so a long-running process reads it once.

// storedMark is a mark and the ETag of its object ("" if none).
type storedMark struct {
	m    examinedMark
	etag string
}

func (d *Driver) markKey(part string) string { return d.prefix + "k/" + url.PathEscape(part) }

// loadMark returns part's compaction mark and its object's ETag.
func (d *Driver) loadMark(ctx context.Context, part string) (examinedMark, string, error) {
	if v, ok := d.c.examined.Load(d.logPrefix(part)); ok {
		sm := v.(storedMark)
		return sm.m, sm.etag, nil
	}
	o, err := d.c.get(ctx, d.markKey(part))
	if errors.Is(err, metastore.ErrNotFound) {
		return examinedMark{}, "", nil
	}
	if err != nil {
		return examinedMark{}, "", err
	}
	var m examinedMark
	if json.Unmarshal(o.body, &m) != nil {
		return examinedMark{}, o.etag, nil // not a mark: read the log, replace it
	}
	return m, o.etag, nil
}

// saveMark writes next as part's mark if it differs from prev (conditional
// on etag, as read); a lost race leaves the other reclaim's mark, which is
// as good, and makes the process read it again next time. A failure costs
// the next reclaim a full read, so it is not an error of this one.
func (d *Driver) saveMark(ctx context.Context, part string, prev examinedMark, etag string, next examinedMark) {
	pb, _ := json.Marshal(prev)
	nb, _ := json.Marshal(next)
	if etag != "" && bytes.Equal(pb, nb) {
		d.c.examined.Store(d.logPrefix(part), storedMark{next, etag})
		return
	}
	var err error
	if etag == "" {
		etag, err = d.c.create(ctx, d.markKey(part), nb)
	} else {
		etag, err = d.c.replace(ctx, d.markKey(part), etag, nb)
	}
	if err != nil {
		d.c.examined.Delete(d.logPrefix(part))
		return
	}
	d.c.examined.Store(d.logPrefix(part), storedMark{next, etag})
}

// dropMark deletes part's mark (its log is being dropped).
func (d *Driver) dropMark(ctx context.Context, part string) error {
	d.c.examined.Delete(d.logPrefix(part))
	o, err := d.c.head(ctx, d.markKey(part))
	if errors.Is(err, metastore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := d.c.deleteIf(ctx, d.markKey(part), o.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	return nil
}
