// Package storetest is the conformance suite of the metastore contract.
// Every backend runs it with one call from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store { return newStore(t) })
//	}
//
// Each behaviour is its own subtest and gets a fresh, empty store from the
// harness, which must register any cleanup with t.Cleanup.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/internal/cursor"
)

// Harness returns a fresh, empty store for one subtest.
type Harness func(t *testing.T) *metastore.Store

// RunConformanceTests runs the whole suite against the stores newStore makes.
func RunConformanceTests(t *testing.T, newStore Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *metastore.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"EmptyAndBinaryValues", testEmptyAndBinaryValues},
		{"CAS", testCAS},
		{"Delete", testDelete},
		{"GuardedMutate", testGuardedMutate},
		{"KeyAndValueLimits", testLimits},
		{"ReservedPrefix", testReserved},
		{"ListEmptyAndMissingPrefixes", testListEmpty},
		{"ListPrefixIsolation", testListPrefixIsolation},
		{"ListPagesLimitOne", testListLimitOne},
		{"ListCursorRoundTrips", testListCursorRoundTrips},
		{"ListBadLimits", testListBadLimits},
		{"ListBadCursors", testListBadCursors},
		{"ListAllSorted", testListAllSorted},
		{"ListByteBudget", testListByteBudget},
		{"CanceledContext", testCanceled},
		{"ConcurrentCASIncrements", testConcurrentCAS},
		{"ConcurrentCreateIfAbsent", testConcurrentCreate},
		{"GuardChangedConcurrently", testGuardChangedConcurrently},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustPut(t *testing.T, s *metastore.Store, key, value string) {
	t.Helper()
	if err := s.Put(ctx(t), key, []byte(value)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

// wantValue fails t unless key holds exactly want.
func wantValue(t *testing.T, s *metastore.Store, key, want string) {
	t.Helper()
	got, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v, want %q", key, err, want)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

// wantAbsent fails t unless key is absent.
func wantAbsent(t *testing.T, s *metastore.Store, key string) {
	t.Helper()
	got, err := s.Get(ctx(t), key)
	if !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	if !strings.HasPrefix(err.Error(), "lake: ") && !strings.Contains(err.Error(), "lake: ") {
		t.Fatalf("%s: error %q does not say it comes from lake", what, err)
	}
}

func testGetMissing(t *testing.T, s *metastore.Store) {
	wantAbsent(t, s, "tbl/missing")
	_, err := s.Get(ctx(t), "tbl/missing")
	if errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("not-found also matches ErrConflict: %v", err)
	}
}

func testPutGet(t *testing.T, s *metastore.Store) {
	mustPut(t, s, "tbl/orders", "v1")
	wantValue(t, s, "tbl/orders", "v1")
	mustPut(t, s, "tbl/orders", "v2")
	wantValue(t, s, "tbl/orders", "v2")
	mustPut(t, s, "rootkey", "r")
	wantValue(t, s, "rootkey", "r")
	mustPut(t, s, "append-operation/orders/000042", "op")
	wantValue(t, s, "append-operation/orders/000042", "op")
	mustPut(t, s, "tbl/ünïcødé/表/🦆", "u")
	wantValue(t, s, "tbl/ünïcødé/表/🦆", "u")
	// The returned slice is the caller's: changing it changes nothing stored.
	got, _ := s.Get(ctx(t), "tbl/orders")
	got[0] = 'X'
	wantValue(t, s, "tbl/orders", "v2")
}

func testEmptyAndBinaryValues(t *testing.T, s *metastore.Store) {
	mustPut(t, s, "tbl/empty", "")
	wantValue(t, s, "tbl/empty", "")
	// An empty value exists: creating over it conflicts, expecting it works.
	err := s.CAS(ctx(t), "tbl/empty", metastore.ExpectAbsent(), []byte("x"))
	wantErr(t, "CAS absent over empty value", err, metastore.ErrConflict)
	if err := s.CAS(ctx(t), "tbl/empty", metastore.ExpectValue(nil), []byte("x")); err != nil {
		t.Fatalf("CAS from empty value: %v", err)
	}
	wantValue(t, s, "tbl/empty", "x")

	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	if err := s.Put(ctx(t), "tbl/bin", bin); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx(t), "tbl/bin")
	if err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("binary round trip: %v, %x", err, got)
	}
	if err := s.Delete(ctx(t), "tbl/bin", bin); err != nil {
		t.Fatalf("Delete with binary expected: %v", err)
	}
	wantAbsent(t, s, "tbl/bin")
}

func testCAS(t *testing.T, s *metastore.Store) {
	k := "tbl/cas"
	if err := s.CAS(ctx(t), k, metastore.ExpectAbsent(), []byte("a")); err != nil {
		t.Fatalf("create: %v", err)
	}
	wantValue(t, s, k, "a")
	wantErr(t, "create over existing", s.CAS(ctx(t), k, metastore.ExpectAbsent(), []byte("b")), metastore.ErrConflict)
	wantValue(t, s, k, "a")
	wantErr(t, "wrong expected", s.CAS(ctx(t), k, metastore.ExpectValue([]byte("zzz")), []byte("b")), metastore.ErrConflict)
	wantErr(t, "expected prefix of value", s.CAS(ctx(t), k, metastore.ExpectValue([]byte("")), []byte("b")), metastore.ErrConflict)
	wantValue(t, s, k, "a")
	if err := s.CAS(ctx(t), k, metastore.ExpectValue([]byte("a")), []byte("b")); err != nil {
		t.Fatalf("swap: %v", err)
	}
	wantValue(t, s, k, "b")
	err := s.CAS(ctx(t), "tbl/nothing", metastore.ExpectValue([]byte("a")), []byte("b"))
	wantErr(t, "expected value on missing key", err, metastore.ErrConflict)
	var ce *metastore.ConflictError
	if !errors.As(err, &ce) || ce.Key != "tbl/nothing" {
		t.Fatalf("conflict error does not name its key: %#v", err)
	}
	wantAbsent(t, s, "tbl/nothing")
}

func testDelete(t *testing.T, s *metastore.Store) {
	mustPut(t, s, "tbl/d", "v")
	wantErr(t, "delete wrong value", s.Delete(ctx(t), "tbl/d", []byte("w")), metastore.ErrConflict)
	wantValue(t, s, "tbl/d", "v")
	if err := s.Delete(ctx(t), "tbl/d", []byte("v")); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantAbsent(t, s, "tbl/d")
	wantErr(t, "delete missing", s.Delete(ctx(t), "tbl/d", []byte("v")), metastore.ErrConflict)
	// A deleted key can be created again.
	if err := s.CAS(ctx(t), "tbl/d", metastore.ExpectAbsent(), []byte("again")); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	wantValue(t, s, "tbl/d", "again")
}

func testGuardedMutate(t *testing.T, s *metastore.Store) {
	g := metastore.Guard{Key: "lease/orders", Value: []byte("epoch-7")}
	mustPut(t, s, "lease/orders", "epoch-7")

	// Create under the guard.
	err := s.GuardedMutate(ctx(t), g, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectAbsent(), Value: []byte("m1")})
	if err != nil {
		t.Fatalf("guarded create: %v", err)
	}
	wantValue(t, s, "tbl/orders", "m1")
	// Update under the guard.
	err = s.GuardedMutate(ctx(t), g, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectValue([]byte("m1")), Value: []byte("m2")})
	if err != nil {
		t.Fatalf("guarded update: %v", err)
	}
	wantValue(t, s, "tbl/orders", "m2")
	// Target mismatch.
	err = s.GuardedMutate(ctx(t), g, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectValue([]byte("m1")), Value: []byte("m3")})
	wantErr(t, "target mismatch", err, metastore.ErrConflict)
	wantValue(t, s, "tbl/orders", "m2")
	// Guard mismatch, absent guard.
	bad := metastore.Guard{Key: "lease/orders", Value: []byte("epoch-6")}
	err = s.GuardedMutate(ctx(t), bad, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectValue([]byte("m2")), Value: []byte("m3")})
	wantErr(t, "guard mismatch", err, metastore.ErrConflict)
	missing := metastore.Guard{Key: "lease/none", Value: []byte("epoch-7")}
	err = s.GuardedMutate(ctx(t), missing, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectValue([]byte("m2")), Value: []byte("m3")})
	wantErr(t, "guard absent", err, metastore.ErrConflict)
	wantValue(t, s, "tbl/orders", "m2")
	wantValue(t, s, "lease/orders", "epoch-7")
	// Delete under the guard.
	err = s.GuardedMutate(ctx(t), g, metastore.Mutation{Key: "tbl/orders", Expect: metastore.ExpectValue([]byte("m2")), Delete: true})
	if err != nil {
		t.Fatalf("guarded delete: %v", err)
	}
	wantAbsent(t, s, "tbl/orders")
	wantValue(t, s, "lease/orders", "epoch-7")
	// Refused shapes.
	err = s.GuardedMutate(ctx(t), g, metastore.Mutation{Key: "lease/orders", Expect: metastore.ExpectValue([]byte("epoch-7")), Value: []byte("x")})
	wantErr(t, "guard == target", err, metastore.ErrInvalidArgument)
	err = s.GuardedMutate(ctx(t), g, metastore.Mutation{Key: "tbl/x", Expect: metastore.ExpectAbsent(), Delete: true})
	wantErr(t, "delete expecting absent", err, metastore.ErrInvalidArgument)
	wantValue(t, s, "lease/orders", "epoch-7")
}

func testLimits(t *testing.T, s *metastore.Store) {
	// A maximal key of multi-byte runes: exactly MaxKeyBytes bytes.
	maxKey := "tbl/" + strings.Repeat("é", (metastore.MaxKeyBytes-4)/2)
	if len(maxKey) != metastore.MaxKeyBytes {
		t.Fatalf("test bug: max key is %d bytes", len(maxKey))
	}
	maxVal := bytes.Repeat([]byte{0xAB}, metastore.MaxValueBytes)
	if err := s.Put(ctx(t), maxKey, maxVal); err != nil {
		t.Fatalf("max key and value: %v", err)
	}
	got, err := s.Get(ctx(t), maxKey)
	if err != nil || !bytes.Equal(got, maxVal) {
		t.Fatalf("max round trip: %v (len %d)", err, len(got))
	}
	if err := s.CAS(ctx(t), maxKey, metastore.ExpectValue(maxVal), maxVal[:10]); err != nil {
		t.Fatalf("CAS with a maximal expected value: %v", err)
	}
	items, err := s.ListAll(ctx(t), "tbl/")
	if err != nil || len(items) != 1 || items[0].Key != maxKey {
		t.Fatalf("listing the max key: %v, %d items", err, len(items))
	}

	over := append(bytes.Clone(maxVal), 0)
	cases := []struct {
		name string
		op   func() error
		want error
	}{
		{"empty key", func() error { return s.Put(ctx(t), "", nil) }, metastore.ErrInvalidKey},
		{"key one byte over", func() error { return s.Put(ctx(t), maxKey+"x", nil) }, metastore.ErrInvalidKey},
		{"key not UTF-8", func() error { return s.Put(ctx(t), "tbl/\xff\xfe", nil) }, metastore.ErrInvalidKey},
		{"key with NUL", func() error { return s.Put(ctx(t), "tbl/a\x00b", nil) }, metastore.ErrInvalidKey},
		{"get bad key", func() error { _, err := s.Get(ctx(t), ""); return err }, metastore.ErrInvalidKey},
		{"put value one byte over", func() error { return s.Put(ctx(t), "tbl/big", over) }, metastore.ErrInvalidValue},
		{"cas value one byte over", func() error { return s.CAS(ctx(t), "tbl/big", metastore.ExpectAbsent(), over) }, metastore.ErrInvalidValue},
		{"cas expected one byte over", func() error { return s.CAS(ctx(t), "tbl/big", metastore.ExpectValue(over), nil) }, metastore.ErrInvalidValue},
		{"delete expected one byte over", func() error { return s.Delete(ctx(t), "tbl/big", over) }, metastore.ErrInvalidValue},
		{"guarded value one byte over", func() error {
			return s.GuardedMutate(ctx(t), metastore.Guard{Key: "g/1", Value: nil}, metastore.Mutation{Key: "tbl/big", Value: over})
		}, metastore.ErrInvalidValue},
		{"guarded bad target key", func() error {
			return s.GuardedMutate(ctx(t), metastore.Guard{Key: "g/1"}, metastore.Mutation{Key: "tbl/\x00"})
		}, metastore.ErrInvalidKey},
	}
	for _, c := range cases {
		wantErr(t, c.name, c.op(), c.want)
	}
	wantAbsent(t, s, "tbl/big")
}

func testReserved(t *testing.T, s *metastore.Store) {
	k := metastore.ControlPrefix + "migration/state"
	wantErr(t, "put control key", s.Put(ctx(t), k, []byte("x")), metastore.ErrReservedKey)
	_, err := s.Get(ctx(t), k)
	wantErr(t, "get control key", err, metastore.ErrReservedKey)
	wantErr(t, "cas control key", s.CAS(ctx(t), k, metastore.ExpectAbsent(), nil), metastore.ErrReservedKey)
	wantErr(t, "delete control key", s.Delete(ctx(t), k, nil), metastore.ErrReservedKey)
	_, err = s.List(ctx(t), metastore.ControlPrefix, 10, "")
	wantErr(t, "list control prefix", err, metastore.ErrReservedKey)
	// Prefixes that contain the control prefix's start still list only user keys.
	mustPut(t, s, "__lake", "user")
	mustPut(t, s, "_x", "user")
	for _, p := range []string{"", "_", "__lake"} {
		items, err := s.ListAll(ctx(t), p)
		if err != nil {
			t.Fatalf("ListAll(%q): %v", p, err)
		}
		for _, it := range items {
			if metastore.IsControlKey(it.Key) {
				t.Fatalf("ListAll(%q) returned control key %q", p, it.Key)
			}
		}
	}
}

func testListEmpty(t *testing.T, s *metastore.Store) {
	for _, p := range []string{"", "tbl/", "nothing/here/"} {
		page, err := s.List(ctx(t), p, 10, "")
		if err != nil {
			t.Fatalf("List(%q) on empty store: %v", p, err)
		}
		drained := drain(t, s, p, 10, page)
		if len(drained) != 0 {
			t.Fatalf("List(%q) on empty store returned %d items", p, len(drained))
		}
	}
	mustPut(t, s, "tbl/a", "1")
	items, err := s.ListAll(ctx(t), "missing/")
	if err != nil || len(items) != 0 {
		t.Fatalf("ListAll(missing/) = %v, %v", items, err)
	}
}

// seed writes the keys with their own names as values.
func seed(t *testing.T, s *metastore.Store, keys []string) {
	t.Helper()
	for _, k := range keys {
		mustPut(t, s, k, "v:"+k)
	}
}

// drain follows page's cursor to the end and returns every item, checking
// each page's limit on the way.
func drain(t *testing.T, s *metastore.Store, prefix string, limit int, page metastore.Page) []metastore.Item {
	t.Helper()
	items := slices.Clone(page.Items)
	for rounds := 0; page.Cursor != ""; rounds++ {
		if rounds > 100000 {
			t.Fatalf("listing %q never ends", prefix)
		}
		var err error
		page, err = s.List(ctx(t), prefix, limit, page.Cursor)
		if err != nil {
			t.Fatalf("List(%q, %d, cursor): %v", prefix, limit, err)
		}
		if len(page.Items) > limit {
			t.Fatalf("page of %d items over limit %d", len(page.Items), limit)
		}
		items = append(items, page.Items...)
	}
	return items
}

// listPaged drains prefix in pages of limit.
func listPaged(t *testing.T, s *metastore.Store, prefix string, limit int) []metastore.Item {
	t.Helper()
	page, err := s.List(ctx(t), prefix, limit, "")
	if err != nil {
		t.Fatalf("List(%q, %d): %v", prefix, limit, err)
	}
	if len(page.Items) > limit {
		t.Fatalf("page of %d items over limit %d", len(page.Items), limit)
	}
	return drain(t, s, prefix, limit, page)
}

// wantKeys checks that items hold exactly want, each once, with values from seed.
func wantKeys(t *testing.T, what string, items []metastore.Item, want []string) {
	t.Helper()
	got := make([]string, 0, len(items))
	for _, it := range items {
		if string(it.Value) != "v:"+it.Key {
			t.Fatalf("%s: key %q has value %q", what, it.Key, it.Value)
		}
		got = append(got, it.Key)
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %d keys %q\nwant %d keys %q", what, len(got), got, len(want), want)
	}
}

var isolationKeys = []string{
	"tbl/orders", "tbl/orders2", "tbl/users", "tbl2/x", "tb", "tblx",
	"append-operation/orders/000001", "append-operation/orders/000002",
	"lance-manifest/orders/1", "lease/orders", "root1", "root2", "ünï/ç",
}

func filterPrefix(keys []string, p string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, p) {
			out = append(out, k)
		}
	}
	return out
}

func testListPrefixIsolation(t *testing.T, s *metastore.Store) {
	seed(t, s, isolationKeys)
	for _, p := range []string{"", "t", "tb", "tbl", "tbl/", "tbl/orders", "tbl2/", "append-operation/", "append-operation/orders/00000", "root", "ünï/", "ü", "zzz", "lease/orders"} {
		for _, limit := range []int{1, 3, 1000} {
			wantKeys(t, fmt.Sprintf("List(%q) in pages of %d", p, limit), listPaged(t, s, p, limit), filterPrefix(isolationKeys, p))
		}
	}
}

func manyKeys(n int) []string {
	keys := make([]string, 0, n)
	for i := range n {
		switch i % 3 {
		case 0:
			keys = append(keys, fmt.Sprintf("tbl/t%04d", i))
		case 1:
			keys = append(keys, fmt.Sprintf("append-operation/t%02d/%06d", i%7, i))
		default:
			keys = append(keys, fmt.Sprintf("k%04d", i))
		}
	}
	return keys
}

func testListLimitOne(t *testing.T, s *metastore.Store) {
	keys := manyKeys(30)
	seed(t, s, keys)
	for _, p := range []string{"tbl/", "append-operation/", "k", ""} {
		wantKeys(t, fmt.Sprintf("List(%q) in pages of 1", p), listPaged(t, s, p, 1), filterPrefix(keys, p))
	}
}

func testListCursorRoundTrips(t *testing.T, s *metastore.Store) {
	keys := manyKeys(240)
	seed(t, s, keys)
	for _, p := range []string{"tbl/", "append-operation/", ""} {
		for _, limit := range []int{7, 50} {
			wantKeys(t, fmt.Sprintf("List(%q) in pages of %d", p, limit), listPaged(t, s, p, limit), filterPrefix(keys, p))
		}
	}
	// A cursor is reusable: the same cursor gives the same next page.
	page, err := s.List(ctx(t), "tbl/", 10, "")
	if err != nil || page.Cursor == "" {
		t.Fatalf("first page: %v, cursor %q", err, page.Cursor)
	}
	a, err1 := s.List(ctx(t), "tbl/", 10, page.Cursor)
	b, err2 := s.List(ctx(t), "tbl/", 10, page.Cursor)
	if err1 != nil || err2 != nil || !slices.EqualFunc(a.Items, b.Items, func(x, y metastore.Item) bool { return x.Key == y.Key }) {
		t.Fatalf("reusing a cursor: %v %v, %d vs %d items", err1, err2, len(a.Items), len(b.Items))
	}
}

func testListBadLimits(t *testing.T, s *metastore.Store) {
	for _, limit := range []int{0, -1, metastore.MaxListLimit + 1} {
		_, err := s.List(ctx(t), "tbl/", limit, "")
		wantErr(t, fmt.Sprintf("limit %d", limit), err, metastore.ErrInvalidArgument)
	}
	if _, err := s.List(ctx(t), "tbl/", metastore.MaxListLimit, ""); err != nil {
		t.Fatalf("limit MaxListLimit: %v", err)
	}
	_, err := s.List(ctx(t), "tbl/\x00", 10, "")
	wantErr(t, "prefix with NUL", err, metastore.ErrInvalidKey)
}

func testListBadCursors(t *testing.T, s *metastore.Store) {
	seed(t, s, manyKeys(30))
	page, err := s.List(ctx(t), "tbl/", 2, "")
	if err != nil || page.Cursor == "" {
		t.Fatalf("List: %v, cursor %q", err, page.Cursor)
	}
	good := page.Cursor
	dec, err := cursor.Decode(good)
	if err != nil {
		t.Fatalf("decode a cursor the store issued: %v", err)
	}
	flipped := []byte(good)
	flipped[len(flipped)/2] ^= 0x01
	if flipped[len(flipped)/2] == '-'^0x01 || flipped[len(flipped)/2] == '_'^0x01 {
		flipped[len(flipped)/2] = 'A'
	}
	outside := dec
	outside.Prefix = "append-operation/"
	cases := map[string]struct {
		prefix, cursor string
	}{
		"garbage":             {"tbl/", "not a cursor!"},
		"base64 garbage":      {"tbl/", "QUJDREVGRw"},
		"truncated":           {"tbl/", good[:len(good)-3]},
		"corrupted":           {"tbl/", string(flipped)},
		"other prefix":        {"append-operation/", good},
		"other backend":       {"tbl/", cursor.Cursor{Backend: "no-such-backend", Prefix: "tbl/", Pos: dec.Pos}.Encode()},
		"position off prefix": {"append-operation/", outside.Encode()},
		"unknown version":     {"tbl/", strings.Repeat("A", 12)},
	}
	if sp, ok := s.Driver().(scanPositioned); ok && sp.ScanPositions() {
		// A scan position may be any key of the table; only the prefix and
		// the checksum bind such a cursor.
		delete(cases, "position off prefix")
	}
	for name, c := range cases {
		_, err := s.List(ctx(t), c.prefix, 2, c.cursor)
		if !errors.Is(err, metastore.ErrInvalidCursor) && !errors.Is(err, metastore.ErrCursorExpired) {
			t.Fatalf("%s cursor: got %v, want ErrInvalidCursor", name, err)
		}
	}
}

// scanPositioned is implemented by drivers whose cursor positions are scan
// positions (any key of the table, in hash order) rather than keys within
// the listed prefix.
type scanPositioned interface{ ScanPositions() bool }

func testListAllSorted(t *testing.T, s *metastore.Store) {
	keys := manyKeys(60)
	seed(t, s, keys)
	for _, p := range []string{"", "tbl/", "append-operation/t03/"} {
		items, err := s.ListAll(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(items, func(a, b metastore.Item) int { return strings.Compare(a.Key, b.Key) }) {
			t.Fatalf("ListAll(%q) not sorted", p)
		}
		wantKeys(t, fmt.Sprintf("ListAll(%q)", p), items, filterPrefix(keys, p))
	}
}

func testCanceled(t *testing.T, s *metastore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	if _, err := s.Get(c, "tbl/x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with canceled context: %v", err)
	}
	if err := s.Put(c, "tbl/x", []byte("v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with canceled context: %v", err)
	}
	if _, err := s.List(c, "tbl/", 10, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("List with canceled context: %v", err)
	}
	wantAbsent(t, s, "tbl/x")
}

// testConcurrentCAS: 32 goroutines increment one counter with Get+CAS; the
// final value must equal the number of CAS calls that reported success, so
// no success is lost and no failure was applied.
func testConcurrentCAS(t *testing.T, s *metastore.Store) {
	k := "tbl/counter"
	mustPut(t, s, k, "0")
	wins, err := Increments(ctx(t), s, k, 32, 12)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	wantValue(t, s, k, fmt.Sprint(wins))
	if wins == 0 {
		t.Fatal("no CAS succeeded")
	}
}

// testConcurrentCreate: of N concurrent create-if-absent calls exactly one wins.
func testConcurrentCreate(t *testing.T, s *metastore.Store) {
	const n = 24
	for round := range 3 {
		k := fmt.Sprintf("lease/r%d", round)
		var wins atomic.Int64
		var winner atomic.Value
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				v := fmt.Sprintf("owner-%d", i)
				err := s.CAS(ctx(t), k, metastore.ExpectAbsent(), []byte(v))
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(v)
				case !errors.Is(err, metastore.ErrConflict):
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("unexpected error: %v", err)
		}
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d creators won, want exactly 1", round, wins.Load())
		}
		wantValue(t, s, k, winner.Load().(string))
	}
}

// testGuardChangedConcurrently: writers mutate a target under a guard while
// the guard's value is changed. No mutation that started after the change
// was acknowledged may succeed, and the target's final value is exactly the
// number of successful guarded increments.
func testGuardChangedConcurrently(t *testing.T, s *metastore.Store) {
	const writers = 8
	mustPut(t, s, "lease/g", "holder-1")
	mustPut(t, s, "tbl/fenced", "0")
	guard := metastore.Guard{Key: "lease/g", Value: []byte("holder-1")}
	var changed atomic.Bool
	var wins, lateWins atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	stop := make(chan struct{})
	for range writers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				startedAfterChange := changed.Load()
				cur, err := s.Get(ctx(t), "tbl/fenced")
				if err != nil {
					errs <- err
					return
				}
				var n int
				fmt.Sscanf(string(cur), "%d", &n)
				err = s.GuardedMutate(ctx(t), guard, metastore.Mutation{
					Key: "tbl/fenced", Expect: metastore.ExpectValue(cur), Value: fmt.Appendf(nil, "%d", n+1)})
				switch {
				case err == nil:
					wins.Add(1)
					if startedAfterChange {
						lateWins.Add(1)
					}
				case !errors.Is(err, metastore.ErrConflict):
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.CAS(ctx(t), "lease/g", metastore.ExpectValue([]byte("holder-1")), []byte("holder-2")); err != nil {
		t.Fatalf("changing the guard: %v", err)
	}
	changed.Store(true)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected error: %v", err)
	}
	if lateWins.Load() != 0 {
		t.Fatalf("%d guarded mutations succeeded after the guard changed", lateWins.Load())
	}
	wantValue(t, s, "tbl/fenced", fmt.Sprint(wins.Load()))
	// And sequentially: the stale guard now fails.
	err := s.GuardedMutate(ctx(t), guard, metastore.Mutation{Key: "tbl/other", Expect: metastore.ExpectAbsent(), Value: []byte("x")})
	wantErr(t, "stale guard", err, metastore.ErrConflict)
	wantAbsent(t, s, "tbl/other")
}

func testClose(t *testing.T, s *metastore.Store) {
	mustPut(t, s, "tbl/a", "1")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Get(ctx(t), "tbl/a"); !errors.Is(err, metastore.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := s.Put(ctx(t), "tbl/a", nil); !errors.Is(err, metastore.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if _, err := s.List(ctx(t), "", 1, ""); !errors.Is(err, metastore.ErrClosed) {
		t.Fatalf("List after Close: %v", err)
	}
}

// testListByteBudget: a page ends at metastore.MaxPageBytes of keys and
// values whatever its limit, holds at least one item, and the drained
// pages still hold every key exactly once (issue 12: one list of 300 large
// values used to build a response of hundreds of megabytes).
func testListByteBudget(t *testing.T, s *metastore.Store) {
	const n, size = 8, 300 << 10 // 2.4 MB: at least three pages
	var want []string
	for i := range n {
		k := fmt.Sprintf("big/%02d", i)
		v := bytes.Repeat([]byte{byte('a' + i)}, size)
		if err := s.Put(ctx(t), k, v); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
		want = append(want, k)
	}
	mustPut(t, s, "big/small", "s")
	want = append(want, "big/small")
	seen := map[string]int{}
	cur, pages := "", 0
	for {
		page, err := s.List(ctx(t), "big/", 100, cur)
		if err != nil {
			t.Fatalf("List page %d: %v", pages, err)
		}
		pages++
		used := 0
		for _, it := range page.Items {
			used += metastore.ItemBytes(it.Key, it.Value)
			seen[it.Key]++
			if it.Key != "big/small" && (len(it.Value) != size || it.Value[0] != it.Value[size-1]) {
				t.Fatalf("key %q: value of %d bytes is not the one written", it.Key, len(it.Value))
			}
		}
		if len(page.Items) > 1 && used > metastore.MaxPageBytes {
			t.Fatalf("page %d holds %d items of %d bytes, over the %d-byte budget", pages, len(page.Items), used, metastore.MaxPageBytes)
		}
		if page.Cursor == "" {
			break
		}
		if pages > 100 {
			t.Fatal("the listing never ends")
		}
		cur = page.Cursor
	}
	if pages < 3 {
		t.Fatalf("%d bytes listed in %d pages: the budget did not end any page", n*size, pages)
	}
	for _, k := range want {
		if seen[k] != 1 {
			t.Fatalf("key %q listed %d times, want once (pages: %d)", k, seen[k], pages)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d keys, want %d", len(seen), len(want))
	}
}
