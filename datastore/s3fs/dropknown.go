package s3fs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// A drop's index entries known without their reads (issue 31). A drop
// deletes each index entry of the partition under If-Match on its ETag,
// after reading it: a live version is handed to Reclaim by what the entry
// says (its version, its chunks). A model of the seed's loop, six files
// committed at once and dropped, cost six GETs of entries for two log
// objects that say the same. The drop lists both the log and the index
// (their keys and ETags) anyway; the roll-forward writes each entry as the
// JSON of the path's latest change in the log (updateIndex), and S3's ETag
// of an object written by one PUT is the MD5 of its bytes. So when the log
// has fewer objects than the index has entries, the drop reads the log
// objects, builds each path's entry as the roll-forward wrote it, and takes
// it wherever the listed ETag is the MD5 of its encoding: that object holds
// exactly those bytes. An entry whose ETag is not (a foreign or damaged
// one, an ETag that is no MD5, as under SSE-KMS, a change the objects read
// do not hold) is read as before; its removal stays conditional on the
// ETag either way, and one that changed since the listing is read again.
//
// The head the drop reads carries copies of the log's last objects
// (recent.go): an object it copies is not read either (a delete sync's
// drop of the seed's loop read the definition's tombstone, which its own
// commit had just written, one GET). A copy is only ever compared with
// the entries' ETags, like an object read: one that differs from its
// object (a foreign rewrite of either) builds entries whose ETags do not
// match, and those entries are read.

// fileListed is an index entry's path and its ETag in a listing.
type fileListed struct {
	path, etag string
}

// loggedEntries returns, for each path the log objects logs (a listing of
// part's log, in position order) change, the index entry the roll-forward
// of its latest change there writes, one GET an object not in copies (by
// position); an object that cannot be read is left out (an entry built
// without it is refused by its ETag).
func (d *Driver) loggedEntries(ctx context.Context, part string, logs []listed, copies map[uint64]*logObject) map[string]indexEntry {
	objs := make([]*logObject, len(logs))
	_ = untilFailure(len(logs), func(i int) error {
		if pos, ok := d.posOf(part, logs[i].key); ok {
			if c := copies[pos]; c != nil {
				objs[i] = c
			} else if o, err := d.readLog(ctx, part, logs[i].key, pos); err == nil {
				objs[i] = o
			}
		}
		return nil
	})
	out := map[string]indexEntry{}
	for _, o := range objs {
		if o == nil {
			continue
		}
		for j, e := range o.Entries {
			out[e.Path] = indexEntry{logEntry: e, Pos: o.First + uint64(j), Time: o.Time}
		}
	}
	return out
}

// knownEntries returns the entries of files (a listing of part's index)
// that the log objects logs say they hold, by their ETags (see above), as
// reads; none when reading the log would cost more GETs than the entries.
// h is the partition's head as the drop read it, whose copies of the last
// objects are taken for those objects.
func (d *Driver) knownEntries(ctx context.Context, part string, h head, logs []listed, files []fileListed) map[string]readEntry {
	out := map[string]readEntry{}
	copies := map[uint64]*logObject{}
	for _, o := range d.validRecent(part, h) {
		copies[o.First] = o
	}
	reads := 0
	for _, l := range logs {
		if pos, ok := d.posOf(part, l.key); !ok || copies[pos] == nil {
			reads++
		}
	}
	if reads >= len(files) {
		return out
	}
	logged := d.loggedEntries(ctx, part, logs, copies)
	for _, f := range files {
		if e, ok := logged[f.path]; ok && etagOf(e) == strings.Trim(f.etag, `"`) {
			out[f.path] = readEntry{&e, f.etag}
		}
	}
	return out
}

// etagOf is the ETag S3 gives the index entry e as the roll-forward
// writes it: the MD5 of its JSON, in hex.
func etagOf(e indexEntry) string {
	body, err := json.Marshal(e)
	if err != nil {
		return ""
	}
	sum := md5.Sum(body)
	return hex.EncodeToString(sum[:])
}
