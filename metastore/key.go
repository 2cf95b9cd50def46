package metastore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of the contract. NB: these are part of the on-disk and on-wire
// contract of every backend; they must not grow without checking that a
// maximal key and value still fit one DynamoDB item on every layout.
const (
	// MaxKeyBytes is the longest key, in bytes.
	MaxKeyBytes = 1024
	// MaxValueBytes is the largest value, in bytes (350 KiB).
	MaxValueBytes = 350 * 1024
	// MaxListLimit is the largest page a List may ask for.
	MaxListLimit = 10000
	// DefaultPageSize is the page size ListAll drains with.
	DefaultPageSize = 1000
	// MaxPageBytes is the byte budget of one List page, counted as the
	// sum of its keys' and values' lengths (1 MiB, like DynamoDB's 1 MB
	// page): a page ends before the item that would take it over the
	// budget, and always holds at least one item, so a page holds at most
	// max(MaxPageBytes, one item) bytes whatever its limit.
	MaxPageBytes = 1 << 20
)

// ItemBytes is what an item counts against MaxPageBytes.
func ItemBytes(key string, value []byte) int { return len(key) + len(value) }

// PageFull reports whether a page that holds n items of used bytes must end
// before an item of next bytes: it would go over MaxPageBytes, and the page
// already holds at least one item. Every driver's List uses it.
func PageFull(n, used, next int) bool { return n > 0 && used+next > MaxPageBytes }

// ControlPrefix starts every key lake keeps for itself (migration state,
// barrier, cursor, node registry, family registry, layout parameters). A user
// key cannot start with it: the Store refuses such keys with ErrReservedKey and
// no listing ever returns them.
//
// NB: must not change; it is written in every existing table and file.
const ControlPrefix = "__lake__/"

// RootFamily is the family of keys that have no "/".
const RootFamily = "root"

// Family returns the family of key: its first path segment, or RootFamily for
// a key without "/".
func Family(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return RootFamily
}

// IsControlKey reports whether key is under ControlPrefix.
func IsControlKey(key string) bool { return strings.HasPrefix(key, ControlPrefix) }

// ValidateKey returns nil if key is a valid user key, or an error that
// matches ErrInvalidKey or ErrReservedKey.
func ValidateKey(key string) error {
	if err := validateKeyShape(key); err != nil {
		return err
	}
	if IsControlKey(key) {
		return fmt.Errorf("%w: %q is under the reserved prefix %q", ErrReservedKey, key, ControlPrefix)
	}
	return nil
}

// ValidateControlKey is ValidateKey for lake's own records: the key must be
// well formed and under ControlPrefix.
func ValidateControlKey(key string) error {
	if err := validateKeyShape(key); err != nil {
		return err
	}
	if !IsControlKey(key) {
		return fmt.Errorf("%w: control key %q is not under %q", ErrInvalidKey, key, ControlPrefix)
	}
	return nil
}

func validateKeyShape(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key %q contains a NUL byte", ErrInvalidKey, key)
	}
	return nil
}

// ValidatePrefix returns nil if prefix may be listed. The empty prefix is
// valid and lists every user key. A prefix under ControlPrefix is refused.
func ValidatePrefix(prefix string) error {
	switch {
	case len(prefix) > MaxKeyBytes:
		return fmt.Errorf("%w: prefix is %d bytes, the limit is %d", ErrInvalidKey, len(prefix), MaxKeyBytes)
	case !utf8.ValidString(prefix):
		return fmt.Errorf("%w: prefix %q is not valid UTF-8", ErrInvalidKey, prefix)
	case strings.IndexByte(prefix, 0) >= 0:
		return fmt.Errorf("%w: prefix %q contains a NUL byte", ErrInvalidKey, prefix)
	case IsControlKey(prefix):
		return fmt.Errorf("%w: prefix %q is under the reserved prefix %q", ErrReservedKey, prefix, ControlPrefix)
	}
	return nil
}

// ValidateValue returns nil if v fits the value limit, or an error that
// matches ErrInvalidValue.
func ValidateValue(v []byte) error {
	if len(v) > MaxValueBytes {
		return fmt.Errorf("%w: value is %d bytes, the limit is %d", ErrInvalidValue, len(v), MaxValueBytes)
	}
	return nil
}
