package keyspace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
)

// TestShardIsFrozen pins the hash format: these buckets are written in
// existing tables, so a change here corrupts data. NB: must not change.
func TestShardIsFrozen(t *testing.T) {
	p := DefaultParams()
	// Computed independently: int.from_bytes(sha256(key)[:8], "big") % count.
	frozen := map[string]string{
		"tbl/orders":                     "tbl#007",
		"append-operation/orders/000042": "append-operation#047",
		"lance-manifest/orders/7":        "lance-manifest#002",
		"rootkey":                        "root#001",
		"lease/orders":                   "lease#006",
	}
	for key, want := range frozen {
		if got := p.BucketOf(key); got != want {
			t.Errorf("BucketOf(%q) = %q, want %q (the hash format is frozen)", key, got, want)
		}
	}
}

func TestShardCounts(t *testing.T) {
	p := DefaultParams()
	for family, want := range map[string]int{"append-operation": 64, "lance-manifest": 32, "manifest": 32, "tbl": 8, "root": 8, "lease": 8} {
		if got := p.Shards(family); got != want {
			t.Errorf("Shards(%q) = %d, want %d", family, got, want)
		}
	}
	// Every shard of a family is reached by some key, and no key leaves its range.
	seen := map[int]bool{}
	for i := range 5000 {
		s := p.Shard(fmt.Sprintf("append-operation/t/%06d", i))
		if s < 0 || s >= 64 {
			t.Fatalf("shard %d out of range", s)
		}
		seen[s] = true
	}
	if len(seen) != 64 {
		t.Fatalf("5000 keys reached %d of 64 shards", len(seen))
	}
}

func TestBucketInjective(t *testing.T) {
	seen := map[string][2]string{}
	for _, f := range []string{"a", "a#1", "a#", "#", "", "a#001", "tbl"} {
		for s := range 12 {
			b := Bucket(f, s)
			if prev, ok := seen[b]; ok {
				t.Fatalf("bucket %q from (%q,%d) and (%q,%s)", b, f, s, prev[0], prev[1])
			}
			seen[b] = [2]string{f, fmt.Sprint(s)}
		}
	}
}

func TestParams(t *testing.T) {
	p := DefaultParams()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	q, err := Unmarshal(p.Marshal())
	if err != nil || !p.Equal(q) {
		t.Fatalf("round trip: %v, equal %v", err, p.Equal(q))
	}
	q.Families = map[string]int{"append-operation": 64, "lance-manifest": 32, "manifest": 32, "tbl": 8}
	if !p.Equal(q) {
		t.Fatal("listing a family at the default count changes nothing")
	}
	q.Families["tbl"] = 16
	if p.Equal(q) {
		t.Fatal("a different count for tbl must not be equal")
	}
	r := DefaultParams()
	r.HashFormat = "md5"
	if r.Validate() == nil || p.Equal(r) {
		t.Fatal("an unknown hash format must be refused")
	}
	for _, bad := range []string{"", "{", `{"hash_format":"sha256-first8-be-mod","bucket_format":"family#%03d","default_shards":0}`} {
		if _, err := Unmarshal([]byte(bad)); err == nil {
			t.Errorf("Unmarshal(%q) accepted", bad)
		}
	}
}

func TestFamilyMatching(t *testing.T) {
	if f, ok := PinnedFamily("tbl/or"); !ok || f != "tbl" {
		t.Fatalf("PinnedFamily(tbl/or) = %q, %v", f, ok)
	}
	if _, ok := PinnedFamily("tbl"); ok {
		t.Fatal("tbl pins no family")
	}
	// For every key and "/"-free prefix: key starts with prefix only if its
	// family matches the prefix.
	keys := []string{"tbl/a", "tbl", "tb", "tblx/y", "root/x", "rootkey", "append-operation/1", "/lead"}
	for _, k := range keys {
		for _, p := range []string{"", "t", "tb", "tbl", "r", "root", "a", "x"} {
			if strings.HasPrefix(k, p) && !FamilyMatches(metastore.Family(k), p) {
				t.Errorf("key %q under prefix %q but family %q does not match", k, p, metastore.Family(k))
			}
		}
	}
}

// TestBarrierIsFrozen pins the barrier hash: stores of one table that
// disagree on it would check different barrier items, and a write could
// slip past a finalization. NB: must not change.
func TestBarrierIsFrozen(t *testing.T) {
	// Computed independently: int.from_bytes(sha256(key)[:8], "big") % 16.
	frozen := map[string]int{"tbl/orders": 15, "append-operation/orders/000042": 15, "lease/orders": 14, "rootkey": 1}
	for key, want := range frozen {
		if got := Barrier(key, 16); got != want {
			t.Errorf("Barrier(%q, 16) = %d, want %d (the barrier hash is frozen)", key, got, want)
		}
	}
	if got := Barrier("tbl/orders", 0); got != 0 {
		t.Errorf("Barrier with n = 0 = %d, want 0", got)
	}
}
