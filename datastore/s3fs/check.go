package s3fs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

var _ datastore.Checker = (*Driver)(nil)

// Check implements datastore.Checker (lake data check) for d's namespace:
// it lists h/, l/, f/ and p/ whole and reads every head, log object and
// index entry, so it costs what the namespace holds. What it reports, and
// what --repair does:
//
//   - a key under h/, l/, f/ or p/ that names no partition, position or
//     path, and an object that is not what lake writes there (not JSON, a
//     log object naming another position or another partition's paths, an
//     index entry of another path): moved aside to x/TIME/KEY (copied,
//     then deleted conditionally) — except a damaged head or index entry,
//     which is rebuilt from the log;
//   - a log without a head (a deleted head: the partition vanished from
//     the registry and from stats): the head is created again, its floor
//     just below the log's first object (a puller behind it resyncs), and
//     the log rolled forward;
//   - commits in the log that the head or the index do not hold yet, an
//     index entry missing or behind its path's latest change in the log:
//     the partition is rolled forward (each entry only moves up);
//   - a log object whose fences name a token above what its lock record
//     holds (no holder of that lock wrote it: readers and writers ignore
//     the value, see fenceWalk): its fences are lowered to the record's
//     token;
//   - a pending mark older than the commit window: settled;
//   - with Chunks, a live file whose chunks are missing: reported only (its
//     content is lost; put it again).
func (d *Driver) Check(ctx context.Context, o datastore.CheckOptions) (datastore.CheckReport, error) {
	c := &checker{d: d, o: o, tokens: map[string]uint64{}}
	if o.Now.IsZero() {
		c.o.Now = time.Now()
	}
	if o.Repair && o.Fence != nil {
		if _, err := d.checkFence(ctx, o.Fence); err != nil {
			return c.rep, err
		}
	}
	if err := c.run(ctx); err != nil {
		return c.rep, err
	}
	return c.rep, nil
}

type checker struct {
	d      *Driver
	o      datastore.CheckOptions
	rep    datastore.CheckReport
	tokens map[string]uint64 // lock record → its token
}

// partLog is what the check read of one partition.
type partLog struct {
	head    head
	hetag   string
	hasHead bool
	damaged bool // the head is not JSON
	objs    []*logObject
	keys    []listed // of objs
	latest  map[string]datastore.Info
}

func (c *checker) obj(key string) string { return c.d.c.bucket + "/" + key }

// problem records p, and runs fix when repairing; fix's error, if any,
// leaves p unrepaired with the error in its report line.
func (c *checker) problem(ctx context.Context, key, what, fix string, repair func(context.Context) error) error {
	p := datastore.Problem{Object: c.obj(key), What: what, Fix: fix}
	if c.o.Repair && repair != nil {
		if err := repair(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			p.Fix += "; failed: " + strings.TrimPrefix(err.Error(), "lake: ")
		} else {
			p.Repaired = true
		}
	}
	if repair == nil {
		p.Fix = ""
	}
	c.rep.Problems = append(c.rep.Problems, p)
	return nil
}

// quarantine moves key aside to x/TIME/REST (REST: key below the
// namespace's prefix, or below the datastore's for a root record such as
// the namespace's registry record under r/): a conditional create of the
// copy, then a delete conditional on the ETag listed.
func (c *checker) quarantine(key, etag string) (string, func(context.Context) error) {
	rest, ok := strings.CutPrefix(key, c.d.prefix)
	if !ok {
		rest = trimPrefix(key, c.d.root)
	}
	to := c.d.prefix + "x/" + timeKey(c.o.Now) + "/" + rest
	return "move it aside to " + to, func(ctx context.Context) error {
		o, err := c.d.c.get(ctx, key)
		if err != nil {
			return err
		}
		if etag == "" {
			etag = o.etag
		}
		if _, err := c.d.c.create(ctx, to, o.body); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		return c.d.c.deleteIf(ctx, key, etag)
	}
}

// checkRegistryRecord names the registry record of the checked namespace
// when it is not one (a sync's lifecycle fails on it, every time): beside
// its heads in a "models-v4" datastore (listedrecords.go), under r/
// before. --repair moves it aside, and the namespace is then registered
// again by its next commit, with no policy until one is set again.
func (c *checker) checkRegistryRecord(ctx context.Context) error {
	d := c.d
	name, registers := d.namespaceName()
	if !registers {
		return nil
	}
	key := d.recordKey(datastore.NamespaceRecords + name)
	o, err := d.c.get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	c.rep.Objects++
	var cfg datastore.NamespaceConfig
	if json.Unmarshal(o.body, &cfg) == nil {
		return nil
	}
	fix, f := c.quarantine(key, o.etag)
	return c.problem(ctx, key, "the namespace's registry record is not one (its lifecycle policy cannot be read; set it again after the repair)", fix, f)
}

func (c *checker) run(ctx context.Context) error {
	d := c.d
	parts := map[string]*partLog{}
	get := func(p string) *partLog {
		if parts[p] == nil {
			parts[p] = &partLog{latest: map[string]datastore.Info{}}
		}
		return parts[p]
	}
	if err := c.checkRegistryRecord(ctx); err != nil {
		return err
	}
	// Heads: the registry.
	heads, err := d.c.listAll(ctx, d.prefix+"h/", "")
	if err != nil {
		return err
	}
	for _, k := range heads {
		if _, _, mark := d.pendingOf(k.key); mark && d.marksBesideHeads() {
			continue // a pending mark beside the heads: checkPending's
		}
		if d.isListedRecord(k.key) {
			continue // the namespace's registry record beside its heads: checkRegistryRecord's
		}
		part, ok := d.headPartition(k.key)
		if !ok {
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, "a key under h/ that names no partition", fix, f); err != nil {
				return err
			}
			continue
		}
		pl := get(part)
		c.rep.Objects++
		h, etag, ok, err := d.readHead(ctx, part)
		if errors.Is(err, datastore.ErrDamaged) {
			// Rebuilt from the log once the log is read, below.
			pl.hasHead, pl.hetag, pl.damaged = true, k.etag, true
			continue
		}
		if err != nil {
			return err
		}
		pl.head, pl.hetag, pl.hasHead = h, etag, ok
	}
	// Logs.
	logs, err := d.c.listAll(ctx, d.prefix+"l/", "")
	if err != nil {
		return err
	}
	for _, k := range logs {
		esc, num, _ := strings.Cut(trimPrefix(k.key, d.prefix+"l/"), "/")
		part, perr := url.PathUnescape(esc)
		var pos uint64
		ok := perr == nil && datastore.ValidatePartition(part) == nil && url.PathEscape(part) == esc
		if ok {
			pos, ok = d.posOf(part, k.key)
		}
		if !ok || strings.Contains(num, "/") {
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, "a key under l/ that names no partition's log position", fix, f); err != nil {
				return err
			}
			continue
		}
		c.rep.Objects++
		obj, err := d.readLog(ctx, part, k.key, pos)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		var de *datastore.DamageError
		if errors.As(err, &de) {
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, "not a log object of partition "+part+": "+de.Problem, fix, f); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		pl := get(part)
		pl.objs, pl.keys = append(pl.objs, obj), append(pl.keys, k)
	}
	names := make([]string, 0, len(parts))
	for p := range parts {
		names = append(names, p)
	}
	slices.Sort(names)
	c.rep.Partitions = len(names)
	for _, part := range names {
		pl := parts[part]
		if pl.damaged {
			if err := c.problem(ctx, d.headKey(part), "not a partition head", "rebuild it from the log", func(ctx context.Context) error {
				return c.rebuildHead(ctx, part, pl, pl.hetag)
			}); err != nil {
				return err
			}
			if !c.o.Repair {
				continue // its watermark is unknown: nothing more to compare
			}
		}
		if err := c.checkLog(ctx, part, pl); err != nil {
			return err
		}
	}
	if err := c.checkIndex(ctx, parts); err != nil {
		return err
	}
	if err := c.checkQueues(ctx); err != nil {
		return err
	}
	return c.checkPending(ctx)
}

// checkQueues reports keys under u/ and q/ that are not TIME/VERSION, and
// upload intents that are not JSON naming a path: Reclaim skips them.
func (c *checker) checkQueues(ctx context.Context) error {
	for _, kind := range []string{"u/", "q/"} {
		keys, err := c.d.c.listAll(ctx, c.d.prefix+kind, "")
		if err != nil {
			return err
		}
		for _, k := range keys {
			what := ""
			if _, _, ok := timedVersion(trimPrefix(k.key, c.d.prefix+kind)); !ok {
				what = "a key under " + kind + " that is not TIME/VERSION"
			} else if kind == "u/" {
				c.rep.Objects++
				o, err := c.d.c.get(ctx, k.key)
				if errors.Is(err, metastore.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				var u upload
				if json.Unmarshal(o.body, &u) != nil || datastore.ValidatePath(u.Path) != nil {
					what = "not an upload intent"
				}
			}
			if what == "" {
				continue
			}
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, what, fix, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLog checks one partition's head against its log: registered,
// rolled forward, fences no higher than their lock records.
func (c *checker) checkLog(ctx context.Context, part string, pl *partLog) error {
	d := c.d
	if len(pl.objs) > 0 && !pl.hasHead {
		if err := c.problem(ctx, d.headKey(part), fmt.Sprintf("missing: partition %q has %d log objects but no head (its files are not found by a stat, nor listed as a partition)", part, len(pl.objs)),
			"create the head again and roll the log forward", func(ctx context.Context) error { return c.rebuildHead(ctx, part, pl, "") }); err != nil {
			return err
		}
	}
	walk := newFenceWalk(d)
	walk.token = c.token // the records the check reads anyway
	// decided is the log's last position not behind a staged part of a
	// commit not yet decided (whole.go): the roll-forward stops there, and
	// nothing from it on is a path's latest change yet.
	decided := uint64(0)
	if n := len(pl.objs); n > 0 {
		decided = pl.objs[n-1].last()
	}
	blocked := false
	for i, o := range pl.objs {
		if !blocked {
			pending, err := d.resolve(ctx, o)
			if err != nil {
				return err
			}
			if blocked = pending; blocked {
				decided = o.First - 1
			}
		}
		for k, v := range o.Fences {
			tok, err := c.token(ctx, k)
			if err != nil {
				return err
			}
			if tok != 0 && v > tok { // a missing record proves nothing
				key, etag := pl.keys[i].key, pl.keys[i].etag
				if err := c.problem(ctx, key, fmt.Sprintf("names token %d of lock record %q, above the %d that record holds (no holder wrote it; readers and writers ignore the value)", v, k, tok),
					fmt.Sprintf("lower it to %d", tok), func(ctx context.Context) error { return c.lowerFence(ctx, key, etag, k, tok) }); err != nil {
					return err
				}
			}
		}
		counts, err := walk.counts(ctx, o)
		if err != nil {
			return err
		}
		if counts && !blocked {
			for _, info := range o.infos(part) {
				pl.latest[info.Path] = info
			}
		}
	}
	if pl.hasHead && pl.head.knownFences() {
		var why string
		for _, o := range pl.objs {
			if o.last() == pl.head.Applied && !maps.Equal(o.Fences, pl.head.Fences) {
				// Written by no lake (the roll-forward copies the object's
				// fences as it reads them): writers would judge the log
				// after it by the copy.
				why = fmt.Sprintf("its copy of the fences of log object %d (%v) differs from the object's (%v)", o.First, pl.head.Fences, o.Fences)
			}
		}
		for k, v := range pl.head.Fences {
			tok, err := c.token(ctx, k)
			if err != nil {
				return err
			}
			if tok != 0 && v > tok && why == "" {
				// Copied from a forged object by a roll-forward: lowering
				// the object (above) leaves the copy as it was.
				why = fmt.Sprintf("its copy of the fences of the log object it ends at names token %d of lock record %q, above the %d that record holds", v, k, tok)
			}
		}
		if why != "" {
			if err := c.problem(ctx, d.headKey(part), why, "drop the copy (writers read the object)", func(ctx context.Context) error { return c.dropHeadFences(ctx, part) }); err != nil {
				return err
			}
		}
	}
	if pl.hasHead && len(pl.head.Recent) > 0 {
		if why, err := c.recentProblem(ctx, part, pl); err != nil {
			return err
		} else if why != "" {
			if err := c.problem(ctx, d.headKey(part), why, "drop the copies (readers read the log)", func(ctx context.Context) error { return c.dropHeadRecent(ctx, part) }); err != nil {
				return err
			}
		}
	}
	if pl.hasHead && pl.head.ClaimsOnly && len(pl.latest) > 0 {
		// Written by no lake (a roll-forward of a change clears it):
		// Partitions and ChangedPartitions would not name the partition.
		if err := c.problem(ctx, d.headKey(part), "says it holds only directory claims, but its log holds changes (Partitions and ChangedPartitions leave it out)",
			"clear the mark", func(ctx context.Context) error { return c.clearClaimsOnly(ctx, part) }); err != nil {
			return err
		}
	}
	if n := len(pl.objs); n > 0 && pl.hasHead && pl.head.Applied < decided {
		last := decided
		if err := c.problem(ctx, d.headKey(part), fmt.Sprintf("applied watermark %d is below the log's last position %d: commits not rolled forward (a committer died)", pl.head.Applied, last),
			"roll the log forward", func(ctx context.Context) error { return c.rollForward(ctx, part) }); err != nil {
			return err
		}
	}
	return nil
}

// checkIndex checks every index entry against its partition's log, and
// every path's latest change in a log against the index.
func (c *checker) checkIndex(ctx context.Context, parts map[string]*partLog) error {
	d := c.d
	keys, err := d.c.listAll(ctx, d.prefix+"f/", "")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, k := range keys {
		rel := trimPrefix(k.key, d.prefix+"f/")
		path := unleaf(rel)
		if !strings.HasSuffix(rel, "~") || datastore.ValidatePath(path) != nil || leaf(path) != rel {
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, "a key under f/ that names no path", fix, f); err != nil {
				return err
			}
			continue
		}
		c.rep.Objects++
		part := c.d.partition(path)
		pl := parts[part]
		if pl != nil && pl.hasHead && pl.head.Indexed {
			// Its head holds the partition's index (headindex.go): this
			// object is no entry, what a move of the index out of the head
			// left when cut short, or another client's.
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, fmt.Sprintf("an index object of partition %q, whose index is in its head (readers ignore it)", part), fix, f); err != nil {
				return err
			}
			continue
		}
		have[path] = true
		e, _, err := d.readIndex(ctx, path)
		var de *datastore.DamageError
		if errors.As(err, &de) {
			if pl != nil {
				if _, ok := pl.latest[path]; ok {
					if err := c.problem(ctx, k.key, de.Problem, "rebuild it from the log", func(ctx context.Context) error {
						if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil {
							return err
						}
						return c.rollForwardAll(ctx, part, pl)
					}); err != nil {
						return err
					}
					continue
				}
			}
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, de.Problem+"; the log holds no change of the path to rebuild it from", fix, f); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if e == nil {
			continue
		}
		if c.o.Chunks && !e.Deleted {
			if err := c.checkChunks(ctx, k.key, e); err != nil {
				return err
			}
		}
		if pl == nil || (!pl.hasHead && len(pl.objs) == 0) {
			if err := c.problem(ctx, k.key, fmt.Sprintf("index entry of partition %q, which has no head nor log (a partly dropped partition)", part), "", nil); err != nil {
				return err
			}
			continue
		}
		if l, ok := pl.latest[path]; ok && l.Pos > e.Pos {
			if err := c.problem(ctx, k.key, fmt.Sprintf("at position %d, behind the log's latest change of the path at %d", e.Pos, l.Pos),
				"roll the log forward", func(ctx context.Context) error { return c.rollForwardAll(ctx, part, pl) }); err != nil {
				return err
			}
		}
	}
	for _, part := range slices.Sorted(maps.Keys(parts)) {
		pl := parts[part]
		if pl.hasHead && pl.head.Indexed {
			if err := c.checkHeadIndex(ctx, part, pl); err != nil {
				return err
			}
			continue
		}
		for _, path := range slices.Sorted(maps.Keys(pl.latest)) {
			l := pl.latest[path]
			if have[path] || (l.Deleted && l.Pos <= pl.head.Floor) {
				continue
			}
			if l.Deleted {
				// A tombstone whose entry is gone: what a purge leaves
				// until the floor is raised; harmless, as the path is
				// absent either way.
				continue
			}
			if err := c.problem(ctx, d.fileKey(path), fmt.Sprintf("missing: the log holds the path's latest change at position %d (version %s), the index nothing (the file is not listed)", l.Pos, l.Version),
				"rebuild it from the log", func(ctx context.Context) error { return c.rollForwardAll(ctx, part, pl) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHeadIndex checks the index an Indexed head holds (headindex.go)
// against the partition's log, as checkIndex checks index objects: each
// entry names its path, none is behind the log's latest change of its
// path, and every path whose latest change up to the head's watermark is
// live has one. The repair writes the log's latest changes into the head.
func (c *checker) checkHeadIndex(ctx context.Context, part string, pl *partLog) error {
	var why []string
	for _, path := range slices.Sorted(maps.Keys(pl.head.Files)) {
		e, err := c.d.headEntry(part, pl.head, path)
		var de *datastore.DamageError
		switch {
		case errors.As(err, &de):
			why = append(why, de.Problem)
			continue
		case err != nil:
			return err
		}
		c.rep.Objects++
		if c.o.Chunks && !e.Deleted {
			if err := c.checkChunks(ctx, c.d.headKey(part), e); err != nil {
				return err
			}
		}
		if l, ok := pl.latest[path]; ok && l.Pos > e.Pos && l.Pos <= pl.head.Applied {
			why = append(why, fmt.Sprintf("its index entry of %q at position %d is behind the log's latest change of the path at %d", path, e.Pos, l.Pos))
		}
	}
	for _, path := range slices.Sorted(maps.Keys(pl.latest)) {
		l := pl.latest[path]
		if _, ok := pl.head.Files[path]; ok || l.Deleted || l.Pos > pl.head.Applied {
			continue
		}
		why = append(why, fmt.Sprintf("its index holds no entry of %q, whose latest change in the log is at position %d (version %s): the file is not listed", path, l.Pos, l.Version))
	}
	if len(why) == 0 {
		return nil
	}
	return c.problem(ctx, c.d.headKey(part), strings.Join(why, "; "), "rebuild the head's index from the log", func(ctx context.Context) error {
		return c.rebuildHeadIndex(ctx, part, pl)
	})
}

// rebuildHeadIndex rewrites the entries of part's Indexed head that the
// log's latest changes up to its watermark contradict, then rolls the log
// forward.
func (c *checker) rebuildHeadIndex(ctx context.Context, part string, pl *partLog) error {
	h, etag, ok, err := c.d.readHead(ctx, part)
	if err != nil || !ok || !h.Indexed {
		return err
	}
	files := maps.Clone(h.Files)
	if files == nil {
		files = map[string]indexEntry{}
	}
	for path, e := range files {
		if e.Path != path || e.Pos == 0 || (!e.Deleted && e.Version == "") {
			delete(files, path)
		}
	}
	for path, l := range pl.latest {
		if l.Pos > h.Applied {
			continue
		}
		if e, ok := files[path]; ok && e.Pos >= l.Pos {
			continue
		}
		files[path] = indexEntry{logEntry: changeOf(l), Pos: l.Pos, Time: l.Time}
	}
	h.Files = files
	if _, err := c.d.replaceHead(ctx, part, etag, h); err != nil {
		return err
	}
	return c.rollForward(ctx, part)
}

// checkChunks reports a live entry whose chunks are not all there.
func (c *checker) checkChunks(ctx context.Context, key string, e *indexEntry) error {
	got, err := c.d.c.listAll(ctx, c.d.chunkPrefix(e.Version), "")
	if err != nil {
		return err
	}
	if len(got) < e.Chunks {
		return c.problem(ctx, key, fmt.Sprintf("version %s has %d of its %d chunks: its content is lost (put the file again)", e.Version, len(got), e.Chunks), "", nil)
	}
	return nil
}

// checkPending reports pending marks older than the commit window.
func (c *checker) checkPending(ctx context.Context) error {
	if c.d.marksBesideHeads() {
		// No writer of this datastore's format marks under p/: whatever
		// is there was written by something else (nothing reads it).
		stray, err := c.d.c.listAll(ctx, c.d.prefix+"p/", "")
		if err != nil {
			return err
		}
		for _, k := range stray {
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, "a key under p/ in a datastore that keeps its pending marks beside the heads (layout models-v2 or later)", fix, f); err != nil {
				return err
			}
		}
	}
	keys, err := c.d.c.listAll(ctx, c.d.pendingPrefix(), "")
	if err != nil {
		return err
	}
	settle := true
	for _, k := range keys {
		if _, _, ok := c.d.pendingOf(k.key); !ok && c.d.marksBesideHeads() {
			continue // a head, or a stray key the heads' check reported
		} else if !ok {
			fix, f := c.quarantine(k.key, k.etag)
			if err := c.problem(ctx, k.key, "a key under p/ that is not PARTITION/POSITION", fix, f); err != nil {
				return err
			}
			continue
		}
		if !settle || c.d.c.clock.now().Sub(k.mod) <= c.d.window {
			continue
		}
		if err := c.problem(ctx, k.key, "a pending commit mark older than the commit window", "settle it (roll its partition forward, delete the mark)", c.d.settlePending); err != nil {
			return err
		}
		settle = false // one settle covers every mark
	}
	return nil
}

// token returns the token lock record key holds (0: none or not a lock
// record, which orders nothing).
func (c *checker) token(ctx context.Context, key string) (uint64, error) {
	if t, ok := c.tokens[key]; ok {
		return t, nil
	}
	t, err := c.d.recordToken(ctx, key)
	if err != nil {
		return 0, err
	}
	c.tokens[key] = t
	return t, nil
}

// lowerFence rewrites the log object at key (if still etag) with lock k's
// fence at most tok.
func (c *checker) lowerFence(ctx context.Context, key, etag, k string, tok uint64) error {
	o, err := c.d.c.get(ctx, key)
	if err != nil {
		return err
	}
	if o.etag != etag {
		return metastore.Conflict(key, "changed since the check read it")
	}
	var l logObject
	if err := json.Unmarshal(o.body, &l); err != nil {
		return err
	}
	l.Fences[k] = min(l.Fences[k], tok)
	if l.Fence != nil && l.Fence.Key == k && l.Fence.Token > tok {
		l.Fence.Token = tok
	}
	body, _ := json.Marshal(&l)
	if bytes.Equal(body, o.body) {
		return nil
	}
	_, err = c.d.c.replace(ctx, key, etag, body)
	return err
}

// rebuildHead writes part's head from its log: applied below the first
// object, so the whole log is rolled forward again (each index entry only
// moves up), floor just below it. etag is the damaged head's ("" if none).
func (c *checker) rebuildHead(ctx context.Context, part string, pl *partLog, etag string) error {
	h := head{Indexed: c.d.headIndexes()}
	if len(pl.objs) > 0 {
		h.Applied = pl.objs[0].First - 1
		h.Floor = h.Applied
	}
	body, _ := json.Marshal(h)
	var err error
	if etag == "" {
		_, err = c.d.c.create(ctx, c.d.headKey(part), body)
	} else {
		_, err = c.d.c.replace(ctx, c.d.headKey(part), etag, body)
	}
	if err != nil {
		return err
	}
	pl.hasHead, pl.head = true, h
	if err := c.rollForward(ctx, part); err != nil {
		return err
	}
	if n := len(pl.objs); n > 0 {
		pl.head.Applied = pl.objs[n-1].last() // rolled forward just now
	}
	return nil
}

// rollForward rolls part's log after its head's watermark forward.
func (c *checker) rollForward(ctx context.Context, part string) error {
	t, err := c.d.readTail(ctx, part, false)
	if err != nil {
		return err
	}
	return c.d.rollForward(ctx, part, t, c.o.Now)
}

// rollForwardAll rolls every object of part's log into the index again
// (index entries missing or behind the log), then the tail.
func (c *checker) rollForwardAll(ctx context.Context, part string, pl *partLog) error {
	for _, info := range pl.latest {
		if _, err := c.d.updateIndex(ctx, changeOf(info), info.Pos, info.Time, c.o.Now, nil); err != nil {
			return err
		}
	}
	return c.rollForward(ctx, part)
}

// changeOf is the log entry of the change info states (a path's latest
// change as the log holds it), as the roll-forward writes it in the index.
func changeOf(info datastore.Info) logEntry {
	return logEntry{Path: info.Path, Deleted: info.Deleted, Version: info.Version, Size: info.Size, Chunks: info.Chunks,
		SHA256: info.SHA256, Meta: info.Meta, Inline: info.Inline}
}

// recentProblem says what is wrong with the copies of its last log objects
// that part's head carries (recent.go), or "": readers would take a copy
// that is not a run ending at the watermark for nothing, but one that
// differs from its object while the log holds it, or names a token above
// its lock record's (copied from a forged object, which lowering the
// object leaves as it was), would be read as changes that are not the
// log's.
func (c *checker) recentProblem(ctx context.Context, part string, pl *partLog) (string, error) {
	run := c.d.validRecent(part, pl.head)
	if run == nil {
		return "its copies of the log's last objects are not a run of objects of this partition ending at its watermark (readers ignore them)", nil
	}
	byFirst := map[uint64]*logObject{}
	for _, o := range pl.objs {
		byFirst[o.First] = o
	}
	for _, cp := range run {
		if o, ok := byFirst[cp.First]; ok {
			a, _ := json.Marshal(cp)
			b, _ := json.Marshal(o)
			if !bytes.Equal(a, b) {
				return fmt.Sprintf("its copy of log object %d differs from the object", cp.First), nil
			}
		}
		for k, v := range cp.Fences {
			tok, err := c.token(ctx, k)
			if err != nil {
				return "", err
			}
			if tok != 0 && v > tok {
				return fmt.Sprintf("its copy of log object %d names token %d of lock record %q, above the %d that record holds", cp.First, v, k, tok), nil
			}
		}
	}
	return "", nil
}

// dropHeadRecent removes part's head's copies of its last log objects.
func (c *checker) dropHeadRecent(ctx context.Context, part string) error {
	h, etag, ok, err := c.d.readHead(ctx, part)
	if err != nil || !ok || len(h.Recent) == 0 {
		return err
	}
	h.Recent = nil
	_, err = c.d.replaceHead(ctx, part, etag, h)
	return err
}

// clearClaimsOnly clears part's head's claims-only mark, conditional on
// the head as read now.
// dropHeadFences removes part's head's copy of its last object's fences.
func (c *checker) dropHeadFences(ctx context.Context, part string) error {
	h, etag, ok, err := c.d.readHead(ctx, part)
	if err != nil || !ok || h.FencesAt == 0 {
		return err
	}
	h.Fences, h.FencesAt = nil, 0
	_, err = c.d.replaceHead(ctx, part, etag, h)
	return err
}

func (c *checker) clearClaimsOnly(ctx context.Context, part string) error {
	h, etag, ok, err := c.d.readHead(ctx, part)
	if err != nil || !ok || !h.ClaimsOnly {
		return err
	}
	h.ClaimsOnly = false
	_, err = c.d.replaceHead(ctx, part, etag, h)
	return err
}

// ChecksRegistryRecord implements datastore.RegistryChecker: Check names a
// registry record that is not one (checkRegistryRecord).
func (d *Driver) ChecksRegistryRecord() bool { return true }
