package s3fs

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// GetRecord implements datastore.Records.
func (d *Driver) GetRecord(ctx context.Context, key string) ([]byte, error) {
	if r, ok := d.aheadRecord(ctx, d.recordKey(key)); ok { // readahead.go
		return r.body, r.err
	}
	o, err := d.getRecordObject(ctx, d.recordKey(key))
	if err != nil {
		return nil, err
	}
	return o.body, nil
}

// casRecord writes value under key if it satisfies expect: a create with
// If-None-Match, or a replace with If-Match on the expected value's MD5,
// else (the store's ETags are not MD5s, or the value differs) a read then a
// replace with If-Match on the ETag read.
// It returns the old object (etag empty if absent) and the new ETag.
func (d *Driver) casRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) (old object, etag string, err error) {
	k := d.recordKey(key)
	sent := time.Now()
	defer func() {
		// What this process knows of the record from now on: what it
		// wrote (knownheads.go, ownwrite.go: counted from the first
		// request's sending), or, when its write failed or its outcome
		// is not known, nothing.
		if err == nil {
			d.keepWritten(k, etag, value)
		}
		d.wroteRecord(k, okValue(err, value), sent)
	}()
	if expect.Absent() {
		etag, err = d.c.create(ctx, k, value)
		return object{}, etag, err
	}
	// S3's ETag of an object written in one part without KMS is the MD5
	// of its bytes: a replace conditional on the expected value's MD5
	// applies exactly when the record holds those bytes, in one request.
	// Where the ETag is something else, it fails, and the read below
	// settles it.
	if etag, err = d.c.replace(ctx, k, md5ETag(expect.Value()), value); err == nil {
		return object{body: expect.Value()}, etag, nil
	} else if !errors.Is(err, metastore.ErrConflict) {
		return object{}, "", err
	}
	cur, err := d.c.get(ctx, k)
	if errors.Is(err, metastore.ErrNotFound) {
		return object{}, "", metastore.Conflict(key, "record differs from expected")
	}
	if err != nil {
		return object{}, "", err
	}
	if !expect.Matches(true, cur.body) {
		return object{}, "", metastore.Conflict(key, "record differs from expected")
	}
	etag, err = d.c.replace(ctx, k, cur.etag, value)
	return cur, etag, err
}

// CASRecord implements datastore.Records.
func (d *Driver) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	_, _, err := d.casRecord(ctx, key, expect, value)
	return err
}

// DeleteRecord implements datastore.Records with a DeleteObject conditional
// on the ETag of the value read.
func (d *Driver) DeleteRecord(ctx context.Context, key string, expected []byte) error {
	d.wroteRecord(d.recordKey(key), nil, time.Time{})
	cur, err := d.c.get(ctx, d.recordKey(key))
	if errors.Is(err, metastore.ErrNotFound) {
		return metastore.Conflict(key, "record differs from expected")
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(cur.body, expected) {
		return metastore.Conflict(key, "record differs from expected")
	}
	return d.c.deleteIf(ctx, d.recordKey(key), cur.etag)
}

// ListRecords implements datastore.Records: a LIST, then a GET of each
// (and, for the namespace registry of a "models-v4" datastore, a LIST of
// the namespaces and a GET of each one's record: listedrecords.go).
func (d *Driver) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	var out []metastore.Item
	var keys []listed
	some, only := listsRegistry(prefix)
	if some && d.recordsBesideHeads() {
		items, err := d.listRegistry(ctx, prefix)
		if err != nil {
			return nil, err
		}
		out = items
	}
	if !only || !d.recordsBesideHeads() {
		var err error
		if keys, err = d.c.listAll(ctx, d.root+"r/"+escape(prefix), ""); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		o, err := d.c.get(ctx, k.key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, metastore.Item{Key: unleaf(strings.TrimPrefix(k.key, d.root+"r/")), Value: o.body})
	}
	// The "~" ending a key sorts after "/": "a/x/deep~" lists before "a/x~".
	slices.SortFunc(out, func(a, b metastore.Item) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// FencedRecord implements datastore.Records. S3 writes one object at a
// time, so the fence is checked, the record written conditionally, and the
// fence checked again: if it moved in between, the write is undone (a
// conditional write back to the old value, or a conditional delete) and
// the fenced write reports the conflict. Two fenced writes that race, each
// guarded on the record the other writes (a renewal of the expiry record
// guarded on the lock record, a takeover of the lock record guarded on the
// expiry record), cannot both succeed: whichever writes second sees the
// first's write in its re-check.
func (d *Driver) FencedRecord(ctx context.Context, fence datastore.Fence, key string, expect metastore.Expect, value []byte) error {
	fenceOK := func() error {
		o, err := d.c.get(ctx, d.recordKey(fence.Key))
		if errors.Is(err, metastore.ErrNotFound) || (err == nil && !bytes.Equal(o.body, fence.Token)) {
			return metastore.Conflict(fence.Key, datastore.FenceReason)
		}
		return err
	}
	if err := fenceOK(); err != nil {
		return err
	}
	old, etag, err := d.casRecord(ctx, key, expect, value)
	if err != nil {
		return err
	}
	ferr := fenceOK()
	if ferr == nil {
		return nil
	}
	// Undo; if the undo itself loses (someone wrote over it), that writer
	// read the value and owns what follows.
	d.wroteRecord(d.recordKey(key), nil, time.Time{})
	if expect.Absent() {
		_ = d.c.deleteIf(ctx, d.recordKey(key), etag)
	} else {
		_, _ = d.c.replace(ctx, d.recordKey(key), etag, old.body)
	}
	return ferr
}

// okValue is value if err is nil, else nil: what a write whose outcome
// err tells leaves known.
func okValue(err error, value []byte) []byte {
	if err != nil {
		return nil
	}
	return value
}

// md5ETag is the ETag S3 gives an object of body written in one part.
func md5ETag(body []byte) string {
	sum := md5.Sum(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}
