package s3fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
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
	walk := d.tailWalk(t)
	for _, o := range t.objects {
		counts, err := walk.counts(ctx, o)
		if err != nil {
			return err
		}
		if counts {
			for i, e := range o.Entries {
				if err := d.updateIndex(ctx, e, o.First+uint64(i), o.Time, now); err != nil {
					return err
				}
			}
		}
	}
	if t.last == nil {
		return nil
	}
	target := t.rollTo() // not past a commit not yet decided (whole.go)
	h, etag := t.h, t.hetag
	for attempt := 0; h.Applied < target; attempt++ {
		if attempt == maxCommitAttempts {
			return fmt.Errorf("%w: s3 head %q: its watermark changed under each of %d writes", metastore.ErrUnavailable, d.headKey(part), attempt)
		}
		h.Applied = target
		body, _ := json.Marshal(h)
		_, err := d.c.replace(ctx, d.headKey(part), etag, body)
		if err == nil {
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

// updateIndex moves path's index entry up to the change at pos, and marks
// the version it replaces for Reclaim.
func (d *Driver) updateIndex(ctx context.Context, e logEntry, pos uint64, at, now time.Time) error {
	next := indexEntry{logEntry: e, Pos: pos, Time: at}
	body, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("lake: encode index entry: %v", err)
	}
	for attempt := 0; ; attempt++ {
		if attempt == maxCommitAttempts {
			return fmt.Errorf("%w: s3 index entry %q changed under each of %d writes", metastore.ErrUnavailable, d.fileKey(e.Path), attempt)
		}
		cur, etag, err := d.readIndex(ctx, e.Path)
		if err != nil {
			return err
		}
		if cur != nil && cur.Pos >= pos {
			return nil // already there, or further
		}
		if cur == nil {
			_, err = d.c.create(ctx, d.fileKey(e.Path), body)
		} else {
			_, err = d.c.replace(ctx, d.fileKey(e.Path), etag, body)
		}
		if errors.Is(err, metastore.ErrConflict) {
			if berr := backoff(ctx, attempt); berr != nil {
				return berr
			}
			continue
		}
		if err != nil {
			return err
		}
		if cur != nil && !cur.Deleted && cur.Version != e.Version {
			if err := d.markReplaced(ctx, e.Path, cur.Version, cur.Chunks, now); err != nil {
				return err
			}
		}
		return nil
	}
}

// statTail returns the latest state of each of paths (all of t's
// partition): the newest entry of the log objects after the applied
// position, else the index entry.
func (d *Driver) statTail(ctx context.Context, t *tail, paths []string) (map[string]datastore.Info, error) {
	out := map[string]datastore.Info{}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	part := ""
	if len(paths) > 0 {
		part = d.partition(paths[0])
	}
	walk := d.tailWalk(t)
	for _, o := range t.objects {
		counts, err := walk.counts(ctx, o)
		if err != nil {
			return nil, err
		}
		if counts {
			for _, info := range o.infos(part) {
				if want[info.Path] {
					out[info.Path] = info
				}
			}
		}
	}
	for _, p := range paths {
		if _, ok := out[p]; ok || !t.exists {
			continue
		}
		e, _, err := d.readIndex(ctx, p)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out[p] = e.info(part, e.Pos, e.Time)
		}
	}
	return out, nil
}
