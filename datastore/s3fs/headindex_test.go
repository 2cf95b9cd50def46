package s3fs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// headIndexStore opens a new datastore (layout models-v5: the index in the
// heads, as since models-v3) under prefix "hi" of a fresh bucket, with the raw client.
func headIndexStore(t *testing.T) (*s3fs.Driver, *datastore.Store, *s3.Client, string) {
	t.Helper()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	d, s := openDatastore(t, c, bucket, "hi")
	if s.Layout() != datastore.LayoutModelsV5 {
		t.Fatalf("a new datastore's layout = %s, want models-v5", s.Layout())
	}
	return d, s, c, bucket
}

// headIndexStoreOf is headIndexStore for a datastore made by the lake of
// layout l: l is recorded before the datastore is opened, which then has it.
func headIndexStoreOf(t *testing.T, l datastore.Layout) (*s3fs.Driver, *datastore.Store, *s3.Client, string) {
	t.Helper()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	recordLayout(t, c, bucket, "hi", l)
	d, s := openDatastore(t, c, bucket, "hi")
	if s.Layout() != l {
		t.Fatalf("the datastore's layout = %s, want %s", s.Layout(), l)
	}
	return d, s, c, bucket
}

// rawKeys lists the keys under prefix with the SDK.
func rawKeys(t *testing.T, c *s3.Client, bucket, prefix string) []string {
	t.Helper()
	var out []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			out = append(out, *o.Key)
		}
	}
	return out
}

// rawHeadJSON reads the head at key as JSON with the SDK.
func rawHeadJSON(t *testing.T, c *s3.Client, bucket, key string) map[string]json.RawMessage {
	t.Helper()
	var h map[string]json.RawMessage
	if err := json.Unmarshal(rawGet(t, c, bucket, key), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// putFiles commits files (path → content) in one commit.
func putFiles(t *testing.T, s *datastore.Store, files map[string]string) []datastore.Info {
	t.Helper()
	var es []datastore.Entry
	for _, p := range slices.Sorted(maps.Keys(files)) {
		st, err := s.Upload(t.Context(), p, strings.NewReader(files[p]), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	applied, err := s.Commit(t.Context(), nil, es)
	if err != nil {
		t.Fatal(err)
	}
	return applied
}

// wantFiles checks that stat, get and ls find exactly files (path →
// content) under prefix.
func wantFiles(t *testing.T, s *datastore.Store, prefix string, files map[string]string) {
	t.Helper()
	ctx := t.Context()
	for p, want := range files {
		if _, got, err := s.Get(ctx, p); err != nil || string(got) != want {
			t.Fatalf("Get(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
	listed, err := s.ListAll(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range listed {
		paths = append(paths, f.Path)
	}
	want := slices.Sorted(maps.Keys(files))
	slices.Sort(paths)
	if !slices.Equal(paths, want) {
		t.Fatalf("ls %s = %v; want %v", prefix, paths, want)
	}
}

// wantClean checks that lake data check finds nothing wrong.
func wantClean(t *testing.T, s *datastore.Store) {
	t.Helper()
	rep, err := s.Check(t.Context(), datastore.CheckOptions{Chunks: true})
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("check: %+v, %v; want no problem", rep.Problems, err)
	}
}

// TestHeadHoldsTheIndex (issue 31, layout models-v3): a commit of a new
// model's files writes no index object; the partition's head holds the
// entries (seen with the SDK), and stat, get and ls answer from it; a
// delete leaves the tombstone there; check finds nothing wrong.
func TestHeadHoldsTheIndex(t *testing.T) {
	_, s, c, bucket := headIndexStore(t)
	ctx := t.Context()
	files := map[string]string{"data/m/1/a": "a", "data/m/1/b": "bb", "data/m/1/c": "ccc"}
	putFiles(t, s, files)
	if keys := rawKeys(t, c, bucket, "hi/f/"); len(keys) != 0 {
		t.Fatalf("index objects written: %v; want none", keys)
	}
	h := rawHeadJSON(t, c, bucket, "hi/h/m%2F1")
	var inFiles map[string]struct {
		Path string `json:"path"`
		Pos  uint64 `json:"pos"`
	}
	if string(h["indexed"]) != "true" || json.Unmarshal(h["files"], &inFiles) != nil || len(inFiles) != 3 || inFiles["data/m/1/b"].Path != "data/m/1/b" {
		t.Fatalf("the head: indexed %s, files %s; want the 3 entries", h["indexed"], h["files"])
	}
	wantFiles(t, s, "data/m/", files)
	if _, err := s.Delete(ctx, "data/m/1/b"); err != nil {
		t.Fatal(err)
	}
	delete(files, "data/m/1/b")
	wantFiles(t, s, "data/m/", files)
	if _, err := s.Stat(ctx, "data/m/1/b"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("Stat of the deleted file: %v", err)
	}
	wantClean(t, s)
}

// TestHeadIndexMovesOut: a partition whose index outgrows its head (bounds
// lowered to 4 entries) has it moved to index objects, for good: the head
// is no longer Indexed, every entry is an index object, and readers and
// later commits go on as in the older layouts.
func TestHeadIndexMovesOut(t *testing.T) {
	defer s3fs.SetHeadIndexBounds(4, 1<<20)()
	_, s, c, bucket := headIndexStore(t)
	ctx := t.Context()
	files := map[string]string{"data/m/1/a": "a", "data/m/1/b": "b", "data/m/1/c": "c"}
	putFiles(t, s, files)
	if keys := rawKeys(t, c, bucket, "hi/f/"); len(keys) != 0 {
		t.Fatalf("index objects of 3 entries: %v; want none", keys)
	}
	more := map[string]string{"data/m/1/d": "d", "data/m/1/e": "e"}
	putFiles(t, s, more)
	for p, v := range more {
		files[p] = v
	}
	if keys := rawKeys(t, c, bucket, "hi/f/"); len(keys) != 5 {
		t.Fatalf("index objects after the move: %v; want the 5 entries", keys)
	}
	if h := rawHeadJSON(t, c, bucket, "hi/h/m%2F1"); h["indexed"] != nil || h["files"] != nil {
		t.Fatalf("the head after the move: indexed %s, files %s; want neither", h["indexed"], h["files"])
	}
	wantFiles(t, s, "data/m/", files)
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("again"), nil); err != nil {
		t.Fatal(err)
	}
	files["data/m/1/a"] = "again"
	wantFiles(t, s, "data/m/", files)
	wantClean(t, s)
}

// TestHeadIndexMoveCutShort: the roll-forward that moves the index out is
// cut short after two of its index objects (its committer dies): the head
// is still Indexed and holds the index, the two objects are no entries
// (check names them), readers see every file, and the next roll-forward
// (a reader's settling of the pending commit) moves the index out whole.
// A commit's pending mark, whose create is the commit: models-v4 (a
// models-v5 commit cut short is not acknowledged, headcommit_test.go).
func TestHeadIndexMoveCutShort(t *testing.T) {
	defer s3fs.SetHeadIndexBounds(4, 1<<20)()
	d, s, c, bucket := headIndexStoreOf(t, datastore.LayoutModelsV4)
	ctx := t.Context()
	files := map[string]string{"data/m/1/a": "a", "data/m/1/b": "b", "data/m/1/c": "c"}
	putFiles(t, s, files)
	// The faults count the writes of the next commit: its mark, its log
	// object, then its index objects; the third index object fails, and
	// every write after it.
	var writes atomic.Int32
	errKilled := errors.New("killed")
	d.SetWriteFault(func() error {
		if writes.Add(1) > 4 {
			return errKilled
		}
		return nil
	})
	more := map[string]string{"data/m/1/d": "d", "data/m/1/e": "e"}
	var es []datastore.Entry
	for p, v := range more {
		st, err := s.Upload(ctx, p, strings.NewReader(v), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
		files[p] = v
	}
	_, err := s.Commit(ctx, nil, es)
	d.SetWriteFault(nil)
	t.Logf("the commit cut short: %v (%d writes tried)", err, writes.Load())
	if keys := rawKeys(t, c, bucket, "hi/f/"); len(keys) != 2 {
		t.Fatalf("index objects written before the cut: %v; want 2", keys)
	}
	if h := rawHeadJSON(t, c, bucket, "hi/h/m%2F1"); string(h["indexed"]) != "true" {
		t.Fatalf("the head after the cut: indexed %s; want it still Indexed", h["indexed"])
	}
	// Another process reads: the commit is in the log (its create stood).
	_, other := openDatastore(t, c, bucket, "hi")
	for p, v := range files {
		if _, got, err := other.Get(ctx, p); err != nil || string(got) != v {
			t.Fatalf("Get(%s) after the cut = %q, %v; want %q", p, got, err, v)
		}
	}
	rep, err := other.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, p := range rep.Problems {
		if strings.Contains(p.Object, "/f/data/m/1/") {
			named++
		}
	}
	if left := rawKeys(t, c, bucket, "hi/f/"); named != len(left) {
		t.Fatalf("check after the cut: %+v; want the index objects %v named", rep.Problems, left)
	}
	// ls settles the pending commit (rolls it forward): the move is made whole.
	wantFiles(t, other, "data/m/", files)
	if keys := rawKeys(t, c, bucket, "hi/f/"); len(keys) != 5 {
		t.Fatalf("index objects after the settling: %v; want the 5 entries", keys)
	}
	wantClean(t, other)
}

// TestHeadIndexHostilePeer: a client that is not lake writes an index
// object for a path of an Indexed partition (what the contract does not
// allow): it is no entry, so stat, ls and the clash check ignore it
// (a file below it is put), and check names it; repair moves it aside.
// Then it rewrites the head with an entry naming another path: a stat of
// that path is refused as damage, check names the head, and repair
// rebuilds the entry from the log.
func TestHeadIndexHostilePeer(t *testing.T) {
	_, s, c, bucket := headIndexStore(t)
	ctx := t.Context()
	files := map[string]string{"data/m/1/a": "a", "data/m/1/b": "b"}
	putFiles(t, s, files)
	foreign := `{"path":"data/m/1/x","version":"f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0","size":1,"inline":"eA==","pos":9,"time":"2026-12-01T00:00:00Z"}`
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("hi/f/data/m/1/x~"), Body: strings.NewReader(foreign)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "data/m/1/x"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("Stat of the foreign object's path: %v; want not found", err)
	}
	wantFiles(t, s, "data/m/", files)
	if _, err := s.Put(ctx, "data/m/1/x/1/raw", strings.NewReader("below"), nil); err != nil {
		t.Fatalf("a file below the foreign object's path: %v; want it put", err)
	}
	files["data/m/1/x/1/raw"] = "below"
	rep, err := s.Check(ctx, datastore.CheckOptions{Repair: true})
	if err != nil || len(rep.Problems) != 1 || !strings.HasSuffix(rep.Problems[0].Object, "hi/f/data/m/1/x~") || rep.Unrepaired() != 0 {
		t.Fatalf("check --repair: %+v, %v; want the foreign object named and moved aside", rep.Problems, err)
	}
	wantClean(t, s)

	// A head rewritten with an entry that names another path.
	h := rawHeadJSON(t, c, bucket, "hi/h/m%2F1")
	var entries map[string]map[string]any
	if err := json.Unmarshal(h["files"], &entries); err != nil || entries["data/m/1/a"] == nil {
		t.Fatalf("the head's entries %s: %v", h["files"], err)
	}
	entries["data/m/1/a"]["path"] = "data/m/1/zz"
	h["files"], _ = json.Marshal(entries)
	forged, _ := json.Marshal(h)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("hi/h/m%2F1"), Body: bytes.NewReader(forged)}); err != nil {
		t.Fatal(err)
	}
	_, fresh := openDatastore(t, c, bucket, "hi")
	if _, err := fresh.Stat(ctx, "data/m/1/a"); !errors.Is(err, datastore.ErrDamaged) {
		t.Fatalf("Stat of the forged entry's path: %v; want damage", err)
	}
	rep, err = fresh.Check(ctx, datastore.CheckOptions{Repair: true})
	if err != nil || len(rep.Problems) == 0 || rep.Unrepaired() != 0 {
		t.Fatalf("check --repair of the forged head: %+v, %v", rep.Problems, err)
	}
	wantFiles(t, fresh, "data/m/", files)
	wantClean(t, fresh)
}

// TestDropIndexedPartition: a drop of a partition whose head holds its
// index counts its files and tombstones from the head, hands its live
// versions in chunks to Reclaim, and leaves no object of it.
func TestDropIndexedPartition(t *testing.T) {
	d, s, c, bucket := headIndexStore(t)
	ctx := t.Context()
	big := strings.Repeat("x", 5000) // stored in chunks
	putFiles(t, s, map[string]string{"data/m/1/a": "a", "data/m/1/b": "b", "data/m/1/big": big})
	if _, err := s.Delete(ctx, "data/m/1/b"); err != nil {
		t.Fatal(err)
	}
	bigInfo, err := s.Stat(ctx, "data/m/1/big")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.DropPartition(ctx, nil, "m/1")
	if err != nil || st.Files != 2 || st.Tombstones != 1 {
		t.Fatalf("drop: %+v, %v; want 2 files and 1 tombstone", st, err)
	}
	if ok, err := d.HandedToReclaim(ctx, bigInfo.Version); err != nil || !ok {
		t.Fatalf("the big file's version handed to Reclaim: %v, %v", ok, err)
	}
	for _, dir := range []string{"hi/h/m%2F1", "hi/l/m%2F1/", "hi/f/"} {
		if keys := rawKeys(t, c, bucket, dir); len(keys) != 0 {
			t.Fatalf("left after the drop under %s: %v", dir, keys)
		}
	}
	wantFiles(t, s, "data/m/", map[string]string{})
}

// TestReclaimPurgesTombstonesInTheHead: a reclaim past the horizon purges
// the tombstones an Indexed head holds, and raises its floor, in one
// write of the head.
func TestReclaimPurgesTombstonesInTheHead(t *testing.T) {
	_, s, c, bucket := headIndexStore(t)
	ctx := t.Context()
	putFiles(t, s, map[string]string{"data/m/1/a": "a", "data/m/1/b": "b"})
	info, err := s.Delete(ctx, "data/m/1/b")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past S3's one-second times
	st, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Nanosecond, UploadGrace: time.Hour, Horizon: time.Nanosecond})
	if err != nil || st.Tombstones != 1 {
		t.Fatalf("reclaim: %+v, %v; want the tombstone purged", st, err)
	}
	h := rawHeadJSON(t, c, bucket, "hi/h/m%2F1")
	if bytes.Contains(h["files"], []byte("data/m/1/b")) {
		t.Fatalf("the head still holds the purged tombstone: %s", h["files"])
	}
	var floor uint64
	if json.Unmarshal(h["floor"], &floor) != nil || floor != info.Pos {
		t.Fatalf("the head's floor %s; want %d", h["floor"], info.Pos)
	}
	if _, _, err := s.Changes(ctx, "m/1", info.Pos-1, 10); !errors.Is(err, datastore.ErrHorizon) {
		t.Fatalf("a feed read from before the floor: %v; want ErrHorizon", err)
	}
	wantFiles(t, s, "data/m/", map[string]string{"data/m/1/a": "a"})
	wantClean(t, s)
}

// TestListAcrossHeadIndexes: ls of a prefix that spans partitions whose
// heads hold their index and one whose index moved to f/, a page of 2 at a
// time, returns every live file once, in order.
func TestListAcrossHeadIndexes(t *testing.T) {
	defer s3fs.SetHeadIndexBounds(4, 1<<20)()
	_, s, _, _ := headIndexStore(t)
	ctx := t.Context()
	want := map[string]string{}
	for _, m := range []string{"m/1", "m/2", "m/3"} {
		n := 3
		if m == "m/2" {
			n = 6 // its index moves out
		}
		files := map[string]string{}
		for i := range n {
			files[fmt.Sprintf("data/%s/f%d", m, i)] = m
		}
		putFiles(t, s, files)
		for p, v := range files {
			want[p] = v
		}
	}
	var got []string
	var cur string
	for range 100 {
		page, err := s.List(ctx, "data/m/", 2, cur)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.Files {
			got = append(got, f.Path)
		}
		if page.Cursor == "" {
			break
		}
		cur = page.Cursor
	}
	wantPaths := slices.Sorted(maps.Keys(want))
	if !slices.Equal(got, wantPaths) {
		t.Fatalf("ls by pages of 2 = %v; want %v", got, wantPaths)
	}
}

// TestReclaimPurgeRacesACommit: the purge of an Indexed head's tombstones
// is a conditional write of the head, which the partition's commits also
// write: a commit that lands between the reclaim's read and its write (a
// raw pause of the reclaim's head write, another store's commit meanwhile)
// makes the reclaim read the head again and purge over it, the commit's
// entry kept, the tombstone purged, the dead log objects deleted. (It gave
// up at the first such conflict, leaving the dead objects and its mark for
// the next run, which met the same: in the seed's loop of ten workers the
// reclaim of the catalog's partitions, which their owners write all the
// time, read ever more log objects, 485 to 3,999 a tenth of a run.)
func TestReclaimPurgeRacesACommit(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &logListsAPI{API: c}
	_, s := openStore(t, api, bucket, "rp")
	s.SetLayout(datastore.LayoutModelsV3)
	_, other := openStore(t, c, bucket, "rp")
	other.SetLayout(datastore.LayoutModelsV3)
	ctx := t.Context()
	for i := range 5 {
		putFiles(t, s, map[string]string{"data/m/1/a": fmt.Sprint(i)})
	}
	putFiles(t, s, map[string]string{"data/m/1/b": "b"})
	if _, err := s.Delete(ctx, "data/m/1/b"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past S3's one-second times
	var raced atomic.Bool
	api.beforePut = func(key string) {
		if strings.HasSuffix(key, "rp/h/m%2F1") && raced.CompareAndSwap(false, true) {
			if _, err := other.Put(ctx, "data/m/1/x", strings.NewReader("x"), nil); err != nil {
				t.Errorf("the racing commit: %v", err)
			}
		}
	}
	st, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Nanosecond, UploadGrace: time.Hour, Horizon: time.Nanosecond})
	api.beforePut = nil
	if err != nil || !raced.Load() || st.Tombstones != 1 {
		t.Fatalf("reclaim: %+v, %v (raced %v); want the tombstone purged over the racing commit", st, err, raced.Load())
	}
	h := rawHeadJSON(t, c, bucket, "rp/h/m%2F1")
	if bytes.Contains(h["files"], []byte(`"data/m/1/b"`)) || !bytes.Contains(h["files"], []byte(`"data/m/1/x"`)) {
		t.Fatalf("the head's entries after the purge: %s; want b purged and the racing commit's x kept", h["files"])
	}
	// Left: a's last change, the log's last object as the reclaim listed
	// it (b's tombstone, always kept), and the racing commit's.
	if logs := rawKeys(t, c, bucket, "rp/l/m%2F1/"); len(logs) != 3 {
		t.Fatalf("log objects left: %v; want the 4 dead ones of a's earlier changes and b's put deleted", logs)
	}
	wantFiles(t, s, "data/m/", map[string]string{"data/m/1/a": "4", "data/m/1/x": "x"})
}

// TestListReadsTheHeadsAPageNeeds: ls in pages reads, for each page, the
// heads of the partitions whose keys can be on it (those sorting from the
// page's start, until the page is full before the next partition's
// prefix), not every partition's: 40 models of 2 files and a file of the
// "data" partition, in pages of 5, read about 5 heads a page (every one
// of the 41, on each of the 17 pages, before), and return every file once,
// in key order. A partition whose index moved to f/ (m/07) is listed from
// there, in its place. The hostile peer: a raw client's index object for a
// path of m/39, whose head holds its index, is no entry: the pages before
// m/39's, which do not read its head, meet it in their f/ listing and never
// reach it; m/39's page reads the head and skips it.
func TestListReadsTheHeadsAPageNeeds(t *testing.T) {
	defer s3fs.SetHeadIndexBounds(2, 1<<20)()
	d, s, c, bucket := headIndexStore(t)
	ctx := t.Context()
	want := map[string]string{"data/README": "r"}
	putFiles(t, s, map[string]string{"data/README": "r"})
	for i := range 40 {
		files := map[string]string{}
		n := 2
		if i == 7 {
			n = 3 // more than the head keeps: its index moves to f/
		}
		for j := range n {
			files[fmt.Sprintf("data/m/%02d/f%d", i, j)] = fmt.Sprint(i, j)
		}
		putFiles(t, s, files)
		maps.Copy(want, files)
	}
	// A copy of m/07's index object of f0, naming a path of m/39.
	body := rawGet(t, c, bucket, "hi/f/data/m/07/f0~")
	rawPut(t, c, bucket, "hi/f/data/m/39/ghost~", strings.ReplaceAll(string(body), "data/m/07/f0", "data/m/39/ghost"))
	var got []string
	var cur string
	pages := 0
	before := d.Requests()
	for range 100 {
		page, err := s.List(ctx, "data/", 5, cur)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, f := range page.Files {
			got = append(got, f.Path)
		}
		if page.Cursor == "" {
			break
		}
		cur = page.Cursor
	}
	after := d.Requests()
	wantPaths := slices.Sorted(maps.Keys(want))
	slices.SortFunc(wantPaths, func(a, b string) int { return strings.Compare(a+"~", b+"~") }) // key order
	if !slices.Equal(got, wantPaths) {
		t.Fatalf("ls by pages of 5 = %v; want %v", got, wantPaths)
	}
	// Each page: the partitions of its 5 files and a batch of 8 read at
	// once around them; the index objects of m/07 read from f/.
	if gets := after.Get - before.Get; gets > int64(pages*(5+8)) {
		t.Fatalf("ls of %d files in %d pages read %d objects; want at most %d (a page's heads), not every head each page", len(want), pages, gets, pages*(5+8))
	} else {
		t.Logf("ls of %d files in %d pages: %d GETs", len(want), pages, gets)
	}
}
