package s3fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"golang.org/x/sync/errgroup"
)

// indexEntry is the value of f/PATH: the path's latest change rolled
// forward from its partition's log. It only moves to a higher position.
//
// NB: a stored format.
type indexEntry struct {
	logEntry
	Pos  uint64    `json:"pos"`
	Time time.Time `json:"time"`
}

// replaced is the value of v/VERSION and of its due-queue entry
// q/TIME/VERSION: a version of Path replaced at Time; its chunks go with its
// due-queue entry (see markReplaced). Path is empty in entries written
// before it was recorded.
type replaced struct {
	Time   time.Time `json:"time"`
	Chunks int       `json:"chunks"`
	Path   string    `json:"path,omitempty"`
}

// markReplaced hands version's chunks to Reclaim as replaced at now: first
// its entry in the due queue (q/TIME/VERSION, which Reclaim lists up to
// now minus the grace period, and which alone decides), then its marker
// (v/VERSION, by which an expired upload intent learns that its version was
// committed). Both name path, so that Reclaim can check that path no longer
// holds the version before it deletes its chunks (a queue entry is only a
// claim). Both creates are idempotent for a retry with the same now.
func (d *Driver) markReplaced(ctx context.Context, path, version string, chunks int, now time.Time) error {
	if chunks == 0 {
		// An inline or empty version has no chunks to reclaim (as on
		// bolt and DynamoDB): two PUTs saved per replaced small file.
		return nil
	}
	mark, _ := json.Marshal(replaced{Time: now.Round(0).UTC(), Chunks: chunks, Path: path})
	if _, err := d.c.create(ctx, d.dueKey(version, now), mark); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	if _, err := d.c.create(ctx, d.replacedKey(version), mark); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	return nil
}

func (d *Driver) readIndex(ctx context.Context, path string) (*indexEntry, string, error) {
	o, err := d.c.get(ctx, d.fileKey(path))
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var e indexEntry
	if err := json.Unmarshal(o.body, &e); err != nil {
		return nil, "", datastore.Damaged(d.c.bucket+"/"+d.fileKey(path), "not an index entry: %v", err)
	}
	if e.Path != path || e.Pos == 0 || (!e.Deleted && e.Version == "") {
		return nil, "", datastore.Damaged(d.c.bucket+"/"+d.fileKey(path), "not the index entry of %q (path %q, position %d)", path, e.Path, e.Pos)
	}
	return &e, o.etag, nil
}

// errHeadGone is rollForward's error when the partition's head was deleted
// under it: the partition was dropped (DropPartition) while a commit to it
// landed.
var errHeadGone = errors.New("lake: s3 head of a partition vanished (the partition was dropped)")

// rollForward applies the log objects of t after its applied position to
// the path index, then advances the partition's applied watermark. Anyone
// may roll a partition forward, any number of times: each index entry only
// moves up, and the watermark only grows, each by a conditional write.
func (d *Driver) rollForward(ctx context.Context, part string, t *tail, now time.Time) error {
	var claims []string // claims.go
	changes := false
	// An Indexed head takes the changes in its own write (headindex.go).
	indexed := t.exists && t.h.Indexed
	var counted []*logObject
	err := d.eachCounted(ctx, t, func(o *logObject) error {
		claims = append(claims, o.Claims...)
		changes = changes || len(o.Entries) > 0
		if indexed {
			counted = append(counted, o)
			return nil
		}
		return d.updateIndexes(ctx, o, t, now)
	})
	if err != nil {
		return err
	}
	if t.last == nil {
		return nil
	}
	target := t.rollTo() // not past a commit not yet decided (whole.go)
	h, etag := t.h, t.hetag
	for attempt := 0; h.Applied < target; attempt++ {
		prev := h // as read: its run, if the rolled objects follow it
		if attempt == maxCommitAttempts {
			return fmt.Errorf("%w: s3 head %q: its watermark changed under each of %d writes", metastore.ErrUnavailable, d.headKey(part), attempt)
		}
		switch {
		case h.Indexed:
			if err := d.applyToHead(ctx, &h, counted, now); err != nil {
				return err
			}
			if err := d.spillIfBig(ctx, &h, now); err != nil {
				return err
			}
		case indexed:
			// Another roll-forward moved the index out of the head
			// since it was read: these changes go to f/ as there.
			for _, o := range counted {
				if err := d.updateIndexes(ctx, o, t, now); err != nil {
					return err
				}
			}
			indexed = false
		}
		h.Applied = target
		h.Subs = addSubs(h.Subs, claims)
		h.ClaimsOnly = h.ClaimsOnly && !changes
		if n := len(t.objects); n > 0 && t.objects[n-1].last() == target {
			h.Base = t.objects[n-1].First
			h.Fences, h.FencesAt = t.objects[n-1].Fences, target
		} else {
			h.Base = 0 // unknown: writers list as without it
			h.Fences, h.FencesAt = nil, 0
		}
		// For readers: the run the head held before, if the objects
		// rolled now follow it, and those objects (recent.go).
		h.Recent = encodeRecent(d.nextRecent(part, prev, t.objects, target))
		tag, err := d.replaceHead(ctx, part, etag, h)
		if err == nil {
			if attempt == 0 && etag == t.hetag {
				t.rolled, t.rolledHead = tag, h
			}
			return nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		var ok bool
		if h, etag, ok, err = d.readHead(ctx, part); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: %q", errHeadGone, part)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return nil
}

// indexParallel bounds the index entries one roll-forward writes at once.
// Each path's entry is its own object, moved by its own conditional write,
// so the entries of different paths do not wait for each other: a commit
// of many files is rolled forward in about its size over indexParallel
// round trips instead of one after another (the requests are the same).
const indexParallel = 16

// updateIndexes moves the index entries of o's changes up to them. The
// entries of distinct paths are written in parallel; a path o names more
// than once (a log object lake did not write) has its changes applied in
// their order, each after the one before it, so the outcome is the
// sequential one: every entry moves only up, and each replaced version is
// handed to Reclaim by the write that replaced it.
func (d *Driver) updateIndexes(ctx context.Context, o *logObject, t *tail, now time.Time) error {
	type change struct {
		e    logEntry
		pos  uint64
		hint *indexHint
	}
	// rounds[k] holds each path's (k+1)th change in o: no path twice
	// in a round, and a path's changes in order across rounds. The hints
	// are taken here, as the sequential loop took them (the first change
	// of a path gets it), because t is not shared with the writers.
	var rounds [][]change
	seen := map[string]int{}
	for i, e := range o.Entries {
		k := seen[e.Path]
		seen[e.Path] = k + 1
		if k == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[k] = append(rounds[k], change{e, o.First + uint64(i), t.takeHint(e.Path)})
	}
	var mu sync.Mutex
	wrote := func(path string, h *indexHint) {
		mu.Lock()
		defer mu.Unlock()
		if t.wrote == nil {
			t.wrote = map[string]indexHint{}
		}
		if h == nil {
			delete(t.wrote, path)
		} else {
			t.wrote[path] = *h
		}
	}
	for _, round := range rounds {
		if len(round) == 1 { // no goroutine for the common one-file commit
			c := round[0]
			h, err := d.updateIndex(ctx, c.e, c.pos, o.Time, now, c.hint)
			if err != nil {
				return err
			}
			wrote(c.e.Path, h)
			continue
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(indexParallel)
		for _, c := range round {
			g.Go(func() error {
				h, err := d.updateIndex(gctx, c.e, c.pos, o.Time, now, c.hint)
				wrote(c.e.Path, h)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// updateIndex moves path's index entry up to the change at pos, and marks
// the version it replaces for Reclaim. With a hint (what this commit read
// of the entry, indexHint) its first write is conditional on that instead
// of a read. It returns the entry it wrote and its ETag (nil if it wrote
// none), a hint for the partition's next commit (handoff.go).
func (d *Driver) updateIndex(ctx context.Context, e logEntry, pos uint64, at, now time.Time, hint *indexHint) (*indexHint, error) {
	next := indexEntry{logEntry: e, Pos: pos, Time: at}
	body, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("lake: encode index entry: %v", err)
	}
	for attempt := 0; ; attempt++ {
		if attempt == maxCommitAttempts {
			return nil, fmt.Errorf("%w: s3 index entry %q changed under each of %d writes", metastore.ErrUnavailable, d.fileKey(e.Path), attempt)
		}
		var cur *indexEntry
		var etag string
		var err error
		if attempt == 0 && hint != nil {
			cur, etag = hint.e, hint.etag
		} else if cur, etag, err = d.readIndex(ctx, e.Path); err != nil {
			return nil, err
		}
		if cur != nil && cur.Pos >= pos {
			return nil, nil // already there, or further
		}
		var wrote string
		if cur == nil {
			wrote, err = d.c.create(ctx, d.fileKey(e.Path), body)
		} else {
			wrote, err = d.c.replace(ctx, d.fileKey(e.Path), etag, body)
		}
		if errors.Is(err, metastore.ErrConflict) {
			if berr := backoff(ctx, attempt); berr != nil {
				return nil, berr
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if cur != nil && !cur.Deleted && cur.Version != e.Version {
			if err := d.markReplaced(ctx, e.Path, cur.Version, cur.Chunks, now); err != nil {
				return nil, err
			}
		}
		if wrote == "" {
			return nil, nil
		}
		return &indexHint{&next, wrote}, nil
	}
}

// statTail returns the latest state of each of paths (all of t's
// partition): the newest entry of the log objects after the applied
// position, else the index entry.
func (d *Driver) statTail(ctx context.Context, t *tail, paths []string) (map[string]datastore.Info, error) {
	return d.statTailKnown(ctx, t, paths, nil, "")
}

// statVisible is statTail as a reader sees t: after the watermark, only
// the objects visibleObjects names (headcommit.go). A writer's statTail
// counts every object after it, which its own roll-forward applies first.
func (d *Driver) statVisible(ctx context.Context, t *tail, paths []string) (map[string]datastore.Info, error) {
	return d.statTailOf(ctx, t, d.visibleObjects(t), paths, nil, "")
}

// indexHint is what a commit read of a path's index entry before its
// create (its clash check): the entry (nil: absent) and its ETag. The
// roll-forward's first write of that entry is conditional on it (If-Match
// the ETag, or If-None-Match for an absent one) instead of reading the
// entry again: if the entry changed meanwhile the write fails and the
// entry is read, as before. A hint is used once (the roll-forward's own
// write makes it stale) and lives with the tail of one commit attempt.
type indexHint struct {
	e    *indexEntry
	etag string
}

// takeHint returns and forgets t's hint for path.
func (t *tail) takeHint(path string) *indexHint {
	h, ok := t.hints[path]
	if !ok {
		return nil
	}
	delete(t.hints, path)
	return &h
}

func (t *tail) hint(path string, e *indexEntry, etag string) {
	if t.hints == nil {
		t.hints = map[string]indexHint{}
	}
	t.hints[path] = indexHint{e, etag}
}

// statTailKnown is statTail; with known (the paths with an index entry
// below dir, indexKeysBelow), a path under dir that known does not name
// is absent from the index without a GET. The index entries it reads, or
// knows absent, are kept as t's hints.
func (d *Driver) statTailKnown(ctx context.Context, t *tail, paths []string, known map[string]bool, dir string) (map[string]datastore.Info, error) {
	return d.statTailOf(ctx, t, t.objects, paths, known, dir)
}

// statTailOf is statTailKnown with objs, the objects of t after its
// watermark that the stat counts.
func (d *Driver) statTailOf(ctx context.Context, t *tail, objs []*logObject, paths []string, known map[string]bool, dir string) (map[string]datastore.Info, error) {
	out := map[string]datastore.Info{}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	part := ""
	if len(paths) > 0 {
		part = d.partition(paths[0])
	}
	err := d.eachCountedOf(ctx, t, objs, func(o *logObject) error {
		for _, info := range o.infos(part) {
			if want[info.Path] {
				out[info.Path] = info
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A partition that holds only claims has no index entry to read
	// (claimsonly.go): its tail, read above, is all it holds.
	noIndex := !t.exists || t.h.ClaimsOnly
	for _, p := range paths {
		if _, ok := out[p]; ok || noIndex {
			continue
		}
		if t.h.Indexed { // the index is in the head (headindex.go)
			e, err := d.headEntry(part, t.h, p)
			if err != nil {
				return nil, err
			}
			if e != nil {
				out[p] = e.info(part, e.Pos, e.Time)
			}
			continue
		}
		if h, ok := t.hints[p]; ok {
			// Read with this tail already (by a Stat that handed it
			// to a commit: handoff.go), after the tail itself.
			if h.e != nil {
				out[p] = h.e.info(part, h.e.Pos, h.e.Time)
			}
			continue
		}
		if known != nil && strings.HasPrefix(p, dir) && !known[p] {
			t.hint(p, nil, "")
			continue
		}
		e, etag, err := d.readIndex(ctx, p)
		if err != nil {
			return nil, err
		}
		t.hint(p, e, etag)
		if e != nil {
			out[p] = e.info(part, e.Pos, e.Time)
		}
	}
	return out, nil
}
