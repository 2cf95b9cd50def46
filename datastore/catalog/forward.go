package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// forwardPages bounds the pages of changes a row is brought forward over
// (each of up to datastore.MaxListLimit changes): past it the listing is
// as cheap, and the loop must end.
const forwardPages = 4

// forward brings prev, a model's row as of its position prev.Pos, forward
// over the changes of the model's partition since then, up to at least
// head: one read of the feed instead of a listing of the whole model and a
// read of its definition. The result is exactly the row a listing would
// build (buildRow) or, when that cannot be proved from what is at hand,
// reason says why and the caller lists the model instead.
//
// What a change does not carry is the state it replaced: the feed keeps
// each path's latest change only (and a tombstone carries no size). A
// changed path's share of prev is known when
//   - before holds its state, read from the store at a time after prev
//     was written (Fold's Before: see FoldOptions), at a position at or
//     below prev.Pos (so prev saw that very state);
//   - or prev cannot have counted it: a path in an entry version prev
//     does not have, or a file directly under the model when prev counts
//     none there.
//
// Every other case falls back to the listing; each says why below.
//
// own are the entries of the caller's own commit in the model's partition
// (FoldOptions.Committed), sorted by position: when they are the
// partition's changes since prev up to head (committedSince), the feed is
// not read, and fromOwn says so.
func forward(ctx context.Context, ns *datastore.Store, model string, head uint64, prev Row, before map[string]datastore.Info, own []datastore.Info) (_ Row, _ string, fromOwn bool, _ error) {
	// A row that omitted its entries has no per-version figures to
	// bring forward.
	if prev.EntriesOmitted > 0 {
		return Row{}, "the row omitted its entries", false, nil
	}
	// An orphaned row's definition is a tombstone that Reclaim may purge
	// with no change in the feed, which changes the row the listing builds
	// (its time no longer counts in Updated): read the definition, list.
	if prev.State != Live && prev.State != Undefined {
		return Row{}, "the model is " + prev.State, false, nil
	}
	// A row of no file only stays while orphaned; and its Updated was
	// the time of the fold, not of a file.
	if prev.Files <= 0 || prev.Updated.IsZero() {
		return Row{}, "the row counts no file", false, nil
	}
	changes, upTo, ok := committedSince(own, model, prev.Pos, head)
	fromOwn = ok
	if !ok {
		var reason string
		var err error
		changes, upTo, reason, err = changesSince(ctx, ns, model, prev.Pos, head)
		if err != nil || reason != "" {
			return Row{}, reason, false, err
		}
	}

	// The row's figures, taken apart: its versions, and what it counts
	// directly under the model (the definition and other files there).
	type vkey struct{ entry, version string }
	type vstate struct {
		v Version
		// base is prev's latest position of the version; removedLatest
		// says a file at that position left (the new latest is then
		// unknown unless a change lands in the version); added is the
		// latest position of a change that lands in it.
		base          uint64
		removedLatest bool
		added         uint64
	}
	vers := map[vkey]*vstate{}
	var entryFiles int
	var entryBytes int64
	for _, e := range prev.Entries {
		for _, v := range e.Versions {
			k := vkey{e.Name, v.Name}
			if vers[k] != nil || v.Files <= 0 || v.Bytes < 0 {
				return Row{}, "the row's versions do not add up", false, nil
			}
			vers[k] = &vstate{v: v, base: v.Pos}
			entryFiles += v.Files
			entryBytes += v.Bytes
		}
	}
	directFiles, directBytes := prev.Files-entryFiles, prev.Bytes-entryBytes
	if directFiles < 0 || directBytes < 0 {
		return Row{}, "the row's figures do not add up", false, nil
	}

	r := Row{Namespace: prev.Namespace, Model: model, State: prev.State, Created: prev.Created,
		Deleted: prev.Deleted, Files: prev.Files, Bytes: prev.Bytes, Pos: upTo}
	prefix := datastore.ModelPrefix + model + "/"
	defPath := DefinitionPath(model)
	var latest time.Time   // the latest time a change brings into Updated
	var removedLatest bool // a file at prev's Updated (or unknown) left
	for _, c := range changes {
		// The feed is the partition's: a change outside it would be a
		// driver's or a foreign writer's error.
		if !strings.HasPrefix(c.Path, prefix) || ns.Partition(c.Path) != model {
			return Row{}, fmt.Sprintf("the change of %s is not the model's", c.Path), false, nil
		}
		rest := c.Path[len(prefix):]
		name, after, inEntry := strings.Cut(rest, "/")
		ver, _, _ := strings.Cut(after, "/")
		k := vkey{name, ver}

		// old: the path's state in prev (nil: prev did not count it).
		var old *datastore.Info
		if b, ok := before[c.Path]; ok {
			if b.Pos > prev.Pos {
				// Changed after the row's position, before the read:
				// prev may have counted this state or an earlier one.
				return Row{}, fmt.Sprintf("%s changed after the row's position", c.Path), false, nil
			}
			if !b.Deleted {
				old = &b
			}
		} else if (inEntry && vers[k] != nil) || (!inEntry && directFiles > 0) {
			return Row{}, fmt.Sprintf("the row's share of %s is unknown", c.Path), false, nil
		}
		if old != nil {
			r.Files--
			r.Bytes -= old.Size
			if inEntry {
				vs := vers[k]
				if vs == nil {
					return Row{}, fmt.Sprintf("the row has no version of %s", c.Path), false, nil
				}
				vs.v.Files--
				vs.v.Bytes -= old.Size
				if old.Pos >= vs.base {
					vs.removedLatest = true
				}
			} else {
				directFiles--
				directBytes -= old.Size
			}
			if !old.Time.Before(prev.Updated) {
				removedLatest = true
			}
		}
		if c.Path == defPath {
			// The definition's time counts in Updated even when it is
			// a tombstone (buildRow's def).
			latest = later(latest, c.Time)
			if c.Deleted {
				r.State, r.Deleted = Orphaned, c.Time.UTC()
			} else {
				r.State, r.Deleted = Live, time.Time{}
			}
		}
		if c.Deleted {
			continue
		}
		r.Files++
		r.Bytes += c.Size
		latest = later(latest, c.Time)
		if !inEntry {
			directFiles++
			directBytes += c.Size
			continue
		}
		vs := vers[k]
		if vs == nil {
			vs = &vstate{v: Version{Name: ver}}
			vers[k] = vs
		}
		vs.v.Files++
		vs.v.Bytes += c.Size
		vs.added = max(vs.added, c.Pos)
	}
	if directFiles < 0 || directBytes < 0 || r.Files < 0 || r.Bytes < 0 {
		return Row{}, "the figures do not add up", false, nil
	}
	// A model left with no file is removed, or kept orphaned with the
	// fold's time: the listing decides, on the definition it reads.
	if r.Files == 0 {
		return Row{}, "no file is left", false, nil
	}
	switch {
	case !latest.IsZero() && !latest.Before(prev.Updated):
		// Every file prev counted is no later than prev.Updated.
		r.Updated = latest.UTC()
	case removedLatest:
		// The file that was the latest may have left: the new latest
		// is one prev does not name.
		return Row{}, "the latest file left", false, nil
	default:
		// The file at prev.Updated is still there.
		r.Updated = prev.Updated.UTC()
	}

	byEntry := map[string][]Version{}
	for k, vs := range vers {
		switch {
		case vs.v.Files < 0 || vs.v.Bytes < 0 || (vs.v.Files == 0 && vs.v.Bytes != 0):
			return Row{}, "a version's figures do not add up", false, nil
		case vs.v.Files == 0:
			continue // the version is gone
		case vs.added > 0:
			// A change landed in it: its position is above every
			// position prev holds (they are at most prev.Pos).
			vs.v.Pos = vs.added
		case vs.removedLatest:
			return Row{}, "a version's latest file left", false, nil
		default:
			vs.v.Pos = vs.base
		}
		byEntry[k.entry] = append(byEntry[k.entry], vs.v)
	}
	for name, vs := range byEntry {
		slices.SortFunc(vs, func(a, b Version) int { return cmpPos(a.Pos, b.Pos, a.Name, b.Name) })
		r.Entries = append(r.Entries, Entry{Name: name, Versions: vs})
	}
	slices.SortFunc(r.Entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return r, "", fromOwn, nil
}

// fresh builds the row of a model that has none from its partition's
// whole feed, from position 0 up to at least head, instead of a listing:
// the feed keeps each path's latest change, so its live changes are the
// model's files and its definition's change (a tombstone included) is what
// a read of the definition returns, unless tombstones were purged, which
// the feed reports (ErrCursorExpired) and the caller then lists. On S3 a
// listing is a GET of every file's index entry; the feed of a model a
// commit just began is the commit's own log object. reason is set when the
// feed cannot give the model whole.
//
// own are the caller's own commit's entries in the model's partition, as
// forward takes them: when they are the partition's whole feed up to head
// (a model the commit began), the feed is not read, and fromOwn says so.
func fresh(ctx context.Context, ns *datastore.Store, model string, head uint64, now time.Time, own []datastore.Info) (_ Row, _ string, fromOwn bool, _ error) {
	changes, upTo, fromOwn := committedSince(own, model, 0, head)
	if !fromOwn {
		var reason string
		var err error
		if changes, upTo, reason, err = changesSince(ctx, ns, model, 0, head); err != nil || reason != "" {
			return Row{}, reason, false, err
		}
	}
	prefix := datastore.ModelPrefix + model + "/"
	defPath := DefinitionPath(model)
	var files []datastore.Info
	var def *datastore.Info
	for _, c := range changes {
		if !strings.HasPrefix(c.Path, prefix) || ns.Partition(c.Path) != model {
			return Row{}, fmt.Sprintf("the change of %s is not the model's", c.Path), false, nil
		}
		if c.Path == defPath {
			d := c
			def = &d
		}
		if !c.Deleted {
			files = append(files, c)
		}
	}
	if len(files) == 0 {
		// No row to write, or an orphaned one of no file: the listing
		// decides, as it did.
		return Row{}, "no file is live", false, nil
	}
	return buildRow(ns.NamespaceName(), model, files, def, nil, upTo, now), "", fromOwn, nil
}

// ownChanges groups what a commit applied (FoldOptions.Committed) by
// partition, each sorted by position.
func ownChanges(committed []datastore.Info) map[string][]datastore.Info {
	if len(committed) == 0 {
		return nil
	}
	out := map[string][]datastore.Info{}
	for _, c := range committed {
		out[c.Partition] = append(out[c.Partition], c)
	}
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b datastore.Info) int { return cmpPos(a.Pos, b.Pos, a.Path, b.Path) })
	}
	return out
}

// committedSince returns own, the entries of one commit in partition
// sorted by position, as the partition's changes after position after up
// to head (sorted by path, as changesSince returns them), when they are
// exactly those: the commit's first position is after+1, its last is
// head, and its positions follow each other. Positions in a partition are
// unique, so every position in (after, head] is then the commit's, and a
// commit names each path once: the feed's latest change of each path in
// that range is the commit's entry. Otherwise ok is false and the caller
// reads the feed (another writer committed before or after the commit, or
// the row is not at the position right before it).
func committedSince(own []datastore.Info, partition string, after, head uint64) (_ []datastore.Info, _ uint64, ok bool) {
	if len(own) == 0 || own[0].Pos != after+1 || own[len(own)-1].Pos != head {
		return nil, 0, false
	}
	seen := make(map[string]bool, len(own))
	for i, c := range own {
		if c.Pos != after+1+uint64(i) || c.Partition != partition || seen[c.Path] {
			return nil, 0, false
		}
		seen[c.Path] = true
	}
	out := slices.Clone(own)
	slices.SortFunc(out, func(a, b datastore.Info) int { return strings.Compare(a.Path, b.Path) })
	return out, head, true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// changesSince reads the changes of partition after position after, up to
// at least head, each path's latest only; reason is set when the feed
// cannot give them and the caller must list instead.
func changesSince(ctx context.Context, ns *datastore.Store, partition string, after, head uint64) ([]datastore.Info, uint64, string, error) {
	latest := map[string]datastore.Info{}
	pos := after
	if planning(ctx) {
		return nil, 0, "", errWouldRead // plan.go
	}
	for range forwardPages {
		cs, upTo, err := ns.Changes(ctx, partition, pos, datastore.MaxListLimit)
		if errors.Is(err, metastore.ErrCursorExpired) || errors.Is(err, metastore.ErrInvalidArgument) {
			// Tombstones after the row's position may be purged
			// (ErrHorizon), or the position is beyond the head (a
			// partition dropped and begun again): only a listing is
			// sure.
			return nil, 0, "the feed cannot give the changes since the row: " + err.Error(), nil
		}
		if err != nil {
			return nil, 0, "", err
		}
		for _, c := range cs {
			if c.Pos <= after {
				return nil, 0, "the feed gave a change at or before the row's position", nil
			}
			latest[c.Path] = c // a later page's change of a path is newer
		}
		if upTo >= head {
			out := make([]datastore.Info, 0, len(latest))
			for _, c := range latest {
				out = append(out, c)
			}
			slices.SortFunc(out, func(a, b datastore.Info) int { return strings.Compare(a.Path, b.Path) })
			return out, upTo, "", nil
		}
		if upTo <= pos {
			// A commit not yet decided holds the feed back (S3): the
			// listing of what is decided does not wait for it.
			return nil, 0, "the feed stops before the partition's head", nil
		}
		pos = upTo
	}
	return nil, 0, "too many changes since the row", nil
}
