package s3fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// logObject is one object of a partition's log, named by its first
// position: a commit of N entries holds positions first..first+N-1; a fence
// entry (no entries) holds position first. The next object of the log is
// named first+span(): writers who read the same tail race for one name,
// and the conditional create lets exactly one win.
//
// NB: a stored format; the JSON names must not change.
type logObject struct {
	First   uint64      `json:"first"`
	Entries []logEntry  `json:"entries,omitempty"`
	Time    time.Time   `json:"time"`
	Fence   *fenceToken `json:"fence,omitempty"`
	// Fences is the highest token seen so far in this log for each lock
	// record that fenced a commit or appended a fence entry, this object
	// included: a writer refuses to write after an object whose Fences
	// name a higher token than its own, and a reader ignores such an
	// object should one exist.
	Fences map[string]uint64 `json:"fences,omitempty"`
	// Tx names the commit this object is a staged part of (a commit of
	// more than one log object, whole.go): its entries count only once
	// that commit's record t/TX says done; aborted, they count for
	// nothing; pending, readers stop before it.
	Tx string `json:"tx,omitempty"`
	// Claims are the models that claim this partition with this object
	// (claims.go): each may hold files below a directory of this
	// partition. Rolled forward into the head's Subs.
	Claims []string `json:"claims,omitempty"`
	// void is set by readers for an object of an aborted commit: it holds
	// its positions and fences, and no change.
	void bool
	// ends is set for an object known only from its partition's head (its
	// last position and its fences, head.Fences), never read: the last
	// position it holds. Its First and Entries are not known.
	ends uint64
}

// fenceToken is a commit's fence: the lock record and, when its bytes are a
// lock record, their token.
type fenceToken struct {
	Key   string `json:"key"`
	Token uint64 `json:"token,omitempty"`
}

// logEntry is one change.
type logEntry struct {
	Path    string `json:"path"`
	Deleted bool   `json:"deleted,omitempty"`
	Version string `json:"version,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Chunks  int    `json:"chunks,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Meta    []byte `json:"meta,omitempty"`
	// Inline is the content of a file stored inline (Chunks 0), base64
	// in the JSON; absent for a file in chunks and in every entry
	// written before inline storage existed.
	Inline []byte `json:"inline,omitempty"`
}

func (o *logObject) span() uint64 { return uint64(max(len(o.Entries), 1)) }
func (o *logObject) last() uint64 {
	if o.ends != 0 {
		return o.ends
	}
	return o.First + o.span() - 1
}

// headBase is the object ending at h's applied position as h describes it
// (h.knownFences()): its fences, for a writer that does not read it.
func headBase(h head) *logObject {
	return &logObject{First: h.Base, Fences: h.Fences, ends: h.Applied}
}

// infos returns o's changes.
func (o *logObject) infos(part string) []datastore.Info {
	out := make([]datastore.Info, len(o.Entries))
	for i, e := range o.Entries {
		out[i] = e.info(part, o.First+uint64(i), o.Time)
	}
	return out
}

func (e logEntry) info(part string, pos uint64, t time.Time) datastore.Info {
	meta := e.Meta
	if meta == nil {
		meta = []byte{}
	}
	return datastore.Info{Path: e.Path, Partition: part, Pos: pos, Deleted: e.Deleted, Version: e.Version,
		Size: e.Size, Chunks: e.Chunks, SHA256: e.SHA256, Meta: meta, Inline: e.Inline, Time: t}
}

// head is the value of h/PART: the partition's registry entry (created
// before its first log object) and its watermarks.
//
// NB: a stored format.
type head struct {
	// Applied: every log object up to this position has been rolled into
	// the path index (f/PATH); it only grows.
	Applied uint64 `json:"applied"`
	// Floor: changes at or below it may have been purged.
	Floor uint64 `json:"floor"`
	// Base is the first position of the log object that ends at
	// Applied, as the roll-forward that wrote Applied saw it (issue 31):
	// a writer reads the tail from that object on with one LIST, where it
	// had to list the log a second time when the object held more than
	// one position. Only a hint: zero (heads written before, or by a
	// repair) or a wrong value (a foreign writer's) makes the listing
	// not start at an object that holds Applied, and the writer lists
	// again as it did before; a value naming an earlier object only makes
	// it read objects it did not need.
	Base uint64 `json:"base,omitempty"`
	// Subs are the models that claimed this partition (claims.go), from
	// the log objects rolled forward up to Applied; a model's drop
	// removes it (forgetClaims).
	Subs []string `json:"subs,omitempty"`
	// ClaimsOnly: the partition was registered by a directory claim
	// (claims.go) and no object holding a change has been rolled
	// forward since, so it holds no file; Partitions and
	// ChangedPartitions do not name it (claimsonly.go). Heads written
	// before claims, and by any other register, leave it false.
	ClaimsOnly bool `json:"claimsOnly,omitempty"`
	// Fences are the Fences of the log object that ends at FencesAt, as
	// the roll-forward that moved Applied there read them (issue 31): a
	// writer whose head holds them, with FencesAt equal to Applied, judges
	// the log after Applied against them instead of reading that object
	// (one GET less a commit). Any write that moves Applied without them
	// (heads written before, a repair) leaves FencesAt behind, and the
	// writer reads the object as it did before; lake data check compares
	// them with the object and drops a copy that disagrees.
	Fences   map[string]uint64 `json:"fences,omitempty"`
	FencesAt uint64            `json:"fencesAt,omitempty"`
	// Recent are copies of the log's last objects up to Applied, for
	// readers (recent.go): a reader whose position they reach back to
	// reads no log object. Only readers take them, and only while they
	// end at Applied with no gap. Kept raw: copies that are not log
	// objects are ignored, never a reason to refuse the head.
	Recent json.RawMessage `json:"recent,omitempty"`
	// Indexed: the partition's path index is Files, here, not index
	// objects f/PATH (headindex.go): each path's latest change rolled
	// forward up to Applied, by path. Heads of a datastore recorded
	// "models-v3" are created with it; the roll-forward that would make
	// Files too big moves them to f/ and clears it, for good.
	Indexed bool                  `json:"indexed,omitempty"`
	Files   map[string]indexEntry `json:"files,omitempty"`
}

// knownFences reports whether h holds the fences of the object ending at
// its applied position.
func (h head) knownFences() bool { return h.FencesAt != 0 && h.FencesAt == h.Applied }

// tail is a partition's log as a writer or reader sees it: its watermarks,
// and the objects after the applied one, in order.
type tail struct {
	h       head
	hetag   string
	exists  bool
	objects []*logObject // the log objects after h.Applied, in order, up to blocked
	// base is the object ending at h.Applied when it was read (a writer's
	// tail): its fences are what the log had seen before objects.
	base *logObject
	last *logObject // the log's last object (nil for an empty log)
	// withLast: read by readTail with withLast (a writer's tail).
	withLast bool
	// blocked is the first object after h.Applied staged by a commit not
	// yet decided (whole.go): objects holds none from it on, and the
	// partition rolls forward only up to the position before it.
	blocked *logObject
	// hints are the index entries a commit read (or knew absent) before
	// its create, for its roll-forward (indexHint).
	hints map[string]indexHint
	// rolled is the head's ETag after a roll-forward of this tail that
	// replaced the head as read (hetag) with its first write: the commit
	// that rolled it moved the head from hetag to rolled and nothing else
	// did in between (cursorover.go). "" otherwise.
	rolled string
	// rolledHead is the head that write wrote, with rolled.
	rolledHead head
	// created: this tail's head was created by the writer that read it
	// (register), so hetag is the ETag of that create.
	created bool
	// wrote are the index entries this tail's roll-forward wrote, with
	// their ETags: hints for the partition's next commit (handoff.go).
	wrote map[string]indexHint
	// keysBelow is the listing of the index below the puts of the commit
	// that read this tail, made after it (clash.go's keysBelowOnce).
	keysBelow *listedBelow
}

// rollTo is the position up to which t's log is decided.
func (t *tail) rollTo() uint64 {
	switch {
	case t.blocked != nil:
		return t.blocked.First - 1
	case t.last == nil:
		return t.h.Applied
	}
	return t.last.last()
}

// next is the name of the log's next object.
func (t *tail) next() uint64 {
	if t.last == nil {
		return t.h.Applied + 1
	}
	return t.last.last() + 1
}

// headSeq is the position up to which every change is decided: before a
// staged part of a commit not yet decided (whole.go), whose positions and
// every later one wait for it, as a pull does.
func (t *tail) headSeq() uint64 {
	if t.blocked != nil {
		return t.blocked.First - 1
	}
	return t.next() - 1
}

func (d *Driver) readHead(ctx context.Context, part string) (head, string, bool, error) {
	key := d.headKey(part)
	if etag, listed, ok := d.listedHead(ctx, part); ok && !listed { // knownheads.go
		return head{}, "", false, nil // absent at the listing's instant
	} else if ok {
		if body, ok := d.c.known.get(key, etag); ok {
			var h head
			if json.Unmarshal(body, &h) == nil {
				return h, etag, true, nil
			}
		}
	}
	o, err := d.c.get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return head{}, "", false, nil
	}
	if err != nil {
		return head{}, "", false, err
	}
	var h head
	if err := json.Unmarshal(o.body, &h); err != nil {
		return head{}, "", false, datastore.Damaged(d.c.bucket+"/"+key, "not a partition head: %v", err)
	}
	d.c.known.put(key, o.etag, o.body)
	return h, o.etag, true, nil
}

// replaceHead writes h as part's head if the head still has etag (a
// failed condition matches metastore.ErrConflict), and returns the new
// ETag.
func (d *Driver) replaceHead(ctx context.Context, part, etag string, h head) (string, error) {
	body, _ := json.Marshal(h)
	next, err := d.c.replace(ctx, d.headKey(part), etag, body)
	if err == nil {
		d.c.known.put(d.headKey(part), next, body) // knownheads.go
	}
	return next, err
}

// readLog reads the log object at key, the object of part named by
// position pos, and checks that it is one lake wrote there: JSON, naming
// its own position, at most MaxCommit entries, each a path of part. Any
// other object (a foreign writer's, a damaged create) is reported as
// damaged, never read as a position: a writer that took its "first" for
// the truth would race for a position it can never win.
func (d *Driver) readLog(ctx context.Context, part, key string, pos uint64) (*logObject, error) {
	o, err := d.c.get(ctx, key)
	if err != nil {
		return nil, err
	}
	var l logObject
	if err := json.Unmarshal(o.body, &l); err != nil {
		return nil, datastore.Damaged(d.c.bucket+"/"+key, "not a log object: %v", err)
	}
	if err := checkLog(d.layout, part, pos, &l); err != nil {
		return nil, datastore.Damaged(d.c.bucket+"/"+key, "%s", err)
	}
	return &l, nil
}

// checkLog says what is wrong with l as the log object of part at pos.
func checkLog(layout datastore.Layout, part string, pos uint64, l *logObject) error {
	if l.First != pos {
		return fmt.Errorf("names position %d, not its own %d", l.First, pos)
	}
	if len(l.Entries) > MaxCommit {
		return fmt.Errorf("holds %d entries, more than %d", len(l.Entries), MaxCommit)
	}
	for i, e := range l.Entries {
		if e.Path == "" || layout.Partition(e.Path) != part {
			return fmt.Errorf("entry %d names path %q, not one of partition %q", i, e.Path, part)
		}
		if !e.Deleted && e.Version == "" {
			return fmt.Errorf("entry %d (%q) names no version", i, e.Path)
		}
	}
	if l.Fence != nil && l.Fence.Token != 0 && l.Fences[l.Fence.Key] < l.Fence.Token {
		return fmt.Errorf("its fences do not include its own token %d", l.Fence.Token)
	}
	return nil
}

// posOf returns the position a log key names; ok is false for a key that
// names none (a foreign object under the log's prefix, which readers skip
// and lake data check reports).
func (d *Driver) posOf(part, key string) (uint64, bool) {
	s := trimPrefix(key, d.logPrefix(part))
	if len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}

// positions drops the keys that name no position.
func (d *Driver) positions(part string, keys []listed) []listed {
	out := keys[:0:0]
	for _, k := range keys {
		if _, ok := d.posOf(part, k.key); ok {
			out = append(out, k)
		}
	}
	return out
}

// from returns the log objects that may hold a position after after, in
// order: one LIST of the objects after after, and, unless the first of them
// starts at after+1 (or none does and after is the applied watermark), one
// LIST from the first name an object holding after+1 can have (an object
// spans at most MaxCommit positions); then a GET of each object that holds
// one, stopping once limit changes are read (limit 0: no bound).
// end is the last position of the last object read (zero if none was).
//
// applied is the partition's applied watermark, which is always the end of
// an object: when after is that end, or the listing shows the next object
// starting at after+1, the object holding after is not read.
func (d *Driver) from(ctx context.Context, part string, after, applied uint64, limit int) (objs []*logObject, end uint64, err error) {
	var keys []listed
	if after > 0 {
		// Most reads start at an object's end (the applied watermark,
		// or where a reader stopped): list only the objects after it,
		// and go back for the one holding after+1 only if it is not
		// among them. A log listed from MaxCommit positions back costs
		// up to that many keys per read, whatever changed.
		if keys, err = d.c.listAll(ctx, d.logPrefix(part), d.logKey(part, after)); err != nil {
			return nil, 0, err
		}
		keys = d.positions(part, keys)
		if len(keys) > 0 {
			if pos, _ := d.posOf(part, keys[0].key); pos != after+1 {
				keys = nil
			}
		} else if after != applied {
			keys = nil
		} else {
			return nil, after, nil
		}
		if keys != nil {
			end = after
		}
	}
	if keys == nil {
		start := ""
		if after+1 > MaxCommit {
			start = d.logKey(part, after+1-MaxCommit)
		}
		if keys, err = d.c.listAll(ctx, d.logPrefix(part), start); err != nil {
			return nil, 0, err
		}
		keys = d.positions(part, keys)
	}
	// Only the last object named at or below after can hold after+1.
	first, below := 0, false
	for i, k := range keys {
		pos, _ := d.posOf(part, k.key)
		if pos <= after {
			first, below = i, true
		} else if below && i == first+1 && pos == after+1 {
			first, end = i, after // the object below ends at after
		}
	}
	if below && first < len(keys) && after == applied && after > 0 {
		if p, _ := d.posOf(part, keys[first].key); p <= after {
			first, end = first+1, after // it ends at the watermark
		}
	}
	read := 0
	for _, k := range keys[first:] {
		pos, _ := d.posOf(part, k.key)
		o, err := d.readLog(ctx, part, k.key, pos)
		if errors.Is(err, metastore.ErrNotFound) {
			continue // a dead object Reclaim deleted after the listing
		}
		if err != nil {
			return nil, 0, err
		}
		end = o.last()
		if o.last() <= after {
			continue
		}
		objs = append(objs, o)
		for i := range o.Entries {
			if o.First+uint64(i) > after {
				read++
			}
		}
		if limit > 0 && read >= limit {
			break
		}
	}
	return objs, end, nil
}

// readTail reads part's head, then its log after the applied position;
// withLast also reads the log's last object when it is the applied one (a
// writer needs it: its Fences guard the next object).
func (d *Driver) readTail(ctx context.Context, part string, withLast bool) (*tail, error) {
	h, etag, ok, err := d.readHead(ctx, part)
	if err != nil {
		return nil, err
	}
	return d.tailOf(ctx, part, h, etag, ok, withLast)
}

// tailOf is readTail with part's head already read (exists false: there
// is none).
func (d *Driver) tailOf(ctx context.Context, part string, h head, etag string, exists, withLast bool) (*tail, error) {
	if !exists {
		return &tail{h: h, hetag: etag, withLast: withLast}, nil
	}
	return d.tailAt(ctx, part, h, etag, withLast)
}

// tailAt is readTail with part's head already read (h, whose ETag is
// etag): the log after it.
func (d *Driver) tailAt(ctx context.Context, part string, h head, etag string, withLast bool) (*tail, error) {
	t := &tail{h: h, hetag: etag, exists: true, withLast: withLast}
	after, applied := h.Applied, h.Applied
	switch {
	case withLast && h.knownFences():
		// What a writer needs of the object ending at Applied (its
		// fences) is in the head: list and read only the objects after.
		t.base = headBase(h)
		t.last = t.base
	case withLast:
		after, applied = max(h.Applied, 1)-1, 0
		if h.Base > 0 && h.Base <= h.Applied {
			after = h.Base - 1
		}
	}
	if after == h.Applied && d.listedClean(ctx, part, etag) { // readahead.go
		return t, nil
	}
	objs, _, err := d.from(ctx, part, after, applied, 0)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		t.last = o
		if o.last() <= h.Applied {
			t.base = o
			continue
		}
		if t.blocked != nil {
			continue
		}
		pending, err := d.resolve(ctx, o) // whole.go
		if err != nil {
			return nil, err
		}
		if pending {
			t.blocked = o
			continue
		}
		t.objects = append(t.objects, o)
	}
	return t, nil
}
