package lock

import (
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// Limits of a lock name. A namespace is one path segment; the name within it
// may have several.
const (
	MaxNamespaceBytes = 64
	MaxNameBytes      = 512
)

// lockName is a parsed NAMESPACE/NAME.
type lockName struct {
	ns, name string
}

func (n lockName) String() string { return n.ns + "/" + n.name }

// The keys of a lock in the lock keyspace. The lock record and the expiry
// record live under different first segments so that a namespace's locks
// are listed with one prefix each, and the generation counter of a namespace
// is a key no lock name can produce.
func (n lockName) lockKey() string   { return "rec/" + n.ns + "/" + n.name }
func (n lockName) expiryKey() string { return "exp/" + n.ns + "/" + n.name }
func genKey(ns string) string        { return "gen/" + ns }

// ParseName splits "NAMESPACE/NAME" and validates both parts: the namespace
// is 1 to 64 bytes of letters, digits, '.', '_' and '-'; the name is 1 to 512
// bytes of the same and '/', without empty segments. A name outside these
// rules is refused with ErrInvalidArgument, never rewritten.
func ParseName(s string) (namespace, name string, err error) {
	n, err := parseName(s)
	return n.ns, n.name, err
}

func parseName(s string) (lockName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return lockName{}, fmt.Errorf("%w: lock name %q must be NAMESPACE/NAME", metastore.ErrInvalidArgument, s)
	}
	if err := ValidateNamespace(ns); err != nil {
		return lockName{}, err
	}
	if len(name) == 0 || len(name) > MaxNameBytes {
		return lockName{}, fmt.Errorf("%w: lock name %q: NAME must be 1 to %d bytes", metastore.ErrInvalidArgument, s, MaxNameBytes)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || !validSegment(seg) {
			return lockName{}, fmt.Errorf("%w: lock name %q: NAME takes letters, digits, '.', '_', '-' and '/' between non-empty segments", metastore.ErrInvalidArgument, s)
		}
	}
	return lockName{ns: ns, name: name}, nil
}

// ValidateNamespace returns nil if ns is a valid namespace.
func ValidateNamespace(ns string) error {
	if len(ns) == 0 || len(ns) > MaxNamespaceBytes || !validSegment(ns) {
		return fmt.Errorf("%w: lock namespace %q must be 1 to %d letters, digits, '.', '_' or '-'", metastore.ErrInvalidArgument, ns, MaxNamespaceBytes)
	}
	return nil
}

func validSegment(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return s != "." && s != ".."
}
