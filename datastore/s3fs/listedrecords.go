package s3fs

import (
	"context"
	"errors"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// The namespace registry beside the heads (issue 31, layout "models-v4").
// A sync reads its namespace's record (the lifecycle policy and the
// layout's proof) every time, so that a policy changed since is applied by
// the next sync; on S3 that was a GET beside the sync's LISTs, in every
// sync, also one that finds nothing changed. In a "models-v4" datastore
// the record datastore/namespaces/NAME is the object
//
//	n/NAME/h/!ns~    (the default namespace's: h/!ns~)
//
// beside the namespace's own heads, which a sync lists anyway (its pull):
// the listing shows the record's ETag, and a record this process (or the
// tree's last sync) read or wrote at that ETag is taken from memory, as a
// head is (knownheads.go: only when the kept body's MD5 is the ETag, so it
// is exactly the object listed). A record the listing does not show is
// absent at the listing's instant, which is the instant the read answers
// for. Every write of the record (the namespace's registration,
// `lake data lifecycle`) is the conditional write it was, at the new key.
// The record stays inside the namespace's tree, so a role confined to it
// (iam's sync-worker) reaches its own record and no other's.
//
// No head's key holds a '!' (a partition's name is url.PathEscape'd), so
// the record is never read as a head, nor as a pending mark (whose '!' is
// followed by 'p' after a partition's name): every reader of the heads
// already skips it (headPartition, pendingOf), and lake data check knows
// it. A lake that knew only "models-v3" refuses a "models-v4" datastore,
// so no writer keeps the registry where this lake's readers no longer look.

// registryLeaf is the name of a namespace's registry record under its h/.
const registryLeaf = "!ns~"

// recordsBesideHeads reports whether d's datastore keeps the namespace
// registry beside the namespaces' heads (datastore.LayoutModelsV4).
func (d *Driver) recordsBesideHeads() bool { return d.layout >= datastore.LayoutModelsV4 }

// scopePrefix is the prefix of namespace name's tree: the root's for the
// default namespace.
func (d *Driver) scopePrefix(name string) string {
	if name == datastore.DefaultNamespace {
		return d.root
	}
	return d.root + nsDir + name + "/"
}

// listedRecordKey returns the object of record key when it sits beside a
// namespace's heads: the namespace's registry record in a "models-v4"
// datastore.
func (d *Driver) listedRecordKey(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, datastore.NamespaceRecords)
	if !ok || !d.recordsBesideHeads() || datastore.ValidateNamespace(name) != nil {
		return "", false
	}
	return d.scopePrefix(name) + "h/" + registryLeaf, true
}

// namespaceName returns the name of d's namespace ("default" for the
// root), and false for an internal scope (_catalog), which registers
// nothing.
func (d *Driver) namespaceName() (string, bool) {
	name := datastore.DefaultNamespace
	if d.prefix != d.root {
		name = strings.TrimSuffix(strings.TrimPrefix(d.prefix, d.root+nsDir), "/")
	}
	return name, datastore.ValidateNamespace(name) == nil
}

// isListedRecord reports whether key (an object's) is d's namespace's
// registry record beside its heads, for the readers of the heads that look
// at every key (lake data check).
func (d *Driver) isListedRecord(key string) bool {
	_, registers := d.namespaceName()
	return d.recordsBesideHeads() && registers && key == d.prefix+"h/"+registryLeaf
}

// isRegistryObject reports whether key is some namespace's registry record
// beside its heads.
func (d *Driver) isRegistryObject(key string) bool {
	return d.recordsBesideHeads() && strings.HasPrefix(key, d.root) && strings.HasSuffix(key, "h/"+registryLeaf)
}

// listsRegistry reports whether a ListRecords(prefix) may return registry
// records, and whether it returns nothing else.
func listsRegistry(prefix string) (some, only bool) {
	only = strings.HasPrefix(prefix, datastore.NamespaceRecords)
	return only || strings.HasPrefix(datastore.NamespaceRecords, prefix), only
}

// listRegistry returns the registry records whose keys start with prefix,
// in a "models-v4" datastore: a LIST of the namespaces' folders (n/, with
// the delimiter "/"), then a GET of each namespace's record (the default
// namespace's too); a folder without one is a namespace that never
// registered.
func (d *Driver) listRegistry(ctx context.Context, prefix string) ([]metastore.Item, error) {
	partial := strings.TrimPrefix(prefix, datastore.NamespaceRecords)
	if !strings.HasPrefix(prefix, datastore.NamespaceRecords) {
		partial = ""
	}
	dirs, err := d.c.listDirs(ctx, d.root+nsDir+partial)
	if err != nil {
		return nil, err
	}
	names := []string{datastore.DefaultNamespace}
	for _, dir := range dirs {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(dir, d.root+nsDir), "/"))
	}
	var out []metastore.Item
	for i, name := range names {
		if !strings.HasPrefix(name, partial) || (i > 0 && name == datastore.DefaultNamespace) {
			continue
		}
		key, ok := d.listedRecordKey(datastore.NamespaceRecords + name)
		if !ok {
			continue // an internal scope's folder (_catalog), or not a namespace's
		}
		o, err := d.getRecordObject(ctx, key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, metastore.Item{Key: datastore.NamespaceRecords + name, Value: o.body})
	}
	return out, nil
}

// listedRecord answers a read-ahead's read of a registry record object
// beside a namespace's heads from ra's listing of those heads: absent if
// the listing does not show it, the kept body if it shows it at the ETag
// the body was kept with (knownheads.go), else a GET. ok is false when ra
// has no such listing (the caller reads it as any record).
func (d *Driver) listedRecord(ctx context.Context, ra *readAhead, key string) (aheadRead, bool) {
	if !d.isRegistryObject(key) {
		return aheadRead{}, false
	}
	keys, ok := ra.listing(ctx, strings.TrimSuffix(key, "h/"+registryLeaf))
	if !ok {
		return aheadRead{}, false
	}
	etag, listed := "", false
	for _, k := range keys {
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
// the heads with its ETag for the next listing that shows it.
func (d *Driver) getRecordObject(ctx context.Context, key string) (object, error) {
	o, err := d.c.get(ctx, key)
	if err == nil && d.isRegistryObject(key) {
		d.c.known.put(key, o.etag, o.body)
	}
	return o, err
}

// keepWritten keeps a registry record beside the heads as this process
// wrote it.
func (d *Driver) keepWritten(key, etag string, value []byte) {
	if d.isRegistryObject(key) {
		d.c.known.put(key, etag, value)
	}
}
