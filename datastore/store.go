package datastore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Store is the portable datastore that users see. It validates every
// argument once, here, splits files into chunks and large commits into
// fenced chunks, then calls its Driver. It is safe for concurrent use when
// its Driver is.
type Store struct {
	d      Driver
	closed atomic.Bool
	// now is the clock of upload intents and change times; tests replace it.
	now func() time.Time
	// root is the Store of the default namespace (itself, for the root);
	// ns is s's namespace ("" for the root); a borrowed Store's Close
	// releases nothing, since its driver is the root's.
	root     *Store
	ns       string
	borrowed bool
	nss      *namespaceState
	// vouched holds the uploads s made itself, which Commit need not read
	// back (verify.go).
	vouched vouched
	// layout is the datastore's partition rule (layout.go); set on the
	// root by Open, read by every namespace through root. layoutRecorded
	// is set once the datastore's record is known to name it.
	layout         Layout
	layoutRecorded atomic.Bool
	// layoutUnverified is set while the layout is one the caller
	// remembered (OpenOptions.Remembered), until VerifyLayout.
	layoutUnverified atomic.Bool
}

// New returns a Store over d, the root of its namespaces.
func New(d Driver) *Store {
	s := &Store{d: d, now: time.Now, nss: &namespaceState{registered: map[string]bool{}}}
	s.root = s
	return s
}

// Driver returns the backend under s, for backend-specific abilities (cost
// counters) that are not part of the contract.
func (s *Store) Driver() Driver { return s.d }

// Records returns the key-value surface on which the datastore's locks live.
// It checks keys and list prefixes before calling the driver.
func (s *Store) Records() Records { return checkedRecords{s.d} }

// ServerNow returns the clock of the Store's storage when its driver has
// one (ServerClock), else nil.
func (s *Store) ServerNow() func() time.Time {
	if c, ok := s.d.(ServerClock); ok {
		return c.ServerNow
	}
	return nil
}

// Now is the Store's clock: the time of upload intents and changes.
func (s *Store) Now() time.Time { return s.now() }

// SetClock replaces the clock of upload intents and change times, for
// tests of the grace period and the horizon.
func (s *Store) SetClock(now func() time.Time) { s.now = now }

func (s *Store) open() error {
	if s.closed.Load() || s.root.closed.Load() {
		return metastore.ErrClosed
	}
	return nil
}

// newVersion returns a fresh version id: 16 random bytes in hex, so that
// two uploads of one path never share chunks.
func newVersion() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("lake: crypto/rand failed: " + err.Error()) // the runtime guarantees it does not
	}
	return hex.EncodeToString(b[:])
}

// Upload stores the content r yields under a fresh version of path, in
// chunks of ChunkSize, after recording the upload intent; content of at
// most InlineMax bytes is kept in the Staged file instead (Inline) and
// written by Commit with the metadata, with no intent and no chunk, so
// Upload sends nothing. Nothing is visible until Commit. meta is the
// file's metadata (at most MaxMetaBytes).
func (s *Store) Upload(ctx context.Context, path string, r io.Reader, meta []byte) (Staged, error) {
	if err := s.open(); err != nil {
		return Staged{}, err
	}
	if err := ValidatePath(path); err != nil {
		return Staged{}, err
	}
	if r == nil {
		return Staged{}, fmt.Errorf("%w: nil content reader for %q", metastore.ErrInvalidArgument, path)
	}
	if len(meta) > MaxMetaBytes {
		return Staged{}, fmt.Errorf("%w: metadata of %q is %d bytes, more than %d", metastore.ErrInvalidValue, path, len(meta), MaxMetaBytes)
	}
	st := Staged{Path: path, Version: newVersion(), Meta: bytes.Clone(meta), Started: s.now()}
	if st.Meta == nil {
		st.Meta = []byte{}
	}
	// A file of at most InlineMax bytes is stored inline: its content
	// rides in the commit's own write, with no upload intent and no
	// chunk (docs/datastore.md, "Small files inline").
	head := make([]byte, InlineMax+1)
	n, err := io.ReadFull(r, head)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		st.Inline, st.Size = head[:n:n], int64(n)
		if n == 0 {
			st.Inline = nil // an empty file: nothing to hold
		}
		st.SHA256 = sha256Hex(st.Inline)
		return st, nil
	case err != nil:
		return Staged{}, fmt.Errorf("lake: read content of %q: %w", path, err)
	}
	r = io.MultiReader(bytes.NewReader(head), r)
	if err := s.d.BeginUpload(ctx, st); err != nil {
		return Staged{}, err
	}
	h := sha256.New()
	buf := make([]byte, ChunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			if perr := s.d.PutChunk(ctx, st.Version, st.Chunks, bytes.Clone(buf[:n])); perr != nil {
				return Staged{}, perr
			}
			st.Chunks++
			st.Size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return Staged{}, fmt.Errorf("lake: read content of %q: %w", path, err)
		}
	}
	st.SHA256 = hex.EncodeToString(h.Sum(nil))
	s.vouched.add(st)
	return st, nil
}

// Commit applies entries (staged files and deletes, paths distinct), fenced
// by fence if it is not nil. On a driver that commits whole (WholeCommitter:
// bolt, DynamoDB, S3, a node on any) a commit of any size is atomic: readers
// see all of it or none, and a crash leaves all or nothing visible. On
// another driver up to Driver.MaxCommit entries go in one atomic write
// and a larger commit goes in several, in order, each fenced and each path
// whole: a crash in between leaves it partly applied, and the next sync
// completes it. It returns the changes applied.
func (s *Store) Commit(ctx context.Context, fence *Fence, entries []Entry) ([]Info, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	layoutCheck, err := s.commitLayoutCheck(ctx) // layoutcommit.go
	if err != nil {
		return nil, err
	}
	if fence != nil {
		if err := metastore.ValidateKey(fence.Key); err != nil {
			return nil, fmt.Errorf("fence: %w", err)
		}
	}
	if err := checkEntries(entries); err != nil {
		return nil, err
	}
	// The store's side of the trust boundary: a staged file that s did not
	// upload itself is proved against its chunks before anything applies.
	var versions []string
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		versions = append(versions, e.Put.Version)
		// An inline file is always checked: its content is in the
		// caller's hands until now, and checking it reads nothing.
		if e.Put.Chunks == 0 || !s.vouched.has(*e.Put) {
			if err := VerifyStaged(ctx, s.d, *e.Put); err != nil {
				return nil, err
			}
		}
	}
	if err := s.register(ctx); err != nil {
		return nil, err
	}
	defer s.vouched.forget(versions)
	if layoutCheck != nil {
		return s.commitChecked(ctx, fence, entries, layoutCheck)
	}
	if commitsWhole(s.d) { // whole.go
		return s.d.Commit(ctx, fence, entries, s.now())
	}
	var out []Info
	for start := 0; start < len(entries); start += s.d.MaxCommit() {
		part := entries[start:min(start+s.d.MaxCommit(), len(entries))]
		applied, err := s.d.Commit(ctx, fence, part, s.now())
		if err != nil {
			if start > 0 {
				return out, fmt.Errorf("%w (the first %d of %d entries were committed; the next sync completes the rest)", err, start, len(entries))
			}
			return nil, err
		}
		out = append(out, applied...)
	}
	return out, nil
}

// checkEntries refuses entries Commit cannot apply: an entry neither a
// staged file nor a delete, an invalid path, a path twice, a staged file
// Upload did not return, a path both a file and a directory (CommitClash).
func checkEntries(entries []Entry) error {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if (e.Put == nil) == (e.Delete == "") {
			return fmt.Errorf("%w: a commit entry is either a staged file or a delete", metastore.ErrInvalidArgument)
		}
		p := e.Path()
		if err := ValidatePath(p); err != nil {
			return err
		}
		if seen[p] {
			return fmt.Errorf("%w: path %q appears twice in one commit", metastore.ErrInvalidArgument, p)
		}
		seen[p] = true
		if e.Put != nil && (e.Put.Version == "" || len(e.Put.Meta) > MaxMetaBytes || e.Put.Chunks < 0) {
			return fmt.Errorf("%w: staged file %q was not returned by Upload", metastore.ErrInvalidArgument, p)
		}
	}
	return CommitClash(entries) // clash.go
}

// Put uploads the content of r as the new version of path and commits it,
// unfenced.
func (s *Store) Put(ctx context.Context, path string, r io.Reader, meta []byte) (Info, error) {
	st, err := s.Upload(ctx, path, r, meta)
	if err != nil {
		return Info{}, err
	}
	out, err := s.Commit(ctx, nil, []Entry{{Put: &st}})
	if err != nil {
		return Info{}, err
	}
	return out[0], nil
}

// Delete deletes path, leaving a tombstone that pullers see. A path that is
// absent or already deleted gives an error matching metastore.ErrNotFound.
func (s *Store) Delete(ctx context.Context, path string) (Info, error) {
	out, err := s.Commit(ctx, nil, []Entry{{Delete: path}})
	if err != nil {
		return Info{}, err
	}
	if len(out) == 0 {
		return Info{}, metastore.NotFound(path)
	}
	return out[0], nil
}

// maxGetRetries bounds how often Get re-reads the metadata after finding a
// chunk gone: each retry means a newer version was committed and the old one
// reclaimed during the read.
const maxGetRetries = 8

// Get returns the latest version of path and its whole content, strongly
// consistent: GetTo into memory, for callers that need the bytes (a large
// file wants GetTo). If a chunk of the version it read is gone (reclaimed
// after a newer version replaced it), it reads the newer version whole; it
// never returns a mix. A missing or deleted path gives an error matching
// metastore.ErrNotFound; a file that does not match its metadata a
// *DamagedError (ErrDamaged).
func (s *Store) Get(ctx context.Context, path string) (Info, []byte, error) {
	return s.getWhole(ctx, path)
}

// Stat returns the latest version of path, strongly consistent; a missing or
// deleted path gives an error matching metastore.ErrNotFound.
func (s *Store) Stat(ctx context.Context, path string) (Info, error) {
	m, err := s.StatMany(ctx, []string{path})
	if err != nil {
		return Info{}, err
	}
	info, ok := m[path]
	if !ok || info.Deleted {
		return Info{}, metastore.NotFound(path)
	}
	return info, nil
}

// StatMany returns the latest state of each of paths that has one,
// tombstones included (Deleted set), strongly consistent: the batch lookup
// of known paths a scoped push makes.
func (s *Store) StatMany(ctx context.Context, paths []string) (map[string]Info, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	for _, p := range paths {
		if err := ValidatePath(p); err != nil {
			return nil, err
		}
	}
	if len(paths) == 0 {
		return map[string]Info{}, nil
	}
	return s.d.Stat(ctx, slices.Compact(slices.Sorted(slices.Values(paths))))
}

// Page is one page of List.
type Page struct {
	Files  []Info
	Cursor string
}

// List returns one page of the live files under prefix, at most limit (1 to
// MaxListLimit), and a cursor to continue; an empty cursor means done. A
// page may be empty while its cursor is not.
func (s *Store) List(ctx context.Context, prefix string, limit int, cur string) (Page, error) {
	if err := s.open(); err != nil {
		return Page{}, err
	}
	if prefix != "" && (!utf8Valid(prefix) || strings.ContainsRune(prefix, 0) || len(prefix) > MaxPathBytes) {
		return Page{}, fmt.Errorf("%w: prefix %q", metastore.ErrInvalidKey, prefix)
	}
	if limit < 1 || limit > MaxListLimit {
		return Page{}, fmt.Errorf("%w: page limit %d is outside 1..%d", metastore.ErrInvalidArgument, limit, MaxListLimit)
	}
	var pos []byte
	if cur != "" {
		var err error
		if pos, err = decodeCursor(cur, s.d.Name(), prefix); err != nil {
			return Page{}, err
		}
	}
	files, next, err := s.d.List(ctx, prefix, limit, pos)
	if err != nil {
		return Page{}, err
	}
	p := Page{Files: files}
	if next != nil {
		p.Cursor = encodeCursor(s.d.Name(), prefix, next)
	}
	return p, nil
}

// ListAll drains List and returns the live files under prefix, sorted.
func (s *Store) ListAll(ctx context.Context, prefix string) ([]Info, error) {
	var all []Info
	cur := ""
	for {
		p, err := s.List(ctx, prefix, 1000, cur)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Files...)
		if cur = p.Cursor; cur == "" {
			break
		}
	}
	slices.SortFunc(all, func(a, b Info) int { return strings.Compare(a.Path, b.Path) })
	return slices.CompactFunc(all, func(a, b Info) bool { return a.Path == b.Path }), nil
}

// Head returns partition's feed head.
func (s *Store) Head(ctx context.Context, partition string) (Head, error) {
	if err := s.open(); err != nil {
		return Head{}, err
	}
	if err := ValidatePartition(partition); err != nil {
		return Head{}, err
	}
	return s.d.Head(ctx, partition)
}

// Changes returns the changes of partition after position after, at most
// limit (1 to MaxListLimit) in position order, and the position up to which
// the caller has then seen everything: pass it as after next time. Zero is
// the position before the first change. A position below the partition's
// floor gives ErrHorizon: resync the partition (Head, then ListAll, then
// Changes from that head).
func (s *Store) Changes(ctx context.Context, partition string, after uint64, limit int) ([]Info, uint64, error) {
	if err := s.open(); err != nil {
		return nil, 0, err
	}
	if err := ValidatePartition(partition); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, 0, fmt.Errorf("%w: limit %d is outside 1..%d", metastore.ErrInvalidArgument, limit, MaxListLimit)
	}
	return s.d.Changes(ctx, partition, after, limit)
}

// Partitions returns every partition that has had a change, sorted (a
// driver may also list one whose first commit was refused after it joined
// the registry; its head is then zero).
func (s *Store) Partitions(ctx context.Context) ([]string, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.d.Partitions(ctx)
}

// ChangedPartitions returns the heads of the partitions that changed since
// cursor ("" for all that ever changed) and the cursor to pass next time.
func (s *Store) ChangedPartitions(ctx context.Context, cursor string) ([]Head, string, error) {
	if err := s.open(); err != nil {
		return nil, "", err
	}
	var pos []byte
	if cursor != "" {
		var err error
		if pos, err = decodeCursor(cursor, s.d.Name(), "\x00feed"); err != nil {
			return nil, "", err
		}
	}
	heads, next, err := s.d.ChangedPartitions(ctx, pos)
	if err != nil {
		return nil, "", err
	}
	return heads, encodeCursor(s.d.Name(), "\x00feed", next), nil
}

// Reclaim deletes expired uploads and replaced versions' chunks and purges
// tombstones beyond the horizon (see ReclaimOptions).
func (s *Store) Reclaim(ctx context.Context, o ReclaimOptions) (ReclaimStats, error) {
	if err := s.open(); err != nil {
		return ReclaimStats{}, err
	}
	if o.Grace < 0 || o.Horizon < 0 || o.UploadGrace < 0 {
		return ReclaimStats{}, fmt.Errorf("%w: negative grace or horizon", metastore.ErrInvalidArgument)
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.UploadGrace == 0 {
		o.UploadGrace = o.Grace
	}
	if o.Horizon == 0 {
		o.Horizon = DefaultHorizon
	}
	return s.d.Reclaim(ctx, s.now(), o)
}

// Close closes the backend. Operations after Close return ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) || s.borrowed {
		return nil
	}
	return s.d.Close()
}
