package s3fs

import (
	"context"
	"errors"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// The namespace registry beside the catalog's heads (issue 31, layout
// "models-v4"). A sync reads its namespace's record (the lifecycle policy
// and the layout's proof) every time, so that a policy changed since is
// applied by the next sync; on S3 that was a GET beside the sync's two
// LISTs, in every sync, also one that finds nothing changed. In a
// "models-v4" datastore the record datastore/namespaces/NAME is the object
//
//	n/_catalog/h/!ns/NAME~
//
// beside the catalog's heads, which a sync with the catalog on lists
// anyway (its catalog read): the listing shows the record's ETag, and a
// record this process (or the tree's last sync) read or wrote at that ETag
// is taken from memory, as a head is (knownheads.go: only when the kept
// body's MD5 is the ETag, so it is exactly the object listed). A record the
// listing does not show is absent at the listing's instant, which is the
// instant the read answers for. Every write of the record (the
// namespace's registration, `lake data lifecycle`) is the conditional
// write it was, at the new key; nothing else changes.
//
// No head's key holds a '!' (a partition's name is url.PathEscape'd), so
// the records are never read as heads, nor as pending marks (whose '!' is
// followed by 'p' after a partition's name): every reader of the heads
// already skips them (headPartition, pendingOf), and lake data check knows
// them. A lake that knew only "models-v3" refuses a "models-v4" datastore,
// so no writer keeps the registry where this lake's readers no longer look.

// listedRecordsDir is the folder of the namespace registry's records under
// the catalog's heads.
const listedRecordsDir = "!ns/"

// recordsBesideHeads reports whether d's datastore keeps the namespace
// registry beside the catalog's heads (datastore.LayoutModelsV4).
func (d *Driver) recordsBesideHeads() bool { return d.layout == datastore.LayoutModelsV4 }

// catalogPrefix is the catalog scope's prefix (its driver's d.prefix).
func (d *Driver) catalogPrefix() string { return d.root + nsDir + datastore.CatalogScope + "/" }

// listedRecordsPrefix is the prefix of the registry's objects beside the
// catalog's heads.
func (d *Driver) listedRecordsPrefix() string { return d.catalogPrefix() + "h/" + listedRecordsDir }

// listedRecordKey returns the object of record key when it sits beside the
// catalog's heads: a namespace's registry record in a "models-v4"
// datastore.
func (d *Driver) listedRecordKey(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, datastore.NamespaceRecords)
	if !ok || !d.recordsBesideHeads() || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return d.listedRecordsPrefix() + leaf(name), true
}

// isListedRecord reports whether key (an object's) is a registry record
// beside the catalog's heads, for the readers of those heads that look at
// every key (lake data check).
func (d *Driver) isListedRecord(key string) bool {
	return d.recordsBesideHeads() && d.prefix == d.catalogPrefix() && strings.HasPrefix(key, d.listedRecordsPrefix())
}

// recordLists returns the object prefixes a ListRecords(prefix) lists and,
// for each, the record key of one of its objects.
func (d *Driver) recordLists(prefix string) []recordList {
	plain := recordList{d.root + "r/" + escape(prefix), func(k string) string { return unleaf(strings.TrimPrefix(k, d.root+"r/")) }}
	if !d.recordsBesideHeads() {
		return []recordList{plain}
	}
	beside := func(name string) recordList {
		return recordList{d.listedRecordsPrefix() + escape(name), func(k string) string {
			return datastore.NamespaceRecords + unleaf(strings.TrimPrefix(k, d.listedRecordsPrefix()))
		}}
	}
	if name, ok := strings.CutPrefix(prefix, datastore.NamespaceRecords); ok {
		if strings.Contains(name, "/") {
			return []recordList{plain} // no namespace's name holds a '/'
		}
		return []recordList{beside(name)}
	}
	if strings.HasPrefix(datastore.NamespaceRecords, prefix) {
		return []recordList{plain, beside("")}
	}
	return []recordList{plain}
}

// recordList is one LIST of ListRecords: the objects under prefix, each
// the record key(object key).
type recordList struct {
	prefix string
	key    func(object string) string
}

// listedRecord answers a read-ahead's read of the record object key
// beside the catalog's heads from ra's listing of those heads: absent if
// the listing does not show it, the kept body if it shows it at the ETag
// the body was kept with (knownheads.go), else a GET. ok is false when
// there is no such listing in ra (the caller reads it as any record).
func (d *Driver) listedRecord(ctx context.Context, ra *readAhead, key string) (aheadRead, bool) {
	l := ra.heads[d.catalogPrefix()]
	if l == nil || !strings.HasPrefix(key, d.listedRecordsPrefix()) {
		return aheadRead{}, false
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return aheadRead{}, false
	}
	if !l.ok {
		return aheadRead{}, false
	}
	etag, listed := "", false
	for _, k := range l.keys {
		if k.key == key {
			etag, listed = k.etag, true
			break
		}
	}
	if !listed {
		return aheadRead{err: metastore.NotFound(key)}, true
	}
	if body, ok := d.c.known.get(key, etag); ok {
		return aheadRead{body: body}, true
	}
	o, err := d.getRecordObject(ctx, key)
	if err != nil && !errors.Is(err, metastore.ErrNotFound) {
		return aheadRead{}, false
	}
	return aheadRead{body: o.body, err: err}, true
}

// getRecordObject reads a record's object, keeping a registry record beside
// the catalog's heads with its ETag for the next listing that shows it.
func (d *Driver) getRecordObject(ctx context.Context, key string) (object, error) {
	o, err := d.c.get(ctx, key)
	if err == nil && strings.HasPrefix(key, d.listedRecordsPrefix()) && d.recordsBesideHeads() {
		d.c.known.put(key, o.etag, o.body)
	}
	return o, err
}

// keepWritten keeps a registry record beside the catalog's heads as this
// process wrote it.
func (d *Driver) keepWritten(key, etag string, value []byte) {
	if d.recordsBesideHeads() && strings.HasPrefix(key, d.listedRecordsPrefix()) {
		d.c.known.put(key, etag, value)
	}
}
