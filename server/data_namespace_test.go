package server

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/nodeapi"
)

// newDataNode is a node serving a bolt datastore in its metastore's file,
// as `lake serve` on bolt:// does, and that datastore's root Store.
func newDataNode(t *testing.T) (*node, *datastore.Store) {
	t.Helper()
	bd, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := boltfs.New(bd.File())
	if err != nil {
		t.Fatal(err)
	}
	data, store := datastore.New(d), metastore.New(bd)
	return serveData(t, store, data), data
}

// serveData serves store and its datastore data on loopback until the test
// ends.
func serveData(t *testing.T, store *metastore.Store, data *datastore.Store) *node {
	t.Helper()
	srv, err := New(store, &Options{Data: data, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	url, hs, err := ServeLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close(); data.Close(); store.Close() })
	return &node{srv: srv, store: store, url: url}
}

func dataPath(op, query string) string {
	if query == "" {
		return nodeapi.DataPrefix + op
	}
	return nodeapi.DataPrefix + op + "?" + query
}

// TestDataNamespaceRefused: a namespace parameter that is empty, given
// twice, not a namespace's name or an internal scope other than the
// catalog's is 400 invalid_argument on every datastore endpoint, and makes
// no namespace on the node.
func TestDataNamespaceRefused(t *testing.T) {
	n, _ := newDataNode(t)
	bad := []string{
		"namespace=", "namespace=a%2Fb", "namespace=_other", "namespace=_", "namespace=-x", "namespace=.x",
		"namespace=" + strings.Repeat("n", 65), "namespace=alpha&namespace=beta", "namespace=alpha;x=1",
		"namespace=%zz", "Namespace=alpha", "ns=alpha",
	}
	for _, q := range bad {
		want(t, "partitions?"+q, n.call(t, "POST", dataPath(nodeapi.DataPartitions, q), []byte(`{}`)), 400, nodeapi.CodeInvalidArgument)
		want(t, "record?"+q, n.call(t, "POST", dataPath(nodeapi.DataRecord, q), []byte(`{"op":"get","key":"rec/a/b"}`)), 400, nodeapi.CodeInvalidArgument)
		want(t, "drop?"+q, n.call(t, "POST", dataPath(nodeapi.DataDrop, q), []byte(`{"partition":"m/1"}`)), 400, nodeapi.CodeInvalidArgument)
		want(t, "chunk?"+q, n.call(t, "GET", dataPath(nodeapi.DataChunk, "version=ab&i=0&"+q), nil), 400, nodeapi.CodeInvalidArgument)
	}
	want(t, "info?namespace=alpha", n.call(t, "GET", dataPath(nodeapi.DataInfo, "namespace=alpha"), nil), 400, nodeapi.CodeInvalidArgument)
	want(t, "info", n.call(t, "GET", dataPath(nodeapi.DataInfo, ""), nil), 200, "")
	r := n.call(t, "POST", dataPath(nodeapi.DataStat, "namespace=_other"), []byte(`{"paths":["data/a"]}`))
	if e := r.errBody(t); !strings.Contains(e.Message, `"_other"`) || !strings.Contains(e.Message, datastore.CatalogScope) {
		t.Fatalf("the refusal of _other does not name it and the catalog's scope: %s", e.Message)
	}
	if len(n.srv.dataNS.m) != 0 {
		t.Fatalf("refused namespaces were made: %v", n.srv.dataNS.m)
	}
	for _, q := range []string{"", "namespace=alpha", "namespace=default", "namespace=_catalog", "namespace=a.b-c_9"} {
		want(t, "partitions?"+q, n.call(t, "POST", dataPath(nodeapi.DataPartitions, q), []byte(`{}`)), 200, "")
	}
}

// TestDataNamespaceScopes: each namespace's files, feeds and partitions are
// its own through the node, the catalog's scope is reachable, records are
// the root's whatever the namespace, and drop removes one namespace's
// partition only, under its fence.
func TestDataNamespaceScopes(t *testing.T) {
	n, data := newDataNode(t)
	ctx := t.Context()
	alpha, err := data.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := data.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*datastore.Store{data, alpha, cat} {
		if _, err := s.Put(ctx, "data/m/1/f", strings.NewReader(s.NamespaceName()), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alpha.Put(ctx, "data/m/2/f", strings.NewReader("two"), nil); err != nil {
		t.Fatal(err)
	}
	stat := func(q string) string {
		r := n.call(t, "POST", dataPath(nodeapi.DataStat, q), []byte(`{"paths":["data/m/1/f","data/m/2/f"]}`))
		want(t, "stat?"+q, r, 200, "")
		var out nodeapi.DataInfos
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, i := range out.Infos {
			got = append(got, i.Path)
		}
		slices.Sort(got) // the node answers in map order
		return strings.Join(got, ",")
	}
	partitions := func(q string) string {
		r := n.call(t, "POST", dataPath(nodeapi.DataPartitions, q), []byte(`{}`))
		want(t, "partitions?"+q, r, 200, "")
		var out nodeapi.DataHeadsResponse
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out.Partitions, ",")
	}
	if got := stat(""); got != "data/m/1/f" {
		t.Fatalf("the root stats %q", got)
	}
	if got := stat("namespace=default"); got != "data/m/1/f" {
		t.Fatalf("the default namespace stats %q", got)
	}
	if got := partitions("namespace=alpha"); got != "m/1,m/2" {
		t.Fatalf("alpha's partitions are %q", got)
	}
	if got := partitions("namespace=beta"); got != "" {
		t.Fatalf("beta's partitions are %q, want none", got)
	}
	if got := partitions("namespace=_catalog"); got != "m/1" {
		t.Fatalf("the catalog's partitions are %q", got)
	}
	// Records are the root's: the namespace is checked, then ignored.
	if err := data.Records().CASRecord(ctx, "rec/alpha/sync", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatal(err)
	}
	r := n.call(t, "POST", dataPath(nodeapi.DataRecord, "namespace=alpha"), []byte(`{"op":"get","key":"rec/alpha/sync"}`))
	want(t, "record get in alpha", r, 200, "")
	var rec nodeapi.DataRecordResponse
	if err := json.Unmarshal(r.body, &rec); err != nil || string(rec.Value) != "t1" {
		t.Fatalf("record read through alpha = %q, %v; want the root's t1", rec.Value, err)
	}
	// Drop: a stale fence drops nothing; a bad partition or body is 400;
	// then alpha's m/1 goes and no one else's does.
	stale := `{"fence":{"Key":"rec/alpha/sync","Token":"dDA="},"partition":"m/1"}`
	r = n.call(t, "POST", dataPath(nodeapi.DataDrop, "namespace=alpha"), []byte(stale))
	want(t, "drop under a stale fence", r, 409, nodeapi.CodeConflict)
	if e := r.errBody(t); e.Key != "rec/alpha/sync" || e.Reason != datastore.FenceReason {
		t.Fatalf("the stale drop's conflict = %+v, want the fence's", e)
	}
	for _, body := range []string{`{"partition":"a/b/c"}`, `{"partition":""}`, `{"partition":"m/1","bogus":1}`, `{"Partition":"m/1"}`} {
		want(t, "drop "+body, n.call(t, "POST", dataPath(nodeapi.DataDrop, "namespace=alpha"), []byte(body)), 400, nodeapi.CodeInvalidArgument)
	}
	want(t, "drop with an empty fence key", n.call(t, "POST", dataPath(nodeapi.DataDrop, "namespace=alpha"), []byte(`{"fence":{"Key":""},"partition":"m/1"}`)), 400, nodeapi.CodeInvalidKey)
	if got := stat("namespace=alpha"); got != "data/m/1/f,data/m/2/f" {
		t.Fatalf("after refused drops alpha stats %q", got)
	}
	r = n.call(t, "POST", dataPath(nodeapi.DataDrop, "namespace=alpha"), []byte(`{"fence":{"Key":"rec/alpha/sync","Token":"dDE="},"partition":"m/1","now":"2026-11-30T12:00:00Z"}`))
	want(t, "drop", r, 200, "")
	var st datastore.DropStats
	if err := json.Unmarshal(r.body, &st); err != nil || st.Files != 1 {
		t.Fatalf("drop answered %s (%v), want one file", r.body, err)
	}
	if got := stat("namespace=alpha"); got != "data/m/2/f" {
		t.Fatalf("after the drop alpha stats %q", got)
	}
	if got := partitions("namespace=alpha"); got != "m/2" {
		t.Fatalf("after the drop alpha's partitions are %q", got)
	}
	if got := stat(""); got != "data/m/1/f" {
		t.Fatalf("alpha's drop reached the root: it stats %q", got)
	}
	if got := partitions("namespace=_catalog"); got != "m/1" {
		t.Fatalf("alpha's drop reached the catalog: its partitions are %q", got)
	}
}

// TestDataNamespaceCache: concurrent first requests of one namespace all get
// one Store; past the bound names are forgotten, never accumulated, and a
// forgotten one is made again on its next request.
func TestDataNamespaceCache(t *testing.T) {
	n, _ := newDataNode(t)
	var wg sync.WaitGroup
	got := make([]*datastore.Store, 32)
	for i := range got {
		wg.Go(func() {
			st, err := n.srv.dataScope("alpha")
			if err != nil {
				t.Error(err)
			}
			got[i] = st
		})
	}
	wg.Wait()
	for _, st := range got {
		if st == nil || st != got[0] {
			t.Fatal("concurrent first requests of one namespace got different Stores")
		}
	}
	if root, err := n.srv.dataScope(""); err != nil || root != n.srv.data {
		t.Fatalf("the root is not the node's own Store (%v)", err)
	}
	n.srv.dataNS.limit = 3
	for i := range 10 {
		name := "ns" + string(rune('a'+i))
		want(t, name, n.call(t, "POST", dataPath(nodeapi.DataPartitions, "namespace="+name), []byte(`{}`)), 200, "")
		if c := len(n.srv.dataNS.m); c > 3 {
			t.Fatalf("%d namespaces cached, more than the bound 3", c)
		}
	}
	want(t, "nsa again", n.call(t, "POST", dataPath(nodeapi.DataPartitions, "namespace=nsa"), []byte(`{}`)), 200, "")
}

// refusing is a datastore driver that refuses to make namespaces while
// refuse is set, as the node's bolt datastore does on a damaged file.
type refusing struct {
	*boltfs.Driver
	refuse atomic.Bool
}

func (r *refusing) Namespace(name string) (datastore.Driver, error) {
	if r.refuse.Load() {
		return nil, fmt.Errorf("%w: the file is damaged; run `lake check`", metastore.ErrUnavailable)
	}
	return r.Driver.Namespace(name)
}

// TestDataNamespaceRefusalNotCached: a namespace the datastore refuses to
// make is refused on every request (503, the driver's error), never
// cached as if it were made.
func TestDataNamespaceRefusalNotCached(t *testing.T) {
	bd, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := boltfs.New(bd.File())
	if err != nil {
		t.Fatal(err)
	}
	r := &refusing{Driver: d}
	r.refuse.Store(true)
	data, store := datastore.New(r), metastore.New(bd)
	srv, err := New(store, &Options{Data: data, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	url, hs, err := ServeLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close(); data.Close(); store.Close() })
	n := &node{srv: srv, store: store, url: url}
	for _, q := range []string{"namespace=alpha", "namespace=_catalog", "namespace=alpha"} {
		want(t, "partitions?"+q, n.call(t, "POST", dataPath(nodeapi.DataPartitions, q), []byte(`{}`)), 503, nodeapi.CodeUnavailable)
		want(t, "chunk?"+q, n.call(t, "GET", dataPath(nodeapi.DataChunk, "version=ab&i=0&"+q), nil), 503, nodeapi.CodeUnavailable)
	}
	if len(srv.dataNS.m) != 0 {
		t.Fatalf("refused namespaces were cached: %v", srv.dataNS.m)
	}
	r.refuse.Store(false)
	want(t, "partitions in alpha once made", n.call(t, "POST", dataPath(nodeapi.DataPartitions, "namespace=alpha"), []byte(`{}`)), 200, "")
}
