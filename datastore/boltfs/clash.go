package boltfs

import (
	"bytes"
	"encoding/json"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
)

// checkClash returns the datastore.Clash of a commit whose files, applied
// in this transaction already, would make a path both a file and a
// directory: a live file at one of a put's directories, or a live file
// below a put's path. It runs inside the commit's read-write transaction,
// after the entries are written, so it judges exactly the state the commit
// leaves (a delete in the same commit frees its name) and no other writer
// can interleave (bbolt has one writer at a time). Cost per put: one Get per
// directory above it, and one cursor seek below it that stops at the first
// live file (stepping over the tombstones there, which Reclaim bounds).
func checkClash(files *boltfile.Bucket, entries []datastore.Entry) error {
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		path := e.Put.Path
		for _, dir := range datastore.Ancestors(path) {
			var rec fileRec
			if ok, err := getJSON(files, []byte(dir), &rec); err != nil {
				return err
			} else if ok && !rec.Deleted {
				return datastore.Clash(path, dir)
			}
		}
		below := []byte(path + "/")
		c := files.Cursor()
		for k, v := c.Seek(below); k != nil && bytes.HasPrefix(k, below); k, v = c.Next() {
			var rec fileRec
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			if !rec.Deleted {
				return datastore.Clash(path, string(k))
			}
		}
	}
	return nil
}

// ChecksClashes reports that Commit refuses file/directory clashes (the
// conformance suite's FileOrDirectory).
func (d *Driver) ChecksClashes() bool { return true }

// CrossPartitionClashes reports that a clash across partitions (a model's
// directory data/T/I against the model's files) is refused atomically too:
// one bbolt transaction sees every partition.
func (d *Driver) CrossPartitionClashes() bool { return true }
