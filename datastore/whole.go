package datastore

import "sync"

// WholeCommitter is implemented by a Driver whose Commit applies any number
// of entries atomically (issue 30): every reader (Stat, List, Changes,
// ChangedPartitions, a pull, a node's clients) sees all of a commit's
// changes or none, and a writer killed at any moment leaves either nothing
// or everything visible. The Store hands such a driver a commit whole
// instead of splitting it into MaxCommit-sized writes; MaxCommit is then
// only the size of the driver's one-write fast path. How each driver does
// it is in docs/datastore.md ("Commits of any size"); bolt, DynamoDB, S3
// and a node on any of them do.
type WholeCommitter interface {
	// CommitsWhole reports whether Commit takes any number of entries as
	// one atomic commit.
	CommitsWhole() bool
}

// commitsWhole reports whether d takes commits of any size whole.
func commitsWhole(d Driver) bool {
	w, ok := d.(WholeCommitter)
	return ok && w.CommitsWhole()
}

// WriteFaulter is implemented by drivers that let a test stop a commit
// after any number of backend writes, as a crash would: SetWriteFault(f)
// makes the driver call f before each write request it sends to its backend
// (reads are not counted), and fail that write, and every later one while f
// keeps failing, with f's error, sending nothing. nil removes the hook. It
// is the conformance suite's way of killing a commit at every step
// (dstest's KilledCommitsAllOrNothing); production code never sets it.
type WriteFaulter interface {
	SetWriteFault(f func() error)
}

// WriteFault is the hook a WriteFaulter driver keeps: Set installs f,
// Check runs it before a backend write (nil, or no f: no fault). One type
// for every driver, so that the hook's locking is written once.
type WriteFault struct {
	mu sync.Mutex
	f  func() error
}

// Set installs f (nil removes it).
func (h *WriteFault) Set(f func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f = f
}

// Check returns f's error, or nil without a hook.
func (h *WriteFault) Check() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	return h.f()
}

// CommitsWhole reports whether s applies a commit of any size atomically
// (its driver is a WholeCommitter that says so).
func (s *Store) CommitsWhole() bool { return commitsWhole(s.d) }
