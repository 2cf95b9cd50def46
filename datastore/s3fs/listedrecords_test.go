package s3fs_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/s3local"
)

// getsOf returns how many of the requests g recorded since the last take
// are GETs of key, and forgets them all.
func getsOf(g *getsAPI, key string) int {
	n := 0
	for _, k := range g.take() {
		if k == key {
			n++
		}
	}
	return n
}

// TestNamespaceRecordBesideTheHeads (issue 31, layout models-v4): a new
// datastore keeps each namespace's registry record beside the namespace's
// heads, n/NAME/h/!ns~, where a sync's listing of those heads shows its
// ETag; a sync's read-ahead of the record then takes it
// from what this process (or the tree's last sync) read or wrote at that
// ETag, and GETs it only when the listing shows another. A datastore
// recorded models-v3 keeps the record under r/ and reads it every time
// (the control). A hostile peer (raw SDK) rewriting the record is read at
// once; one deleting it makes the namespace unregistered at the next
// read, without a GET; a kept body altered to say another policy at the
// listed ETag is not taken. Readers of the heads never take the records
// for partitions, and lake data check reports nothing.
func TestNamespaceRecordBesideTheHeads(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	open := func(prefix string, remembered []byte) (*getsAPI, *datastore.Store) {
		t.Helper()
		api := &getsAPI{API: raw}
		_, s := openDatastore(t, api, bucket, prefix)
		s.RememberHeads(remembered)
		return api, s
	}
	// readConfig reads ns's record as a sync does: ahead, beside the
	// listings of the namespace's heads and the catalog's.
	readConfig := func(s *datastore.Store, ns string) datastore.NamespaceConfig {
		t.Helper()
		n, err := s.Namespace(ns)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := s.CatalogStore()
		if err != nil {
			t.Fatal(err)
		}
		actx, err := n.ReadAhead(ctx, []*datastore.Store{n, cat}, []string{n.ConfigRecord()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := n.Config(actx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	policy := datastore.Lifecycle{Enabled: true, Retention: time.Hour}

	for _, c := range []struct {
		layout datastore.Layout
		object string // the record's key below the prefix
	}{
		{datastore.LayoutModelsV5, "/n/w1/h/!ns~"},
		{datastore.LayoutModelsV3, "/r/datastore/namespaces/w1~"},
	} {
		t.Run(c.layout.String(), func(t *testing.T) {
			prefix := "lr-" + c.layout.String()
			if c.layout == datastore.LayoutModelsV3 {
				// A datastore made before models-v4: its layout record
				// says so before any Open.
				if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/r/datastore/layout~"),
					Body: strings.NewReader("models-v3"), IfNoneMatch: aws.String("*")}); err != nil {
					t.Fatal(err)
				}
			}
			apiA, a := open(prefix, nil)
			if a.Layout() != c.layout {
				t.Fatalf("layout %s, want %s", a.Layout(), c.layout)
			}
			w1, err := a.Namespace("w1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w1.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := w1.SetLifecycle(ctx, policy); err != nil {
				t.Fatal(err)
			}
			key := prefix + c.object
			var got datastore.NamespaceConfig
			if err := json.Unmarshal(rawGet(t, raw, bucket, key), &got); err != nil || got.Lifecycle != policy {
				t.Fatalf("the record at %s: %+v, %v; want the policy %+v", key, got, err, policy)
			}
			nss, err := a.Namespaces(ctx)
			if err != nil || len(nss) != 2 || nss[1].Name != "w1" || nss[1].Lifecycle != policy {
				t.Fatalf("Namespaces: %+v, %v", nss, err)
			}

			// The writer reads it beside the listing: from what it wrote
			// on models-v4.
			apiA.take()
			if got := readConfig(a, "w1"); got.Lifecycle != policy {
				t.Fatalf("read ahead: %+v", got)
			}
			wantGets := 0
			if c.layout == datastore.LayoutModelsV3 {
				wantGets = 1
			}
			if n := getsOf(apiA, key); n != wantGets {
				t.Fatalf("read ahead beside the heads: %d GETs of the record, want %d", n, wantGets)
			}
			// Another process given what the writer remembered: the same.
			apiB, b := open(prefix, a.RememberedHeads())
			if got := readConfig(b, "w1"); got.Lifecycle != policy {
				t.Fatalf("another process: %+v", got)
			}
			if n := getsOf(apiB, key); n != wantGets {
				t.Fatalf("another process remembering the record: %d GETs, want %d", n, wantGets)
			}
			// One remembering nothing reads it once, then takes it.
			apiC, cProc := open(prefix, nil)
			readConfig(cProc, "w1")
			readConfig(cProc, "w1")
			if n := getsOf(apiC, key); n != 1+wantGets {
				t.Fatalf("a process remembering nothing, two reads: %d GETs, want %d", n, 1+wantGets)
			}

			if c.layout != datastore.LayoutModelsV5 {
				// Damaged under r/ (a datastore made before models-v4):
				// check names it there too, --repair moves it aside.
				if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader("garbage{")}); err != nil {
					t.Fatal(err)
				}
				rep, err := w1.Check(ctx, datastore.CheckOptions{Repair: true})
				if err != nil || len(rep.Problems) != 1 || !strings.HasSuffix(rep.Problems[0].Object, c.object) || !rep.Problems[0].Repaired {
					t.Fatalf("check --repair of a damaged record under r/: %+v, %v", rep.Problems, err)
				}
				if got, err := w1.Config(ctx); err != nil || got.Lifecycle != (datastore.Lifecycle{}) {
					t.Fatalf("after the repair: %+v, %v; want no policy", got, err)
				}
				return
			}
			// The default namespace's record is the root's: h/!ns~.
			rootPolicy := datastore.Lifecycle{KeepLast: 2}
			if _, err := a.SetLifecycle(ctx, rootPolicy); err != nil {
				t.Fatal(err)
			}
			var rootRec datastore.NamespaceConfig
			if err := json.Unmarshal(rawGet(t, raw, bucket, prefix+"/h/!ns~"), &rootRec); err != nil || rootRec.Lifecycle != rootPolicy {
				t.Fatalf("the default namespace's record: %+v, %v", rootRec, err)
			}
			if nss, err := a.Namespaces(ctx); err != nil || len(nss) != 2 || nss[0].Name != "default" || nss[0].Lifecycle != rootPolicy || nss[1].Name != "w1" {
				t.Fatalf("Namespaces with the root's policy: %+v, %v", nss, err)
			}
			if got := readConfig(a, "default"); got.Lifecycle != rootPolicy {
				t.Fatalf("the default namespace's record read ahead: %+v", got)
			}
			// A hostile peer rewrites the record: the listing shows
			// another ETag, so it is read.
			peer := datastore.NamespaceConfig{Created: got.Created, Lifecycle: datastore.Lifecycle{Enabled: false, KeepLast: 3}}
			body, _ := json.Marshal(peer)
			if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
				t.Fatal(err)
			}
			if got := readConfig(b, "w1"); got.Lifecycle != peer.Lifecycle {
				t.Fatalf("after a peer's rewrite: %+v, want %+v", got.Lifecycle, peer.Lifecycle)
			}
			if n := getsOf(apiB, key); n != 1 {
				t.Fatalf("after a peer's rewrite: %d GETs, want 1", n)
			}
			// A kept body altered to say the first policy at the listed
			// ETag is not taken: its MD5 is not the ETag.
			var kept map[string]struct {
				E string `json:"e"`
				B []byte `json:"b"`
			}
			if err := json.Unmarshal(b.RememberedHeads(), &kept); err != nil {
				t.Fatal(err)
			}
			k, ok := kept[key]
			if !ok {
				t.Fatalf("the reader keeps no %s", key)
			}
			k.B, _ = json.Marshal(datastore.NamespaceConfig{Created: got.Created, Lifecycle: policy})
			kept[key] = k
			forged, _ := json.Marshal(kept)
			apiD, dProc := open(prefix, forged)
			if got := readConfig(dProc, "w1"); got.Lifecycle != peer.Lifecycle {
				t.Fatalf("a forged kept record was taken: %+v, want %+v", got.Lifecycle, peer.Lifecycle)
			}
			if n := getsOf(apiD, key); n != 1 {
				t.Fatalf("a forged kept record: %d GETs, want 1", n)
			}
			// Readers of the heads skip the record; check reports
			// nothing.
			cat, err := a.CatalogStore()
			if err != nil {
				t.Fatal(err)
			}
			parts, err := w1.Partitions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			heads, _, err := w1.ChangedPartitions(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				if strings.Contains(p, "!") {
					t.Fatalf("the namespace's partitions name a record: %v", parts)
				}
			}
			for _, h := range heads {
				if strings.Contains(h.Partition, "!") {
					t.Fatalf("the namespace's changed partitions name a record: %v", heads)
				}
			}
			// A foreign object where an internal scope's record would be
			// is no record: check names it.
			if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/n/_catalog/h/!ns~"), Body: strings.NewReader("{}")}); err != nil {
				t.Fatal(err)
			}
			if rep, err := cat.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Object, "/n/_catalog/h/!ns~") {
				t.Fatalf("check of the catalog with a foreign !ns~: %+v, %v", rep.Problems, err)
			}
			if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/n/_catalog/h/!ns~")}); err != nil {
				t.Fatal(err)
			}
			for _, sc := range []*datastore.Store{a, w1, cat} {
				rep, err := sc.Check(ctx, datastore.CheckOptions{})
				if err != nil || len(rep.Problems) != 0 {
					t.Fatalf("check of %q: %+v, %v", sc.NamespaceName(), rep.Problems, err)
				}
			}
			// The peer damages it: every sync's lifecycle would fail on
			// it; check names it, --repair moves it aside (the namespace
			// then has no policy until one is set again).
			if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader("garbage{")}); err != nil {
				t.Fatal(err)
			}
			if _, err := w1.Config(ctx); err == nil {
				t.Fatal("a damaged record read as a configuration")
			}
			rep, err := w1.Check(ctx, datastore.CheckOptions{Repair: true})
			if err != nil || len(rep.Problems) != 1 || !strings.HasSuffix(rep.Problems[0].Object, "/n/w1/h/!ns~") || !rep.Problems[0].Repaired {
				t.Fatalf("check --repair of a damaged record: %+v, %v", rep.Problems, err)
			}
			if got, err := w1.Config(ctx); err != nil || got.Lifecycle != (datastore.Lifecycle{}) {
				t.Fatalf("after the repair: %+v, %v; want no policy", got, err)
			}
			if _, err := w1.SetLifecycle(ctx, peer.Lifecycle); err != nil {
				t.Fatal(err)
			}
			// The peer deletes it: absent at the listing's instant, so
			// absent, without a GET; the next commit registers the
			// namespace again.
			if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(key)}); err != nil {
				t.Fatal(err)
			}
			if got := readConfig(b, "w1"); got.Lifecycle != (datastore.Lifecycle{}) {
				t.Fatalf("after a peer's delete: %+v, want no policy", got.Lifecycle)
			}
			if n := getsOf(apiB, key); n != 0 {
				t.Fatalf("after a peer's delete: %d GETs, want 0 (the listing shows it absent)", n)
			}
			_, e := open(prefix, nil)
			ew1, err := e.Namespace("w1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ew1.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
				t.Fatal(err)
			}
			if nss, err := e.Namespaces(ctx); err != nil || len(nss) != 2 || nss[1].Name != "w1" {
				t.Fatalf("Namespaces after the commit that registers again: %+v, %v", nss, err)
			}
		})
	}
}
