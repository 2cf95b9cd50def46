package datastore

import "context"

// ReadAheader is implemented by drivers that can read in one request what
// several later reads of one sync would each send: the ChangedPartitions
// reads of some scopes (namespaces, "" the root), some records, and the
// Stat of some paths of one scope.
// ReadAhead returns a context carrying that snapshot; each of those reads
// made with the context (or one derived from it) takes its part of the
// snapshot once, instead of sending its request, and any later one reads
// afresh. Only the reads named are served; every other read with the
// context goes to the backend as usual.
type ReadAheader interface {
	ReadAhead(ctx context.Context, scopes []string, records []string, statScope string, paths []string) (context.Context, error)
}

// ReadAhead (issue 31) reads, in one request where the driver can
// (ReadAheader: DynamoDB, one BatchGetItem), what the ChangedPartitions
// calls of the stores in scopes, the record reads of records and s's
// StatMany of paths would read, and returns a context whose use makes those
// calls take it from that read, each once. Where the driver cannot, it returns ctx as it is and costs
// nothing.
//
// It is a snapshot, not a cache: a call served from it answers what it
// would have answered at the instant of the read-ahead, which the caller
// takes when it is about to make those calls and has written nothing
// since; a call made again, or after the context's calls took their part,
// reads afresh. A change another client makes in between is seen by the
// next read, as a change made just after the call would have been: a feed
// cursor is a snapshot that every later commit moves past, and a record
// read is a read at one instant. Pass the returned context only to the
// reads it is for (a pull), never to a step that must see the caller's own
// later writes (the catalog fold after a commit).
func (s *Store) ReadAhead(ctx context.Context, scopes []*Store, records []string, paths []string) (context.Context, error) {
	if err := s.open(); err != nil {
		return ctx, err
	}
	ra, ok := s.root.d.(ReadAheader)
	if !ok {
		return ctx, nil
	}
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		names[i] = sc.ns
	}
	for _, p := range paths {
		if ValidatePath(p) != nil {
			paths = nil // StatMany refuses it: it reads nothing ahead
			break
		}
	}
	return ra.ReadAhead(ctx, names, records, s.ns, paths)
}

// ConfigRecord returns the key of the record holding s's namespace's
// configuration (Config reads it), for ReadAhead.
func (s *Store) ConfigRecord() string { return nsRegistryPrefix + s.NamespaceName() }

// StatsReadAheader is a ReadAheader that reads ahead the Stat of paths of
// several stores of one datastore at once (stats: namespace → paths).
type StatsReadAheader interface {
	ReadAheadStats(ctx context.Context, scopes []string, records []string, stats map[string][]string) (context.Context, error)
}

// StatsReadAhead is ReadAhead for a driver that reads ahead the stats of
// several namespaces (a StatsReadAheader): paths of statScope as its only
// stats.
func StatsReadAhead(ctx context.Context, ra StatsReadAheader, scopes, records []string, statScope string, paths []string) (context.Context, error) {
	var stats map[string][]string
	if len(paths) > 0 {
		stats = map[string][]string{statScope: paths}
	}
	return ra.ReadAheadStats(ctx, scopes, records, stats)
}

// ReadAheadStats is ReadAhead with the StatMany of paths of several stores
// of s's datastore (stats: the store → its paths), as a sync reads its
// dirty paths' states and their models' catalog rows in the same request.
// ok reports that the driver read them ahead (only then is a StatMany with
// the context free); otherwise it returns ctx as it is.
func (s *Store) ReadAheadStats(ctx context.Context, scopes []*Store, records []string, stats map[*Store][]string) (_ context.Context, ok bool, _ error) {
	if err := s.open(); err != nil {
		return ctx, false, err
	}
	ra, isRA := s.root.d.(StatsReadAheader)
	if !isRA {
		return ctx, false, nil
	}
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		if sc.root != s.root {
			return ctx, false, nil
		}
		names[i] = sc.ns
	}
	byName := map[string][]string{}
	for st, paths := range stats {
		if st.root != s.root {
			return ctx, false, nil
		}
		valid := true
		for _, p := range paths {
			if ValidatePath(p) != nil {
				valid = false // StatMany refuses it: it reads nothing ahead
				break
			}
		}
		if valid {
			byName[st.ns] = append(byName[st.ns], paths...)
		}
	}
	actx, err := ra.ReadAheadStats(ctx, names, records, byName)
	if err != nil {
		return ctx, false, err
	}
	return actx, true, nil
}

// knownKey carries WithKnownPartitions's partitions: scope name → partitions.
type knownKey struct{}

// WithKnownPartitions returns a context that tells a ReadAhead made with
// it which partitions of scope the caller already knows (a sync: those its
// cursor holds a position of). A driver may then read their heads in the
// same request and answer scope's ChangedPartitions without listing the
// part of its index those heads account for (DynamoDB: a shard whose
// counter moved only through positions the known heads hold now is not
// queried). It changes no answer: an index position the known heads do not
// account for is listed as before.
func WithKnownPartitions(ctx context.Context, scope *Store, partitions []string) context.Context {
	prev, _ := ctx.Value(knownKey{}).(map[string][]string)
	next := make(map[string][]string, len(prev)+1)
	for k, v := range prev {
		next[k] = v
	}
	next[scope.ns] = partitions
	return context.WithValue(ctx, knownKey{}, next)
}

// KnownPartitions returns the partitions WithKnownPartitions named for the
// scope of namespace name ("" the root), for drivers.
func KnownPartitions(ctx context.Context, name string) []string {
	m, _ := ctx.Value(knownKey{}).(map[string][]string)
	return m[name]
}
