package datastore

import "context"

// CommitPrefetcher is an optional ability of a Driver (DynamoDB): naming,
// before a commit, the paths a later commit in this driver's namespace
// will write (a sync's catalog fold: the rows of the models its commit
// changes), so that the next commit in the context, of another namespace,
// reads what that later commit would read in the same request as its own
// read, and the later commit builds on it instead of reading (issue 31).
type CommitPrefetcher interface {
	PrefetchCommit(ctx context.Context, paths []string) context.Context
}

// PrefetchCommit returns ctx, asking the next commit made with it in
// another namespace of this datastore to read also what a commit of paths
// in s would read, for that commit of s, when made with the returned
// context, to build on. Where the driver cannot, it returns ctx: each
// commit reads for itself. Whatever the next commit read, the later one
// conditions its write on it, as on its own read: a change in between
// makes it read again, never commit on stale state.
func (s *Store) PrefetchCommit(ctx context.Context, paths []string) context.Context {
	if err := s.open(); err != nil {
		return ctx
	}
	p, ok := s.d.(CommitPrefetcher)
	if !ok {
		return ctx
	}
	valid := make([]string, 0, len(paths))
	for _, path := range paths {
		if ValidatePath(path) == nil {
			valid = append(valid, path)
		}
	}
	return p.PrefetchCommit(ctx, valid)
}

// CommitStatReader is an optional ability of a Driver (DynamoDB): the Stat
// of paths of several namespaces of one datastore (stats: namespace →
// paths) read together with what a commit of those paths in each namespace
// would read, in one snapshot. A sync whose dirty paths are known only
// after it took its lock (`lake data run`, a bench loop's sync) stats them,
// and its catalog fold's rows, right before it commits them: one read
// serves the stat and both commits (issue 31).
//
// stat carries the stats for the next StatMany of each namespace made with
// it, once (as ReadAheadStats); commit carries the reads for the next
// commit of each namespace made with it, once (as PrefetchCommit's). ok is
// false when the driver did not read (more keys than one snapshot holds):
// both are ctx.
type CommitStatReader interface {
	ReadStatsForCommits(ctx context.Context, stats map[string][]string) (stat, commit context.Context, ok bool, err error)
}

// ReadStatsForCommits reads, in one request where the driver can
// (CommitStatReader: DynamoDB, one TransactGetItems), what the StatMany of
// paths of each store of stats would read and what a commit of those paths
// in it would, and returns stat, for those StatMany calls, and commit, for
// the commits. ok reports that the driver read them (only then is a
// StatMany with stat free); otherwise both are ctx.
//
// Why an earlier read cannot make a commit wrong is PrefetchCommit's:
// whatever the commit builds on, its write is conditioned on, so a change
// in between makes it read again. The stat is a snapshot of the instant of
// the read, like a StatMany made then: pass stat to those reads only.
func (s *Store) ReadStatsForCommits(ctx context.Context, stats map[*Store][]string) (stat, commit context.Context, ok bool, err error) {
	if err := s.open(); err != nil {
		return ctx, ctx, false, err
	}
	r, isReader := s.root.d.(CommitStatReader)
	if !isReader {
		return ctx, ctx, false, nil
	}
	byName := map[string][]string{}
	for st, paths := range stats {
		if st.root != s.root {
			return ctx, ctx, false, nil
		}
		for _, p := range paths {
			if ValidatePath(p) != nil {
				return ctx, ctx, false, nil // StatMany refuses it: read nothing ahead
			}
		}
		byName[st.ns] = append(byName[st.ns], paths...)
	}
	return r.ReadStatsForCommits(ctx, byName)
}
