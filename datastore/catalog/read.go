package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lakemeta/lake/datastore"
)

// Cursor is a reader's position in the catalog: the catalog's
// ChangedPartitions cursor and, per namespace, the position of its rows'
// feed. The zero Cursor is the beginning.
type Cursor struct {
	Feed      string            `json:"feed,omitempty"`
	Positions map[string]uint64 `json:"positions,omitempty"`
}

// CatalogCursorOver returns c moved past the fold's own catalog commit
// (FoldStats.Applied), for a reader that applied the fold's Written and
// Gone itself: when the catalog store proves that nothing else moved its
// index since this process last read it at c.Feed
// (datastore.CursorAdvancer) and c's positions already hold the commit's
// (a caller advanced them over FoldStats.Committed). ok false: c as it
// is, and the next Read reads the commit back.
func CatalogCursorOver(store *datastore.Store, c Cursor, applied []datastore.Info) (Cursor, bool) {
	cat, err := store.CatalogStore()
	if err != nil || c.Feed == "" {
		return c, false
	}
	heads, next, ok := cat.ChangedPartitionsOver(c.Feed, applied)
	if !ok {
		return c, false
	}
	for _, h := range heads {
		if c.Positions[h.Partition] < h.Seq {
			return c, false
		}
	}
	c.Feed = next
	return c, true
}

// Change is one change of the catalog: a model's new row, or its removal
// (the model was pruned, or left with no file).
type Change struct {
	Namespace, Model string
	// Removed marks a removal; Row is then zero.
	Removed bool
	Row     Row
}

// Changes is what Read returned.
type Changes struct {
	Changes []Change
	// Reset names the namespaces whose rows were read whole (a reader
	// below the catalog's tombstone horizon): a mirror drops its other
	// rows of those namespaces.
	Reset []string
	// Read counts the catalog entries read.
	Read int
	// Skipped names the entries left out: ones no lake client writes.
	Skipped []Skip
}

// Skip is a catalog entry Read left out because no lake client writes it
// (a foreign writer's, or a damaged one): a partition of the catalog scope
// whose name is not a namespace's, a path that names no model, a row filed
// in another namespace's partition, a row that does not decode or names
// another model than its path. One such entry must not stop every sync of
// every namespace, which each read the catalog; it is named, so that it
// can be deleted in the backend, and never mirrored.
type Skip struct {
	// Entry names it: `catalog partition "NAME"`, or the row's path.
	Entry string
	// Why says what is wrong, and the way out.
	Why string
}

// String is the skip as a sync prints it after "skipped ".
func (s Skip) String() string { return s.Entry + ": " + s.Why }

// foreign is the way out a Skip names when lake cannot delete the entry.
const foreign = "a foreign writer's entry, never mirrored (delete it in the backend)"

// rowChange returns the change info records in the feed of namespace
// ns's partition, or a Skip if no lake client writes such an entry.
func rowChange(ns string, info datastore.Info) (Change, *Skip) {
	ch, why, deletable := rowEntry(ns, info)
	if why == "" {
		return ch, nil
	}
	out := foreign
	if deletable {
		out = fmt.Sprintf("a foreign writer's entry, never mirrored (lake data check --catalog --repair --namespace %s deletes it)", ns)
	}
	return Change{}, &Skip{info.Path, why + ": " + out}
}

// rowEntry returns the change info records in the feed of namespace ns's
// partition, or why no lake client writes such an entry, and whether lake
// can delete it (CheckRows: a valid path of ns's own partition).
func rowEntry(ns string, info datastore.Info) (ch Change, why string, deletable bool) {
	nsName, model, ok := parseRowPath(info.Path)
	deletable = nsName == ns && datastore.ValidatePath(info.Path) == nil && datastore.ValidateNamespace(ns) == nil
	switch {
	case !ok:
		return Change{}, "names no model", deletable
	case nsName != ns:
		return Change{}, fmt.Sprintf("is filed in namespace %q's partition", ns), false
	case info.Deleted:
		return Change{Namespace: nsName, Model: model, Removed: true}, "", false
	}
	r, err := decodeRow(info)
	if err != nil {
		return Change{}, fmt.Sprintf("is not a catalog row (%v)", err), deletable
	}
	if r.Namespace != nsName || r.Model != model {
		return Change{}, fmt.Sprintf("holds the row of %s/%s", r.Namespace, r.Model), deletable
	}
	return Change{Namespace: nsName, Model: model, Row: r}, "", false
}

// readPage is the most changes Read asks a namespace's feed for at once.
const readPage = 1000

// Read returns the catalog's changes since c, in every namespace, and the
// cursor to pass next time: one ChangedPartitions call, then the feed of
// each namespace whose rows changed, from its own position, and on
// DynamoDB one read of their floors (Store.ChangesOfHeads). What it reads
// grows with what changed since c, never with the size of the catalog.
func Read(ctx context.Context, store *datastore.Store, c Cursor) (Changes, Cursor, error) {
	var out Changes
	cat, err := store.CatalogStore()
	if err != nil {
		return out, c, err
	}
	next := Cursor{Feed: c.Feed, Positions: maps.Clone(c.Positions)}
	if next.Positions == nil {
		next.Positions = map[string]uint64{}
	}
	heads, feed, err := cat.ChangedPartitions(ctx, c.Feed)
	if err != nil {
		return out, c, err
	}
	valid := heads[:0:0]
	for _, h := range heads {
		if err := datastore.ValidatePartition(h.Partition); err != nil {
			out.Skipped = append(out.Skipped, Skip{fmt.Sprintf("catalog partition %q", h.Partition), "is not a namespace's: " + foreign})
			continue
		}
		valid = append(valid, h)
	}
	heads = valid
	// Every changed namespace's first page in one pass: its feed read up
	// to the head just listed, the floors checked once after them all.
	first, err := cat.ChangesOfHeads(ctx, heads, next.Positions, readPage)
	if err != nil {
		return out, c, err
	}
	for _, h := range heads {
		ns := h.Partition
		page, ok := first[ns]
		if !ok {
			continue // not past the position read
		}
		var after uint64
		for {
			if page.Horizon {
				files, err := cat.ListAll(ctx, ns+"/")
				if err != nil {
					return out, c, err
				}
				out.Reset = append(out.Reset, ns)
				page.Changes = files // every live row: the reset's changes
				after = h.Seq
			}
			for _, info := range page.Changes {
				out.Read++
				ch, skip := rowChange(ns, info)
				if skip != nil {
					out.Skipped = append(out.Skipped, *skip)
					continue
				}
				out.Changes = append(out.Changes, ch)
			}
			if page.Horizon {
				break
			}
			after = page.UpTo
			if len(page.Changes) < readPage {
				break
			}
			ch, upTo, err := cat.Changes(ctx, ns, after, readPage)
			if errors.Is(err, datastore.ErrHorizon) {
				page = datastore.HeadChanges{Horizon: true}
				continue
			}
			if err != nil {
				return out, c, err
			}
			page = datastore.HeadChanges{Changes: ch, UpTo: upTo}
		}
		next.Positions[ns] = after
	}
	next.Feed = feed
	return out, next, nil
}

// All returns every row of namespace ("" for every namespace), sorted: the
// whole catalog, for a person or a full export. It costs what the catalog
// holds. The entries no lake client writes are left out and returned as
// Read names them (Skip).
func All(ctx context.Context, store *datastore.Store, namespace string) ([]Row, []Skip, error) {
	cat, err := store.CatalogStore()
	if err != nil {
		return nil, nil, err
	}
	prefix := ""
	if namespace != "" {
		prefix = namespace + "/"
	}
	files, err := cat.ListAll(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	rows := make([]Row, 0, len(files))
	var skipped []Skip
	for _, f := range files {
		ns, _, _ := parseRowPath(f.Path)
		ch, skip := rowChange(ns, f)
		if skip != nil {
			skipped = append(skipped, *skip)
			continue
		}
		rows = append(rows, ch.Row)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	return rows, skipped, nil
}

// Remove deletes the row of namespace's model (after the model was
// pruned), fenced by fence, and returns what its commit applied to the
// catalog store (nothing if the model had no row), as Commit returns it:
// a reader that removes the row from its copy moves its cursor past it
// (CatalogCursorOver) instead of reading it back.
func Remove(ctx context.Context, store *datastore.Store, fence *datastore.Fence, namespace, model string) ([]datastore.Info, error) {
	cat, err := store.CatalogStore()
	if err != nil {
		return nil, err
	}
	return cat.Commit(ctx, fence, []datastore.Entry{{Delete: rowPath(namespace, model)}})
}

// Get returns the row of namespace's model, or ok false if it has none.
func Get(ctx context.Context, store *datastore.Store, namespace, model string) (Row, bool, error) {
	cat, err := store.CatalogStore()
	if err != nil {
		return Row{}, false, err
	}
	m, err := cat.StatMany(ctx, []string{rowPath(namespace, model)})
	if err != nil {
		return Row{}, false, err
	}
	info, ok := m[rowPath(namespace, model)]
	if !ok || info.Deleted {
		return Row{}, false, nil
	}
	r, err := decodeRow(info)
	return r, err == nil, err
}

// Model computes namespace ns's row of model from its files now, with every
// entry (even when the stored row had to omit them).
func Model(ctx context.Context, ns *datastore.Store, model string) (Row, error) {
	head, err := ns.Head(ctx, model)
	if err != nil {
		return Row{}, err
	}
	files, err := modelFiles(ctx, ns, model)
	if err != nil {
		return Row{}, err
	}
	defs, err := ns.StatMany(ctx, []string{DefinitionPath(model)})
	if err != nil {
		return Row{}, err
	}
	var def *datastore.Info
	if d, ok := defs[DefinitionPath(model)]; ok {
		def = &d
	}
	prev, ok, err := Get(ctx, ns, ns.NamespaceName(), model)
	if err != nil {
		return Row{}, err
	}
	var p *Row
	if ok {
		p = &prev
	}
	return buildRow(ns.NamespaceName(), model, files, def, p, head.Seq, ns.Now()), nil
}
