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
