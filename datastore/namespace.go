package datastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// DefaultNamespace is the namespace of the root: the tree a datastore held
// before it had namespaces, and the one a command uses without --namespace.
const DefaultNamespace = "default"

// CatalogScope is the internal namespace that holds the catalog (package
// catalog). Its name cannot be a user's namespace.
const CatalogScope = "_catalog"

// FlatScope reports whether the internal scope name holds only paths none
// of which is another's directory, by construction: the catalog's rows
// (NAMESPACE/TYPE/ID, or NAMESPACE/ and a longer model escaped as one
// segment), which only package catalog writes. A driver may leave out the
// file-or-directory checks of a commit there (issue 31: on DynamoDB a new
// row's put Queried its partition for a row below it, one request in
// every sync that made a model). A user's namespace is never flat.
func FlatScope(name string) bool { return name == CatalogScope }

// nsRE is a namespace name: one path segment of letters, digits, '.', '_'
// and '-', starting with a letter or digit (so that "_catalog" and other
// internal scopes can never be a user's).
var nsRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidateNamespace returns nil if name is a valid namespace: 1 to 64
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidateNamespace(name string) error {
	if !nsRE.MatchString(name) {
		return fmt.Errorf("%w: namespace %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", metastore.ErrInvalidArgument, name)
	}
	return nil
}

// nsRegistryPrefix holds one record per namespace that ever committed,
// valued with its configuration. Its first segment is none of the lock
// package's (rec, exp, gen), so the two keyspaces never meet.
const nsRegistryPrefix = "datastore/namespaces/"

// NamespaceRecords is the prefix of the namespace registry's records
// (Records keys NamespaceRecords+NAME, one per namespace), for a driver
// that keeps them apart from its other records (s3fs: beside each
// namespace's heads, where a sync's listing sees them change).
const NamespaceRecords = nsRegistryPrefix

// Lifecycle is a namespace's policy for what lake may expire on its own
// (package lifecycle applies it).
type Lifecycle struct {
	// Enabled lets every sync in the namespace expire, under its lock, what
	// the policy names; off, only `lake data prune --apply` deletes.
	Enabled bool `json:"enabled"`
	// KeepLast keeps the newest KeepLast versions of each data name of a
	// live model and lets older ones go; zero keeps every version.
	KeepLast int `json:"keepLast,omitempty"`
	// Retention is how long the data of a deleted model is kept before it
	// can be pruned; zero means at once.
	Retention time.Duration `json:"retention,omitempty"`
	// Horizon is how long tombstones stay in the namespace's feeds and in
	// its catalog rows' feed before a lifecycle Reclaim purges them (a
	// puller away longer resyncs); zero means DefaultHorizon.
	Horizon time.Duration `json:"horizon,omitempty"`
}

// NamespaceConfig is a namespace's entry in the registry.
type NamespaceConfig struct {
	Name      string    `json:"-"`
	Created   time.Time `json:"created"`
	Lifecycle Lifecycle `json:"lifecycle"`
	// Layout is the datastore's layout as its record named it when this
	// entry was written, or "" (an entry written before issue 31, or by a
	// process that had not read the record): a process that remembers
	// the same layout takes the entry's read as the record's
	// (layoutproof.go).
	Layout string `json:"layout,omitempty"`
}

// maxCachedScopes bounds the scopes a process keeps open, so that a client
// naming ever new namespaces (through a node) cannot grow it without bound;
// beyond it a scope is opened afresh on each call.
const maxCachedScopes = 4096

// namespaceState is what the Stores of one backend share about namespaces.
type namespaceState struct {
	mu         sync.Mutex
	registered map[string]bool
	// scopes caches the Store of each scope opened: opening one may cost
	// a write (bolt creates its buckets).
	scopes map[string]*Store
}

// Namespace returns the Store of namespace name over the same backend:
// DefaultNamespace (or "") is the root, any other valid name a namespace of
// its own, registered at its first commit. The returned Store shares s's
// backend; closing it closes nothing.
func (s *Store) Namespace(name string) (*Store, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if name == "" || name == DefaultNamespace {
		return s.root, nil
	}
	if err := ValidateNamespace(name); err != nil {
		return nil, err
	}
	return s.root.scope(name)
}

// scope returns the Store of any scope, internal ones included.
func (s *Store) scope(name string) (*Store, error) {
	nss := s.root.nss
	nss.mu.Lock()
	defer nss.mu.Unlock()
	if ns, ok := nss.scopes[name]; ok {
		return ns, nil
	}
	d, err := s.root.d.Namespace(name)
	if err != nil {
		return nil, err
	}
	root := s.root
	ns := &Store{d: d, now: func() time.Time { return root.now() }, root: root, ns: name, borrowed: true, nss: nss}
	if nss.scopes == nil {
		nss.scopes = map[string]*Store{}
	}
	if len(nss.scopes) < maxCachedScopes {
		nss.scopes[name] = ns
	}
	return ns, nil
}

// CatalogStore returns the Store of the internal catalog scope (package
// catalog reads and writes it).
func (s *Store) CatalogStore() (*Store, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.root.scope(CatalogScope)
}

// NamespaceName returns the namespace s is in (DefaultNamespace for the
// root).
func (s *Store) NamespaceName() string {
	if s.ns == "" {
		return DefaultNamespace
	}
	return s.ns
}

// Root returns the Store of the default namespace over the same backend.
func (s *Store) Root() *Store { return s.root }

// register records s's namespace in the registry once per process, before
// its first commit, so that Namespaces lists it.
func (s *Store) register(ctx context.Context) error {
	if s.registeredHere() {
		return nil
	}
	v, _ := json.Marshal(NamespaceConfig{Created: s.now().UTC(), Layout: s.provenLayout()})
	err := s.root.Records().CASRecord(ctx, nsRegistryPrefix+s.ns, metastore.ExpectAbsent(), v)
	if err != nil && !errors.Is(err, metastore.ErrConflict) {
		return fmt.Errorf("register namespace %s: %w", s.ns, err)
	}
	s.nss.mu.Lock()
	s.nss.registered[s.ns] = true
	s.nss.mu.Unlock()
	return nil
}

// registeredHere reports whether s's namespace needs no registration by
// this process: the root and the internal scopes are never registered, and
// a namespace is once per process (register, knownRegistered).
func (s *Store) registeredHere() bool {
	if s.ns == "" || strings.HasPrefix(s.ns, "_") {
		return true
	}
	s.nss.mu.Lock()
	defer s.nss.mu.Unlock()
	return s.nss.registered[s.ns]
}

// Namespaces returns every namespace: DefaultNamespace and each one that
// ever committed, sorted, with its configuration.
func (s *Store) Namespaces(ctx context.Context) ([]NamespaceConfig, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	recs, err := s.root.Records().ListRecords(ctx, nsRegistryPrefix)
	if err != nil {
		return nil, err
	}
	out := []NamespaceConfig{{Name: DefaultNamespace}}
	for _, r := range recs {
		var c NamespaceConfig
		if err := json.Unmarshal(r.Value, &c); err != nil {
			return nil, Damaged("record "+r.Key, "not a namespace registry record (%v)", err)
		}
		c.Name = strings.TrimPrefix(r.Key, nsRegistryPrefix)
		if c.Name == DefaultNamespace {
			out[0] = c // a policy set on the root
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b NamespaceConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Config returns the configuration of s's namespace (the zero policy if it
// has none yet).
func (s *Store) Config(ctx context.Context) (NamespaceConfig, error) {
	c, _, err := s.config(ctx)
	return c, err
}

func (s *Store) config(ctx context.Context) (NamespaceConfig, []byte, error) {
	if err := s.open(); err != nil {
		return NamespaceConfig{}, nil, err
	}
	name := s.NamespaceName()
	raw, err := s.root.Records().GetRecord(ctx, nsRegistryPrefix+name)
	if errors.Is(err, metastore.ErrNotFound) {
		return NamespaceConfig{Name: name}, nil, nil
	}
	if err != nil {
		return NamespaceConfig{}, nil, err
	}
	var c NamespaceConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return NamespaceConfig{}, nil, Damaged("record "+nsRegistryPrefix+name, "not the namespace's registry record (%v)", err)
	}
	c.Name = name
	s.knownRegistered()
	s.layoutFromEntry(c.Layout) // layoutproof.go
	return c, raw, nil
}

// knownRegistered records that s's namespace record was read (issue 31): a
// later commit of this process need not register it (register's
// conditional put, one request a process, so one a `lake data sync`, which
// reads the record for its lifecycle policy anyway). It cannot be wrong for
// lake: no lake code deletes a namespace record (SetLifecycle rewrites it
// with a compare-and-swap, never removes it), so read present, it stays
// present. A foreign writer who deletes it after the read is in the case
// the per-process cache always accepted (it could delete it right after
// register's put): Namespaces misses the namespace until a process that
// finds no record commits in it, which the next sync does (its read finds
// none, so its commit registers: TestNamespaceRecordReadIsRegistration).
func (s *Store) knownRegistered() {
	if s.ns == "" || strings.HasPrefix(s.ns, "_") {
		return
	}
	s.nss.mu.Lock()
	s.nss.registered[s.ns] = true
	s.nss.mu.Unlock()
}

// SetLifecycle replaces the lifecycle policy of s's namespace (registering
// the namespace if it is not yet), with a compare-and-swap so that two
// concurrent changes do not lose one.
func (s *Store) SetLifecycle(ctx context.Context, l Lifecycle) (NamespaceConfig, error) {
	if l.KeepLast < 0 || l.Retention < 0 || l.Horizon < 0 {
		return NamespaceConfig{}, fmt.Errorf("%w: lifecycle keep-last, retention and horizon must not be negative", metastore.ErrInvalidArgument)
	}
	for range 10 {
		c, raw, err := s.config(ctx)
		if err != nil {
			return NamespaceConfig{}, err
		}
		expect := metastore.ExpectValue(raw)
		if raw == nil {
			expect = metastore.ExpectAbsent()
			c.Created = s.now().UTC()
		}
		c.Lifecycle = l
		if proven := s.provenLayout(); proven != "" {
			c.Layout = proven
		}
		v, _ := json.Marshal(c)
		err = s.root.Records().CASRecord(ctx, nsRegistryPrefix+c.Name, expect, v)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return NamespaceConfig{}, err
		}
	}
	return NamespaceConfig{}, fmt.Errorf("%w: namespace %s's configuration kept changing", metastore.ErrUnavailable, s.NamespaceName())
}

// DropPartition removes everything partition holds (see
// Driver.DropPartition), fenced by fence if it is not nil.
func (s *Store) DropPartition(ctx context.Context, fence *Fence, partition string) (DropStats, error) {
	if err := s.checkDrop(fence, partition); err != nil {
		return DropStats{}, err
	}
	return s.d.DropPartition(ctx, fence, partition, s.now())
}

// checkDrop opens s and refuses a drop of partition, fenced by fence,
// that no driver should be asked for: a bad partition name, a bad fence
// key.
func (s *Store) checkDrop(fence *Fence, partition string) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := ValidatePartition(partition); err != nil {
		return err
	}
	if fence != nil {
		if err := metastore.ValidateKey(fence.Key); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
	}
	return nil
}
