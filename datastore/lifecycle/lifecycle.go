// Package lifecycle expires what is done in a namespace of the datastore,
// and nothing else: the data of models whose definition was deleted longer
// than the retention ago (orphaned), and the versions of a live model's data
// entries beyond the newest KeepLast. It never touches a model that has a
// definition (but for its versions beyond KeepLast, by policy), nor data that
// never had one.
//
// Plan decides from the catalog (package catalog) what the policy lets go;
// Apply carries it out, fenced by the namespace's lock: an orphaned model's
// partition is dropped whole (datastore.Store.DropPartition: files,
// tombstones, feed, head, index and registry entries) and its catalog row
// removed, so nothing about it outlives it; an old version's files are
// deleted in one commit. `lake data prune` shows the plan and applies it
// only with --apply; a namespace whose policy is enabled has every sync run
// it on its own (package treesync).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/metastore"
)

// Kind is what an Action does.
type Kind string

// The kinds of action.
const (
	// DropModel drops an orphaned model's partition and its catalog row.
	DropModel Kind = "drop-model"
	// DeleteVersion deletes the files of one version of a data entry.
	DeleteVersion Kind = "delete-version"
)

// Action is one thing the policy lets go.
type Action struct {
	Kind             Kind
	Namespace, Model string
	// Entry and Version name the version of a DeleteVersion.
	Entry, Version string
	// Files and Bytes are what it removes, as the catalog knew them.
	Files  int
	Bytes  int64
	Reason string
}

// String is the action as `lake data prune` prints it.
func (a Action) String() string {
	what := a.Model
	if a.Kind == DeleteVersion {
		what = a.Model + " " + a.Entry + "/" + a.Version
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d files\t%d bytes\t%s", a.Kind, a.Namespace, what, a.Files, a.Bytes, a.Reason)
}

// Plan returns what policy p lets go among rows at now: every orphaned model
// whose definition was deleted at least p.Retention ago, and, when
// p.KeepLast > 0, the versions of each data entry of the other models
// beyond the newest p.KeepLast. Rows must carry their entries (see
// catalog.Model for a row whose entries were omitted).
func Plan(rows []catalog.Row, p datastore.Lifecycle, now time.Time) []Action {
	var out []Action
	for _, r := range rows {
		if r.State == catalog.Orphaned {
			if age := now.Sub(r.Deleted); age >= p.Retention {
				out = append(out, Action{Kind: DropModel, Namespace: r.Namespace, Model: r.Model, Files: r.Files, Bytes: r.Bytes,
					Reason: fmt.Sprintf("definition deleted %s ago (retention %s)", age.Round(time.Second), p.Retention)})
			}
			continue
		}
		if p.KeepLast <= 0 {
			continue
		}
		for _, e := range r.Entries {
			old := len(e.Versions) - p.KeepLast
			for i := 0; i < old; i++ {
				v := e.Versions[i]
				out = append(out, Action{Kind: DeleteVersion, Namespace: r.Namespace, Model: r.Model, Entry: e.Name, Version: v.Name,
					Files: v.Files, Bytes: v.Bytes, Reason: fmt.Sprintf("%d newer versions kept (keep-last %d)", p.KeepLast, p.KeepLast)})
			}
		}
	}
	return out
}

// Stats says what Apply removed.
type Stats struct {
	// Models dropped and Versions deleted; Files and Bytes they held.
	Models, Versions, Files int
	Bytes                   int64
	// Skipped counts the actions no longer due when re-checked (a model
	// defined again, a version already gone).
	Skipped int
	// Dropped names the models dropped.
	Dropped []string
	// Read are the states of the files Apply read before deleting them
	// (a version's files), by path: under the caller's lock and after
	// every catalog row it had folded, so the fold that follows may take
	// them as what the rows counted (catalog.FoldOptions.Before) and
	// bring the rows forward instead of listing the models.
	Read map[string]datastore.Info
	// Removed is what each removal of a dropped model's catalog row
	// applied to the catalog store (catalog.Remove), in order: a caller
	// that keeps a copy of the catalog moves its cursor past them.
	Removed [][]datastore.Info
}

// Apply carries out actions in ns (all of ns's namespace), each fenced by
// fence. A model is dropped only if its definition is still deleted when
// the drop reads it (datastore.Store.DropPartitionIfDeleted); a model
// defined again is skipped.
func Apply(ctx context.Context, ns *datastore.Store, fence *datastore.Fence, actions []Action) (Stats, error) {
	var st Stats
	for _, a := range actions {
		if a.Namespace != ns.NamespaceName() {
			return st, fmt.Errorf("lake: lifecycle action for namespace %s applied in %s", a.Namespace, ns.NamespaceName())
		}
		switch a.Kind {
		case DropModel:
			// The definition is checked by the drop's own read of the
			// model where the driver can, by a read before it elsewhere.
			// The row's removal that follows builds on the drop's read
			// where the driver can (datastore.Store.PrefetchCommit), and
			// rides in the drop's last write where the driver can
			// (datastore.CommitRider: DynamoDB, a transaction fewer), or
			// follows the drop under its check (S3: a read of the lock
			// record fewer).
			rctx := ctx
			var rider *datastore.CommitRider
			if cat, err := ns.CatalogStore(); err == nil {
				row := catalog.RowPath(ns.NamespaceName(), a.Model)
				rctx = cat.PrefetchCommit(ctx, []string{row})
				rider = cat.CommitRider(fence, []string{row})
			}
			ds, dropped, err := ns.DropPartitionIfDeleted(datastore.WithCommitRider(rctx, rider), fence, a.Model, catalog.DefinitionPath(a.Model))
			if err != nil {
				return st, fmt.Errorf("drop model %s: %w", a.Model, err)
			}
			if !dropped {
				st.Skipped++
				continue
			}
			removed, carried := rider.Carried()
			if !carried {
				if removed, err = catalog.Remove(rctx, ns, fence, ns.NamespaceName(), a.Model); err != nil {
					return st, fmt.Errorf("remove model %s from the catalog: %w", a.Model, err)
				}
			}
			if len(removed) > 0 {
				st.Removed = append(st.Removed, removed)
			}
			st.Models++
			st.Files += ds.Files
			st.Bytes += a.Bytes
			st.Dropped = append(st.Dropped, a.Model)
		case DeleteVersion:
			prefix := datastore.ModelPrefix + a.Model + "/" + a.Entry + "/" + a.Version + "/"
			// Only the version's own files: under the models layout a
			// deeper model's files can lie below the same prefix.
			files, err := ns.ListPartitionAll(ctx, a.Model, prefix)
			if err != nil {
				return st, err
			}
			if len(files) == 0 {
				st.Skipped++
				continue
			}
			entries := make([]datastore.Entry, len(files))
			var bytes int64
			if st.Read == nil {
				st.Read = map[string]datastore.Info{}
			}
			for i, f := range files {
				entries[i] = datastore.Entry{Delete: f.Path}
				bytes += f.Size
				st.Read[f.Path] = f
			}
			if _, err := ns.Commit(ctx, fence, entries); err != nil {
				return st, fmt.Errorf("delete version %s: %w", strings.TrimSuffix(prefix, "/"), err)
			}
			st.Versions++
			st.Files += len(files)
			st.Bytes += bytes
		default:
			return st, fmt.Errorf("lake: unknown lifecycle action %q", a.Kind)
		}
	}
	return st, nil
}

// PlanNamespace reads ns's catalog rows and its policy (or override, if
// not nil) and returns the plan at now. Rows whose entries were omitted are
// recomputed from their files when versions are to be kept.
func PlanNamespace(ctx context.Context, ns *datastore.Store, override *datastore.Lifecycle, now time.Time) ([]Action, datastore.Lifecycle, error) {
	p := datastore.Lifecycle{}
	if override != nil {
		p = *override
	} else {
		c, err := ns.Config(ctx)
		if err != nil {
			return nil, p, err
		}
		p = c.Lifecycle
	}
	// A row no lake client writes is left out: it plans nothing (lake
	// data catalog names it).
	rows, _, err := catalog.All(ctx, ns, ns.NamespaceName())
	if err != nil {
		return nil, p, err
	}
	actions, err := PlanRows(ctx, ns, rows, p, now)
	return actions, p, err
}

// PlanRows is Plan over rows of ns's namespace (from the catalog or a
// tree's copy of it), recomputing from its files a row whose entries were
// omitted when versions are to be kept.
func PlanRows(ctx context.Context, ns *datastore.Store, rows []catalog.Row, p datastore.Lifecycle, now time.Time) ([]Action, error) {
	rows = slices.Clone(rows)
	for i, r := range rows {
		if r.EntriesOmitted > 0 && p.KeepLast > 0 {
			full, err := catalog.Model(ctx, ns, r.Model)
			if err != nil {
				return nil, err
			}
			rows[i] = full
		}
	}
	actions := Plan(rows, p, now)
	slices.SortStableFunc(actions, func(a, b Action) int { return strings.Compare(a.Model, b.Model) })
	return actions, nil
}

// Reclaim runs the datastore's Reclaim in ns and in the catalog with the
// policy's horizon, so that the tombstones of pruned versions and of removed
// catalog rows do not outlive it. The catalog is every namespace's: its
// reclaim is claimed through a root record (CatalogReclaimedKey), so that it
// runs at most once per quarter horizon whatever the number of trees that
// call Reclaim, instead of once per tree.
func Reclaim(ctx context.Context, ns *datastore.Store, p datastore.Lifecycle) (datastore.ReclaimStats, error) {
	o := datastore.ReclaimOptions{Horizon: p.Horizon}
	st, err := ns.Reclaim(ctx, o)
	if err != nil {
		return st, err
	}
	horizon := p.Horizon
	if horizon <= 0 {
		horizon = datastore.DefaultHorizon
	}
	if claimed, err := claimCatalogReclaim(ctx, ns.Root(), ns.Now(), horizon/4); err != nil || !claimed {
		return st, err
	}
	cat, err := ns.CatalogStore()
	if err != nil {
		return st, err
	}
	cs, err := cat.Reclaim(ctx, o)
	st.Uploads += cs.Uploads
	st.Versions += cs.Versions
	st.Chunks += cs.Chunks
	st.Tombstones += cs.Tombstones
	return st, err
}

// CatalogReclaimedKey is the root record holding when the catalog's last
// lifecycle reclaim was claimed (Unix nanoseconds, in decimal).
const CatalogReclaimedKey = "datastore/lifecycle/catalog-reclaimed"

// claimCatalogReclaim reports whether this caller is to reclaim the catalog
// now: the last claim is at least every old (or more than ten times that in
// the future: a clock that ran far ahead), and this caller's CAS of the
// record won. A caller that loses the race leaves it to the winner.
func claimCatalogReclaim(ctx context.Context, root *datastore.Store, now time.Time, every time.Duration) (bool, error) {
	recs := root.Records()
	expect := metastore.ExpectAbsent()
	old, err := recs.GetRecord(ctx, CatalogReclaimedKey)
	switch {
	case errors.Is(err, metastore.ErrNotFound):
	case err != nil:
		return false, err
	default:
		if ns, perr := strconv.ParseInt(string(old), 10, 64); perr == nil {
			age := now.Sub(time.Unix(0, ns))
			if age < every && age > -10*every {
				return false, nil
			}
		}
		expect = metastore.ExpectValue(old)
	}
	err = recs.CASRecord(ctx, CatalogReclaimedKey, expect, []byte(strconv.FormatInt(now.UnixNano(), 10)))
	if errors.Is(err, metastore.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}
