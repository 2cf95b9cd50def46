package treesync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/lock"
	"golang.org/x/sync/errgroup"
)

// uploaded is a dirty file whose content is staged: invisible until the
// commit.
type uploaded struct {
	staged datastore.Staged
	fi     os.FileInfo // taken before the content was read
}

// testHookCommit, when set, runs under the lock just before the commit (the
// tests kill a worker there).
var testHookCommit func()

// testHookAfterCommit, when set, runs under the lock just after a commit
// stood (the tests break the lock there).
var testHookAfterCommit func()

// Sync runs the seed's loop without the work: dirty files are uploaded,
// then under the lock NAMESPACE/sync the dirty paths are checked against
// the remote (batch stat), the scope is pulled, and the dirty entries are
// committed, fenced by the lock's token.
func (t *Tree) Sync(ctx context.Context, scope Scope) (Report, error) {
	return t.run(ctx, scope, nil, RunOptions{})
}

// RunOptions shape Run.
type RunOptions struct {
	// PushOnFailure pushes what fn changed even when fn fails.
	PushOnFailure bool
}

// Run locks, pulls, runs fn in the tree under the lock, then pushes what
// changed and commits, fenced. fn's context is cancelled when ctx ends or
// the lock is lost (with that cause); the lease gives its token. If fn
// fails, nothing is pushed unless PushOnFailure (its changes stay dirty
// locally), and fn's error is returned, with the pull kept.
func (t *Tree) Run(ctx context.Context, scope Scope, fn func(ctx context.Context, ls *lock.Lease) error, o RunOptions) (Report, error) {
	if fn == nil {
		return Report{}, fmt.Errorf("lake: Run needs a function")
	}
	return t.run(ctx, scope, fn, o)
}

func (t *Tree) run(ctx context.Context, scope Scope, fn func(context.Context, *lock.Lease) error, o RunOptions) (Report, error) {
	var sk skips
	rep, err := t.run1(ctx, scope, fn, o, &sk)
	err = t.staleBeforeRefused(ctx, err) // layoutcommit.go
	rep.Skipped = sk.sorted()
	if err == nil && len(rep.Skipped) > 0 {
		err = &SkippedError{Skipped: rep.Skipped}
	}
	return rep, err
}

func (t *Tree) run1(ctx context.Context, scope Scope, fn func(context.Context, *lock.Lease) error, o RunOptions, sk *skips) (Report, error) {
	var rep Report
	models, err := validScope(scope)
	if err != nil {
		return rep, err
	}
	if len(models) > 0 {
		// The scope's dirty paths are found by their partitions.
		if err := t.verifyLayout(ctx); err != nil {
			return rep, err
		}
	}
	unlock, err := t.lockDir()
	if err != nil {
		return rep, err
	}
	defer unlock()
	st, err := t.loadState()
	if err != nil {
		return rep, err
	}
	hints := t.hintsSize()
	// Sync finds its dirty paths now, to upload them before the lock. Run
	// walks once, after fn; before it, only hinted paths count, and the
	// pull checks each path it writes, so a local change is never
	// overwritten either way.
	var dirty []LocalChange
	if fn == nil {
		dirty, err = t.dirty(st, models, true, sk, &rep.Warnings)
	} else {
		dirty, err = t.dirty(st, models, false, sk, &rep.Warnings)
	}
	if err != nil {
		return rep, err
	}
	quietCandidate := fn == nil && len(dirty) == 0 && len(sk.list) == 0
	var up map[string]uploaded
	if fn == nil {
		// Phase one: the blobs, before the lock.
		if dirty, up, err = t.upload(ctx, dirty, &rep, sk); err != nil {
			return rep, err
		}
	}
	rep.Dirty = len(dirty)
	var pre *preRead
	t.seedHeads() // headseed.go
	if quietCandidate {
		// Nothing to push: a few reads may prove there is nothing to
		// pull or maintain either, and then no lock is needed (quiet).
		var done bool
		if done, pre, err = t.quiet(ctx, st, models, &rep, sk); err != nil {
			return rep, err
		} else if done {
			t.rememberLayout()
			if err := t.saveState(st); err != nil {
				return rep, err
			}
			t.saveHeads() // headseed.go
			if hints >= 0 {
				t.clearHints(hints)
			}
			rep.Unlocked = true
			return rep, nil
		}
	}
	start := time.Now()
	t.seedLock() // lockseed.go
	ls, err := t.locker.Acquire(ctx, t.LockName())
	if err != nil {
		return rep, err
	}
	defer ls.Release(context.WithoutCancel(ctx))
	rep.LockWait, rep.Token, rep.LockContended = time.Since(start), ls.Token(), ls.Contended()
	if ls.TookOver() {
		// A holder this one broke may still land a commit it checked
		// before the takeover: fence first, so that it lands before
		// what this sync reads or not at all (S3; a no-op elsewhere).
		if _, err := t.store.FenceTakeover(ctx, dslock.Fence(ls)); err != nil {
			return rep, err
		}
	}

	pctx, rows := t.readAhead(ctx, st, len(models) == 0, pre != nil && pre.catalogRead, dirtyPaths(dirty)) // readahead.go
	rep.rows = rows
	if fn != nil {
		// Run's function acts on the pulled tree, maybe outside it: the
		// layout is proved before anything computes a partition from a
		// path, by the namespace's entry read ahead when it names the
		// remembered layout, else by a read of the record (runlayout.go).
		if err := t.runLayout(pctx, ctx, st); err != nil {
			return rep, err
		}
	}
	push, dirtyConflicts, err := t.decide(pctx, st, dirty, up, &rep)
	if err != nil {
		return rep, err
	}
	pullStart := time.Now()
	var dropped []string
	if pre != nil && pre.catalogRead {
		dropped = pre.dropped // read before the lock by quiet
	} else if dropped, err = t.readCatalog(pctx, st, &rep, sk); err != nil {
		return rep, err
	}
	pl, err := t.plan(pctx, st, models, dropped, sk)
	if err != nil {
		return rep, err
	}
	rep.pulled = pl.pulled
	rep.Pull = time.Since(pullStart)
	rep.Partitions, rep.Changes = len(pl.positions), pl.read
	isDirty := map[string]bool{}
	for _, c := range dirty {
		isDirty[c.Path] = true
	}
	var apply []datastore.Info
	var conflicts []string
	for _, c := range pl.sorted() {
		if isDirty[c.Path] || !needed(st, c) {
			continue
		}
		// Hints may have missed a local change: never overwrite one.
		if _, changed, err := t.check(st, c.Path); sk.entry(err) {
			st.skip(c.Path, err) // retried by the next sync
			continue
		} else if err != nil {
			return rep, err
		} else if changed {
			conflicts = append(conflicts, c.Path)
			continue
		}
		apply = append(apply, c)
	}
	push, apply, err = t.resolve(push, dirtyConflicts, conflicts, apply, &rep)
	if err != nil {
		return rep, err
	}
	if len(apply) > 0 { // the tree is written from here on (layoutcommit.go)
		if err := t.verifyLayout(ctx); err != nil {
			return rep, err
		}
	}
	if err := t.applyAll(ctx, st, apply, &rep, sk); err != nil {
		return rep, err
	}
	if fn != nil {
		// fn stops when the caller cancels or the lock is lost (the cause
		// says which).
		fctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(ls.Context(), func() { cancel(context.Cause(ls.Context())) })
		ferr := fn(fctx, ls)
		stop()
		cancel(nil)
		if ferr != nil && !o.PushOnFailure {
			// Keep what was pulled; what fn changed stays dirty.
			t.advance(st, pl, nil)
			if err := t.saveState(st); err != nil {
				return rep, err
			}
			return rep, ferr
		} else if ferr != nil {
			err = ferr // pushed below, as asked; fn's error is still returned
		}
		dirty, derr := t.walk(st, models, sk)
		if derr != nil {
			return rep, derr
		}
		if dirty, up, derr = t.upload(ctx, dirty, &rep, sk); derr != nil {
			return rep, derr
		}
		rep.Dirty = len(dirty)
		var dc []LocalChange
		var sctx context.Context
		sctx, ctx = t.readAheadAfterRun(ctx, dirty, &rep) // the commit's ctx carries the commits' reads
		push, dc, derr = t.decide(sctx, st, dirty, up, &rep)
		if derr != nil {
			return rep, derr
		}
		var fetch []datastore.Info
		if push, fetch, derr = t.resolve(push, dc, nil, nil, &rep); derr != nil {
			return rep, derr
		}
		if derr := t.applyAll(ctx, st, fetch, &rep, sk); derr != nil {
			return rep, derr
		}
	}
	if testHookCommit != nil {
		testHookCommit()
	}
	t.readConfigBeforeCommit(pctx, st) // policy.go
	ctx = t.prefetchRows(ctx, push)    // catalog.go: the fold's read, made by the commit's
	commitStart := time.Now()
	cctx := t.planFold(ctx, ls, st, &rep) // catalog.go: the fold, carried by the commit
	applied, cerr := t.commit(cctx, ls, st, push, up, sk)
	if cerr == nil {
		cerr = t.layoutProved(ctx) // layoutcommit.go
	}
	if cerr != nil {
		t.forgetStaleLayout(cerr)
		return rep, cerr
	}
	rep.Commit = time.Since(commitStart)
	rep.Committed = len(applied)
	rep.committed = applied
	t.advance(st, pl, applied)
	if testHookAfterCommit != nil {
		testHookAfterCommit()
	}
	// From here on the commit stands: a failure is reported as one after
	// it (AfterCommitError), never as a refused sync.
	if merr := t.maintain(ctx, ls, st, &rep); merr != nil {
		// The next sync folds and expires again.
		if serr := t.saveState(st); serr != nil {
			return rep, afterCommit(rep.Committed, "save state", serr)
		}
		step := "lifecycle"
		if strings.HasPrefix(merr.Error(), "catalog fold") {
			step = "catalog fold"
		}
		return rep, afterCommit(rep.Committed, step, merr)
	}
	if serr := t.saveState(st); serr != nil {
		return rep, afterCommit(rep.Committed, "save state", serr)
	}
	if hints >= 0 { // a walk or the hints covered them
		t.clearHints(hints)
	}
	if rerr := ls.Release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, lock.ErrLost) {
		return rep, afterCommit(rep.Committed, "release", rerr)
	}
	t.saveLock()  // lockseed.go
	t.saveHeads() // headseed.go
	return rep, err
}

// applyAll applies the pulled changes, deletes first (a file removed
// remotely may be where a directory of a new file goes), skipping into sk
// the paths the tree cannot write.
func (t *Tree) applyAll(ctx context.Context, st *state, apply []datastore.Info, rep *Report, sk *skips) error {
	slices.SortStableFunc(apply, func(a, b datastore.Info) int {
		switch {
		case a.Deleted == b.Deleted:
			return 0
		case a.Deleted:
			return -1
		}
		return 1
	})
	for _, c := range apply {
		if err := t.apply(ctx, st, c, rep); sk.entry(err) {
			continue
		} else if err != nil {
			return err
		}
	}
	return nil
}

// uploadParallel bounds the files a push uploads at once. Each upload is
// its own requests (a file stored in chunks: its intent and its chunks; an
// inline file none) and waits only for its own round trips, so a push of
// many files takes about their number over uploadParallel round trips
// instead of one after another; the requests are the same.
const uploadParallel = 8

// upload stages the content of the dirty files (phase one of the push),
// several at once. It returns the dirty changes still to push, in their
// order: a file that cannot be read through the tree's root (a link
// swapped in since the walk) is skipped. An error about more than one
// path stops the uploads not yet started; what was staged before it is
// never committed and goes with its intents.
func (t *Tree) upload(ctx context.Context, dirty []LocalChange, rep *Report, sk *skips) ([]LocalChange, map[string]uploaded, error) {
	type result struct {
		up  uploaded
		err error
	}
	res := make([]result, len(dirty))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(uploadParallel)
	for i, c := range dirty {
		if c.Kind == Deleted {
			continue
		}
		if gctx.Err() != nil {
			break // an upload failed: start no more
		}
		g.Go(func() error {
			u, err := t.uploadOne(gctx, c.Path)
			res[i] = result{u, err}
			if err != nil && !isEntryError(err) {
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err // cancelled before every upload started
	}
	up := map[string]uploaded{}
	kept := dirty[:0:0]
	for i, c := range dirty {
		if c.Kind != Deleted {
			if sk.entry(res[i].err) {
				continue
			}
			up[c.Path] = res[i].up
			rep.Uploaded++
		}
		kept = append(kept, c)
	}
	return kept, up, nil
}

// uploadOne stages the content of the tree file p, its file information
// taken before the content is read.
func (t *Tree) uploadOne(ctx context.Context, p string) (uploaded, error) {
	f, err := t.fs.open(p)
	if err != nil {
		return uploaded{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return uploaded{}, fmt.Errorf("lake: %w", err)
	}
	s, err := t.store.Upload(ctx, p, f, nil)
	if err != nil {
		return uploaded{}, err
	}
	return uploaded{staged: s, fi: fi}, nil
}

// decide checks the dirty paths against the remote with one batch stat:
// a path whose remote state is still the one last synced is pushed; one
// whose remote content already equals the local one is adopted; any other
// is a conflict.
func (t *Tree) decide(ctx context.Context, st *state, dirty []LocalChange, up map[string]uploaded, rep *Report) ([]LocalChange, []LocalChange, error) {
	if len(dirty) == 0 {
		return nil, nil, nil
	}
	paths := make([]string, len(dirty))
	for i, c := range dirty {
		paths[i] = c.Path
	}
	remote, err := t.store.StatMany(ctx, paths)
	if err != nil {
		return nil, nil, err
	}
	rep.Stated += len(paths)
	rep.noteStated(paths, remote)
	var push, conflicts []LocalChange
	for _, c := range dirty {
		r, has := remote[c.Path]
		live := has && !r.Deleted
		base, synced := st.Files[c.Path]
		unchanged := (!synced && !live) || (synced && live && r.Version == base.Version)
		switch {
		case unchanged:
			push = append(push, c)
		case c.Kind == Deleted && !live:
			delete(st.Files, c.Path) // deleted on both sides
		case c.Kind != Deleted && live && t.localSHA(c, up) == r.SHA256:
			// The same content on both sides: adopt it.
			if u, ok := up[c.Path]; ok {
				st.Files[c.Path] = record(u.fi, r, t.now())
			} else if fi, err := t.fs.lstat(c.Path); err == nil {
				fs := record(fi, r, t.now())
				fs.MTime = 0 // not read under this stat: hash it next time
				st.Files[c.Path] = fs
			}
		default:
			conflicts = append(conflicts, c)
		}
	}
	return push, conflicts, nil
}

// localSHA is the local content's hash: from its upload, from the walk,
// or read now.
func (t *Tree) localSHA(c LocalChange, up map[string]uploaded) string {
	if u, ok := up[c.Path]; ok {
		return u.staged.SHA256
	}
	if c.SHA256 != "" {
		return c.SHA256
	}
	sum, _ := t.fs.hash(c.Path)
	return sum
}

// resolve applies Options.Prefer to conflicts: refused without it; local
// keeps the path in the push; remote drops it from the push and fetches
// the remote state into the tree.
func (t *Tree) resolve(push, dirtyConflicts []LocalChange, pullConflicts []string, apply []datastore.Info, rep *Report) ([]LocalChange, []datastore.Info, error) {
	conflicts := slices.Clone(pullConflicts)
	for _, c := range dirtyConflicts {
		conflicts = append(conflicts, c.Path)
	}
	if len(conflicts) == 0 {
		return push, apply, nil
	}
	sort.Strings(conflicts)
	switch t.opts.Prefer {
	case PreferNone:
		return nil, nil, &ConflictError{Paths: conflicts}
	case PreferLocal:
		// A conflict found by the pull (a change the hints missed) is not
		// in the push: the walk of the next sync pushes it.
		push = append(push, dirtyConflicts...)
	case PreferRemote:
		is := map[string]bool{}
		for _, p := range conflicts {
			is[p] = true
			apply = append(apply, datastore.Info{Path: p})
		}
		kept := push[:0]
		for _, c := range push {
			if !is[c.Path] {
				kept = append(kept, c)
			}
		}
		push = kept
	}
	rep.Resolved = append(rep.Resolved, conflicts...)
	return push, apply, nil
}

// commit writes the pushed entries in one commit fenced by the lock's
// token, and records them as synced. A commit the store refuses because a
// pushed file would make a path both a file and a directory (a
// *datastore.ClashError) is made again without that file, which is
// skipped; nothing else is retried.
func (t *Tree) commit(ctx context.Context, ls *lock.Lease, st *state, push []LocalChange, up map[string]uploaded, sk *skips) ([]datastore.Info, error) {
	for range len(push) + 1 { // each round drops a path, or ends
		if len(push) == 0 {
			return nil, nil
		}
		entries := make([]datastore.Entry, 0, len(push))
		for _, c := range push {
			if c.Kind == Deleted {
				entries = append(entries, datastore.Entry{Delete: c.Path})
				continue
			}
			s := up[c.Path].staged
			entries = append(entries, datastore.Entry{Put: &s})
		}
		applied, err := t.store.Commit(ctx, dslock.Fence(ls), entries)
		if clash, ok := datastore.AsClash(err); ok && len(applied) == 0 {
			kept := push[:0:0]
			for _, c := range push {
				if c.Path != clash.Path {
					kept = append(kept, c)
				}
			}
			if len(kept) < len(push) {
				sk.add(clash.Path, clash.Why()+" (nothing of it was committed; the rest of the sync was)")
				push = kept
				continue
			}
		}
		if datastore.IsFenceConflict(err) {
			return nil, fmt.Errorf("%w: the lock %s was lost before the commit, which the store refused; nothing was committed, the changes stay dirty", err, t.LockName())
		}
		if err != nil {
			return nil, err
		}
		now := t.now()
		for _, info := range applied {
			if info.Deleted {
				delete(st.Files, info.Path)
				continue
			}
			st.Files[info.Path] = record(up[info.Path].fi, info, now)
		}
		return applied, nil
	}
	return nil, fmt.Errorf("lake: commit: every pushed path clashed")
}

// advance moves the positions the pull vouches for, and a partition's
// position past this sync's own commit when the commit's positions follow
// it with no gap (nobody else wrote in between). The unscoped cursor moves
// only after an unscoped pull.
func (t *Tree) advance(st *state, pl *pullPlan, applied []datastore.Info) {
	for part, pos := range pl.positions {
		if pos > st.Positions[part] {
			st.Positions[part] = pos
		}
	}
	byPart := map[string][]uint64{}
	for _, a := range applied {
		byPart[a.Partition] = append(byPart[a.Partition], a.Pos)
	}
	for part, ps := range byPart {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		next := st.Positions[part]
		for _, p := range ps {
			if p != next+1 {
				break
			}
			next = p
		}
		st.Positions[part] = next
	}
	if pl.unscoped {
		st.Cursor, st.Unscoped = pl.cursor, true
		// Past this sync's own commit too, when the store can prove
		// that nothing else moved the index there since the pull read
		// it (datastore.CursorAdvancer) and the tree holds the
		// commit's heads: the next sync then does not read the commit
		// back from the feed. Anything else another writer did on the
		// other shards stays past the cursor for the next sync.
		if heads, next, ok := t.store.ChangedPartitionsOver(pl.cursor, applied); ok && holdsHeads(st, heads) {
			st.Cursor = next
		}
	}
}

// holdsHeads reports whether the tree's positions are at or past heads.
func holdsHeads(st *state, heads []datastore.Head) bool {
	for _, h := range heads {
		if st.Positions[h.Partition] < h.Seq {
			return false
		}
	}
	return true
}
