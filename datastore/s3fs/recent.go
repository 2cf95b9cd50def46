package s3fs

import (
	"encoding/json"
	"time"
)

// The head carries its log's last objects (issue 31). A reader of another
// writer's partition (a sync mirroring every namespace's catalog rows, a
// pull) learns from ChangedPartitions that a head moved, reading the head,
// and then read the log objects after its position: a GET of the next one,
// and a LIST and more GETs when it was more than one commit behind. In the
// seed's loop of ten workers that was about 21 of the 74 requests of each
// sync, for catalog rows of a few hundred bytes each.
//
// The roll-forward that moves a head's watermark now also writes, in the
// same conditional replace, copies of the log's last objects up to the
// watermark (head.Recent: at most recentObjects of them, recentBytes in
// all, one after another with no gap, the last ending at the watermark). A
// reader whose position lies inside that run (after+1 at or after its first
// position) takes the changes from the copies in the head it has read and
// reads no log object; any other reader reads the log as before.
//
// Only the reader of a partition ChangedPartitions named takes them
// (ChangesFromHead), from a position past 0: ChangedPartitions settled the
// pending marks before it listed the heads, so every commit acknowledged
// before that listing is rolled into the head it read, and a read up to
// that head is what the call promises. Changes, which no such settling
// precedes, and a reader from 0, read the log after the watermark as
// before (a commit whose roll-forward failed is seen there).
//
// A copy is what the roll-forward read from the log (or what the head it
// replaced carried, itself so made), and is judged as the object would be:
// checked as a log object of its partition at its position (checkLog),
// resolved if it is a staged part, walked for stale fences, and a position
// gap or a copy that fails its check makes the reader read the log. Writers
// never take them: a commit reads its tail as before. Compaction deletes
// an object none of whose changes is a path's latest any more; a copy of it
// read later only repeats changes that a later one in the same run
// supersedes (the run ends at the watermark), which a reader keeps the
// latest of, as it does within a page. A head written without them (before
// this, by an older lake, by a repair) carries none, and readers read the
// log. lake data check compares each copy with its object while the log
// holds it, and --repair drops copies that differ.

const (
	// recentObjects bounds the copies a head carries: a reader more
	// commits behind reads the log.
	recentObjects = 16
	// recentBytes bounds their encoded size: a head is read on every
	// ChangedPartitions that finds it moved, and a commit of many files,
	// or of inline content, is better read from the log once.
	recentBytes = 16384
)

// validRecent returns h's copies if they are a run with no gap ending at
// its watermark, each a log object of part at its own position; else nil.
func (d *Driver) validRecent(part string, h head) []*logObject {
	if len(h.Recent) == 0 {
		return nil
	}
	var run []*logObject
	if json.Unmarshal(h.Recent, &run) != nil {
		return nil
	}
	n := len(run)
	if n == 0 || n > recentObjects || run[n-1] == nil || run[n-1].last() != h.Applied {
		return nil
	}
	for i, o := range run {
		if o == nil || (i > 0 && o.First != run[i-1].last()+1) {
			return nil
		}
		if checkLog(d.layout, part, o.First, o) != nil {
			return nil
		}
	}
	return run
}

// encodeRecent is a head's Recent holding run (nil for none).
func encodeRecent(run []*logObject) json.RawMessage {
	if len(run) == 0 {
		return nil
	}
	b, err := json.Marshal(run)
	if err != nil {
		return nil
	}
	return b
}

// runAfter returns the objects of run (a head's copies at watermark
// applied) after position after, if run holds every position from after+1
// to applied; ok false otherwise.
func runAfter(run []*logObject, applied, after uint64) (objs []*logObject, ok bool) {
	if after >= applied || len(run) == 0 || run[0].First > after+1 {
		return nil, false
	}
	for _, o := range run {
		if o.last() > after {
			objs = append(objs, fresh(o))
		}
	}
	return objs, true
}

// fresh returns a copy of o that readers may mark (void) without touching
// the head's.
func fresh(o *logObject) *logObject {
	c := *o
	c.void = false
	return &c
}

// nextRecent returns the copies a roll-forward from head prev to position
// target writes: prev's run (if valid) followed by the objects it rolled
// (t.objects, read from the log after prev's watermark), the last ones that
// fit, or nil when the rolled objects do not end at target.
func (d *Driver) nextRecent(part string, prev head, rolled []*logObject, target uint64) []*logObject {
	n := len(rolled)
	if n == 0 || rolled[n-1].last() != target || d.c.noRecent {
		return nil
	}
	run := d.validRecent(part, prev)
	if len(run) > 0 && rolled[0].First != run[len(run)-1].last()+1 {
		run = nil
	}
	all := append(append([]*logObject{}, run...), rolled...)
	for i := 1; i < len(all); i++ {
		if all[i].ends != 0 || all[i].First != all[i-1].last()+1 {
			all = all[i:] // a gap: only what follows it is a run
			i = 0
		}
	}
	if all[0].ends != 0 {
		return nil
	}
	// The last ones, while they fit.
	size, keep := 0, len(all)
	for keep > 0 && len(all)-keep < recentObjects {
		b, err := json.Marshal(all[keep-1])
		if err != nil || size+len(b) > recentBytes {
			break
		}
		size += len(b)
		keep--
	}
	if keep == len(all) {
		return nil
	}
	return all[keep:] // encoded as they are (void, a reader's mark, is not encoded)
}

// recentOffer is a head's run as ChangedPartitions read it, for the feed
// read of that partition that follows (ChangesFromHead), which is given
// only the head's position.
type recentOffer struct {
	applied uint64
	objs    []*logObject
}

// recentAge bounds how long an offer waits for its feed read: a reader
// reads the feeds right after ChangedPartitions.
const recentAge = 5 * time.Second

// offerRecent keeps h's run for the feed read of part up to h's watermark.
func (d *Driver) offerRecent(part string, h head) {
	run := d.validRecent(part, h)
	key := d.prefix + part
	if run == nil {
		d.c.recent.Drop(key)
		return
	}
	d.c.recent.Put(key, recentOffer{applied: h.Applied, objs: run})
}

// offeredAfter returns the objects after position after of the run that
// ChangedPartitions read in part's head at watermark applied, if it holds
// every position from after+1 to applied.
func (d *Driver) offeredAfter(part string, applied, after uint64) ([]*logObject, bool) {
	r, ok := d.c.recent.Get(d.prefix + part)
	if !ok {
		return nil, false
	}
	if r.applied != applied {
		return nil, false
	}
	return runAfter(r.objs, applied, after)
}
