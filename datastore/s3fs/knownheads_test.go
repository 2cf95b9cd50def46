package s3fs_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
)

// TestStatTakesARememberedHead (issue 31): a Stat beside a heads listing
// (a sync's read-ahead) takes a partition's head from the heads another
// process remembered (a tree keeps them in its state between syncs) when
// the listing shows it at the remembered ETag, and reads no head; a
// process remembering none reads it (the control). A head written since
// (its ETag moved) is read, and so is one whose remembered body was
// altered (a tree's state file edited or damaged): the body is taken only
// if its MD5 is the listed ETag, so the answer is always the store's.
func TestStatTakesARememberedHead(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	s.SetLayout(datastore.LayoutModelsV3)
	ctx := t.Context()
	a, err := s.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	api.take()
	remembered := s.RememberedHeads()
	if len(remembered) == 0 {
		t.Fatal("the writer remembers no head")
	}
	process := func(b []byte) (*readsAPI, *datastore.Store) {
		t.Helper()
		api := &readsAPI{API: c, reads: map[string]int{}}
		d, err := s3fs.Open(ctx, api, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
		if err != nil {
			t.Fatal(err)
		}
		st := datastore.New(d)
		st.SetLayout(datastore.LayoutModelsV3)
		t.Cleanup(func() { st.Close() })
		st.RememberHeads(b)
		return api, st
	}
	stat := func(api *readsAPI, st *datastore.Store, path, version string, wantHeads int) {
		t.Helper()
		api.take()
		if got := statBeside(t, st, path); got.Version != version {
			t.Fatalf("stat of %s beside a listing: version %q; want %q", path, got.Version, version)
		}
		if reads := api.take(); reads["h"] != wantHeads {
			t.Fatalf("stat of %s beside a listing read %d heads (%v); want %d", path, reads["h"], reads, wantHeads)
		}
	}
	apiB, b := process(remembered)
	stat(apiB, b, "data/m/1/a", a.Version, 0)
	apiC, cProc := process(nil)
	stat(apiC, cProc, "data/m/1/a", a.Version, 1)

	// Written since: its ETag moved, the head is read.
	a2, err := s.Put(ctx, "data/m/1/a", strings.NewReader("a2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	stat(apiB, b, "data/m/1/a", a2.Version, 1)

	// Altered: the remembered body names another version at the same
	// ETag; it is not taken.
	var kept map[string]struct {
		E string `json:"e"`
		B []byte `json:"b"`
	}
	if err := json.Unmarshal(s.RememberedHeads(), &kept); err != nil {
		t.Fatal(err)
	}
	altered := 0
	for k, v := range kept {
		if bytes.Contains(v.B, []byte(a2.Version)) {
			v.B = bytes.ReplaceAll(v.B, []byte(a2.Version), []byte(a.Version))
			kept[k] = v
			altered++
		}
	}
	forged, _ := json.Marshal(kept)
	if altered == 0 {
		t.Fatal("no remembered head holds the second version")
	}
	apiD, dProc := process(forged)
	stat(apiD, dProc, "data/m/1/a", a2.Version, 1)
	// And a state file that is not one: ignored.
	apiE, eProc := process([]byte("not json {"))
	stat(apiE, eProc, "data/m/1/a", a2.Version, 1)
}
