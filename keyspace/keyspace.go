// Package keyspace maps a logical key to its place in the prefix-isolated v2
// layout: its family, its shard and the DynamoDB partition ("bucket") that
// holds it. It does no I/O; the store and the migrator share it so that they
// can never compute different buckets for one key.
//
// # Families and shard counts
//
// The family of a key is its first path segment, "root" for a key without
// "/". The shard count of a family depends on its write rate:
//
//	append-operation                 64 shards (high-rate append families)
//	lance-manifest, manifest         32 shards (manifest families)
//	every other family (tbl, lease,  8 shards (registry and default families)
//	tombstone, root, ...)
//
// # Hash format
//
// shard = the first 8 bytes of SHA-256(complete key), read big-endian as an
// unsigned integer, modulo the family's shard count. The bucket is the family,
// "#", and the shard in three decimal digits ("tbl#005"). Because the shard
// part has a fixed width, two different (family, shard) pairs never give the
// same bucket.
//
// The counts and the format are frozen into a table's layout parameters when
// the table is created; Params.Equal tells whether a process agrees with
// them, and a store that does not must refuse to open.
package keyspace

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// HashFormat names the key-to-shard function described in the package doc.
// NB: must not change; a new function gets a new name.
const HashFormat = "sha256-first8-be-mod"

// BucketFormat names how a bucket is written from a family and a shard.
// NB: must not change; a new format gets a new name.
const BucketFormat = "family#%03d"

// MaxShards is the largest shard count BucketFormat can write.
const MaxShards = 999

// Default shard counts.
const (
	AppendShards   = 64
	ManifestShards = 32
	DefaultShards  = 8
)

// Params are a v2 table's frozen layout parameters.
type Params struct {
	HashFormat    string         `json:"hash_format"`
	BucketFormat  string         `json:"bucket_format"`
	DefaultShards int            `json:"default_shards"`
	Families      map[string]int `json:"families"` // shard count by family, where it is not DefaultShards
}

// DefaultParams returns the parameters new v2 tables are created with.
func DefaultParams() Params {
	return Params{
		HashFormat:    HashFormat,
		BucketFormat:  BucketFormat,
		DefaultShards: DefaultShards,
		Families: map[string]int{
			"append-operation": AppendShards,
			"lance-manifest":   ManifestShards,
			"manifest":         ManifestShards,
		},
	}
}

// Validate reports whether p can be used by this binary.
func (p Params) Validate() error {
	if p.HashFormat != HashFormat {
		return fmt.Errorf("unknown hash format %q (this binary knows %q)", p.HashFormat, HashFormat)
	}
	if p.BucketFormat != BucketFormat {
		return fmt.Errorf("unknown bucket format %q (this binary knows %q)", p.BucketFormat, BucketFormat)
	}
	if p.DefaultShards < 1 || p.DefaultShards > MaxShards {
		return fmt.Errorf("default shard count %d is outside 1..%d", p.DefaultShards, MaxShards)
	}
	for f, n := range p.Families {
		if n < 1 || n > MaxShards {
			return fmt.Errorf("family %q has shard count %d, outside 1..%d", f, n, MaxShards)
		}
	}
	return nil
}

// Equal reports whether p and q compute the same bucket for every key.
func (p Params) Equal(q Params) bool {
	if p.HashFormat != q.HashFormat || p.BucketFormat != q.BucketFormat || p.DefaultShards != q.DefaultShards {
		return false
	}
	// A family listed with the default count is the same as one not listed.
	for _, f := range slices.Concat(slices.Collect(maps.Keys(p.Families)), slices.Collect(maps.Keys(q.Families))) {
		if p.Shards(f) != q.Shards(f) {
			return false
		}
	}
	return true
}

// Marshal encodes p for its control record.
func (p Params) Marshal() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return b
}

// Unmarshal decodes and validates a control record written by Marshal.
func Unmarshal(b []byte) (Params, error) {
	var p Params
	if err := json.Unmarshal(b, &p); err != nil {
		return Params{}, fmt.Errorf("layout parameters: %w", err)
	}
	return p, p.Validate()
}

// Shards returns the shard count of family.
func (p Params) Shards(family string) int {
	if n, ok := p.Families[family]; ok {
		return n
	}
	return p.DefaultShards
}

// Shard returns the shard of key within its family.
func (p Params) Shard(key string) int {
	sum := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(p.Shards(metastore.Family(key))))
}

// Bucket returns the bucket of a family's shard.
func Bucket(family string, shard int) string {
	return fmt.Sprintf("%s#%03d", family, shard)
}

// BucketOf returns the bucket that holds key.
func (p Params) BucketOf(key string) string {
	return Bucket(metastore.Family(key), p.Shard(key))
}

// PinnedFamily returns the one family every key under prefix belongs to, and
// true, when prefix contains "/". A prefix without "/" can match keys of the
// root family and of every family whose name starts with it: see Matches.
func PinnedFamily(prefix string) (string, bool) {
	if i := strings.IndexByte(prefix, '/'); i >= 0 {
		return prefix[:i], true
	}
	return "", false
}

// FamilyMatches reports whether a key of family can start with prefix, for
// a prefix without "/". Root keys have no "/" and may start with any such
// prefix; a key of family f is f + "/" + rest, so it can start with a
// "/"-free prefix only if f itself starts with it.
func FamilyMatches(family, prefix string) bool {
	return family == metastore.RootFamily || strings.HasPrefix(family, prefix)
}

// Barrier returns the write-barrier shard of key among n shards (n < 1 is
// treated as 1). It is the hash of Params.Shard (HashFormat) over the
// complete key, modulo n: a key's dual mutations check barrier item
// Barrier(key, n), so the fleet's writes spread over the n items.
// NB: must not change; stores of one table must agree on it.
func Barrier(key string, n int) int {
	if n < 1 {
		n = 1
	}
	sum := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(n))
}
