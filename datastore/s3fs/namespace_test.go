package s3fs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// tagKey labels a context with the worker whose requests it carries.
type tagKey struct{}

// keysAPI records the key (or, for a listing, the prefix) of every request,
// by the worker tag of its context, and can fail DeleteObject requests to
// model a crash in the middle of a multi-request operation.
type keysAPI struct {
	s3fs.API
	mu   sync.Mutex
	keys map[string]map[string]bool
	// failDeletesAfter > 0 lets that many more DeleteObject requests pass,
	// then fails every one (a process that died mid-way sends nothing).
	failDeletesAfter atomic.Int64
	failing          atomic.Bool
	// beforePut, if set, runs before each PutObject is sent.
	beforePut func(ctx context.Context, key string)
}

func (k *keysAPI) note(ctx context.Context, key *string) {
	tag, _ := ctx.Value(tagKey{}).(string)
	if tag == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys[tag] == nil {
		k.keys[tag] = map[string]bool{}
	}
	k.keys[tag][aws.ToString(key)] = true
}

func (k *keysAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	k.note(ctx, in.Key)
	if k.beforePut != nil {
		k.beforePut(ctx, aws.ToString(in.Key))
	}
	return k.API.PutObject(ctx, in, o...)
}
func (k *keysAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	k.note(ctx, in.Key)
	return k.API.GetObject(ctx, in, o...)
}
func (k *keysAPI) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	k.note(ctx, in.Key)
	return k.API.HeadObject(ctx, in, o...)
}
func (k *keysAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	k.note(ctx, in.Prefix)
	return k.API.ListObjectsV2(ctx, in, o...)
}
func (k *keysAPI) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	k.note(ctx, in.Key)
	if k.failing.Load() && k.failDeletesAfter.Add(-1) < 0 {
		return nil, errors.New("injected: the process died")
	}
	return k.API.DeleteObject(ctx, in, o...)
}

const testPrefix = "lake/ds/"

// openRecorded opens a datastore under testPrefix over a recording API and
// returns it with the raw client and bucket, to list the bucket behind it.
func openRecorded(t *testing.T) (*datastore.Store, *keysAPI, *s3.Client, string) {
	t.Helper()
	c := s3local.Client(t)
	bucket := s3local.Bucket(t)
	api := &keysAPI{API: c, keys: map[string]map[string]bool{}}
	// Open, as a process does: the datastore's layout record is read and
	// written here, once, not by the namespaces' first commits.
	_, s := openDatastore(t, api, bucket, strings.TrimSuffix(testPrefix, "/"))
	return s, api, c, bucket
}

// bucketKeys lists the whole bucket with the SDK, not through the driver.
func bucketKeys(t *testing.T, c *s3.Client, bucket string) []string {
	t.Helper()
	var out []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			out = append(out, aws.ToString(o.Key))
		}
	}
	return out
}

// registryObject is the object of namespace ns's registry record in s's
// datastore: beside its heads in a models-v4 datastore (a new one's),
// under r/ before.
func registryObject(s *datastore.Store, ns string) string {
	if s.Layout() == datastore.LayoutModelsV4 {
		return testPrefix + "n/" + ns + "/h/!ns~"
	}
	return testPrefix + "r/datastore/namespaces/" + ns + "~"
}

// TestNamespacesShareNoObject: workers of two namespaces commit at once,
// fenced on lock records of their own in the root's records; no request of
// one namespace's workers touches (reads, lists or writes) a key the other
// touches, each request stays under its namespace's tree or names its own
// records (its registry record is in its tree, beside its heads, in a
// models-v4 datastore), and the bucket then holds each namespace's objects under
// PREFIX/n/NAME/ and nothing of the root's tree but records. A fence entry
// appended in a namespace, on a root lock record, refuses an older token.
func TestNamespacesShareNoObject(t *testing.T) {
	root, api, c, bucket := openRecorded(t)
	const workers, commits = 3, 4
	names := []string{"alpha", "beta"}
	var wg sync.WaitGroup
	errs := make(chan error, len(names)*workers)
	for _, ns := range names {
		s, err := root.Namespace(ns)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.WithValue(t.Context(), tagKey{}, ns)
		fence := datastore.Fence{Key: "lock/rec/" + ns + "/sync", Token: []byte(`{"token":7}`)}
		if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
			t.Fatal(err)
		}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range commits {
					p := fmt.Sprintf("data/m/%d/f%d", w%2, i)
					st, err := s.Upload(ctx, p, strings.NewReader(oneChunk(ns+p)), nil)
					if err == nil {
						_, err = s.Commit(ctx, &fence, []datastore.Entry{{Put: &st}})
					}
					if err != nil {
						errs <- fmt.Errorf("%s worker %d: %w", ns, w, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, ns := range names {
		s, _ := root.Namespace(ns)
		if _, got, err := s.Get(t.Context(), "data/m/1/f3"); err != nil || string(got) != oneChunk(ns+"data/m/1/f3") {
			t.Fatalf("%s reads %.40q, %v", ns, got, err)
		}
		own := testPrefix + "n/" + ns + "/"
		records := []string{testPrefix + "r/lock/rec/" + ns + "/sync~", registryObject(root, ns)}
		n := 0
		for k := range api.keys[ns] {
			n++
			if !strings.HasPrefix(k, own) && !slices.Contains(records, k) {
				t.Errorf("a request of namespace %s named %q, outside %s and its records", ns, k, own)
			}
			for _, other := range names {
				if other != ns && api.keys[other][k] {
					t.Errorf("namespaces %s and %s both touched %q", ns, other, k)
				}
			}
		}
		if n < 10 {
			t.Fatalf("only %d keys recorded for %s: the recording is broken", n, ns)
		}
	}
	kinds := map[string]bool{}
	for _, k := range bucketKeys(t, c, bucket) {
		rest, ok := strings.CutPrefix(k, testPrefix)
		if !ok {
			t.Fatalf("object %q is outside the datastore's prefix", k)
		}
		if strings.HasPrefix(rest, "r/") {
			continue // records are the root's, shared by design
		}
		ns, tree, _ := strings.Cut(strings.TrimPrefix(rest, "n/"), "/")
		if !strings.HasPrefix(rest, "n/") || !slices.Contains(names, ns) {
			t.Fatalf("object %q is neither a record nor under a namespace's tree", k)
		}
		kinds[ns+":"+tree[:1]] = true
	}
	for _, ns := range names {
		// No f/: a new datastore's heads hold their index (headindex.go).
		for _, kind := range []string{"c", "u", "l", "h"} {
			if !kinds[ns+":"+kind] {
				t.Errorf("namespace %s has no %s/ object: %v", ns, kind, kinds)
			}
		}
	}

	// The log's fences work across the split: a fence entry appended in a
	// namespace under a root lock record's token refuses a commit there
	// under an older token, though the record now holds its exact bytes.
	ctx := t.Context()
	alpha, _ := root.Namespace("alpha")
	d := alpha.Driver().(*s3fs.Driver)
	newer := datastore.Fence{Key: "lock/rec/alpha/sync", Token: []byte(`{"token":9}`)}
	if err := root.Records().CASRecord(ctx, newer.Key, metastore.ExpectValue([]byte(`{"token":7}`)), newer.Token); err != nil {
		t.Fatal(err)
	}
	if err := d.AppendFence(ctx, newer, []string{"m/0"}); err != nil {
		t.Fatalf("AppendFence in a namespace on a root record: %v", err)
	}
	older := datastore.Fence{Key: newer.Key, Token: []byte(`{"token":8}`)}
	if err := root.Records().CASRecord(ctx, older.Key, metastore.ExpectValue(newer.Token), older.Token); err != nil {
		t.Fatal(err)
	}
	st, err := alpha.Upload(ctx, "data/m/0/late", strings.NewReader("late"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A record that went back to a lower token is one the lock never
	// writes: the log's higher token is then one no holder of the record
	// as it stands was issued, the forged-fence case (TestForgedFenceMidLog):
	// the holder of the record's exact bytes (the only one that can pass
	// the fence check) commits, readers see it, and lake data check names
	// the object carrying the higher token.
	if _, err := alpha.Commit(ctx, &older, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("commit under the record's token 8 after a fence entry of token 9: %v", err)
	}
	if _, b, err := alpha.Get(ctx, "data/m/0/late"); err != nil || string(b) != "late" {
		t.Fatalf("get of the commit under token 8: %q, %v", b, err)
	}
	rep, err := alpha.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The object, and the head's copy of it (recent.go), if it has one.
	if len(rep.Problems) == 0 || len(rep.Problems) > 2 || !strings.Contains(rep.Problems[0].What, "names token 9") {
		t.Fatalf("check: %v; want the fence entry of token 9 named", rep.Problems)
	}
	if len(rep.Problems) == 2 && !strings.Contains(rep.Problems[1].What, "its copy of log object") {
		t.Fatalf("check: %v; want the fence entry of token 9 named, and the head's copy of it", rep.Problems)
	}
}

// TestDropPartitionLeavesNothing: after a drop in a namespace, the bucket
// (listed whole) holds nothing of the partition but its versions' chunks,
// upload intents and replaced-version markers, which Reclaim removes after
// the grace period; a drop that dies half-way leaves the partition
// registered and a second call finishes it; the other partition and the
// other namespace are untouched.
func TestDropPartitionLeavesNothing(t *testing.T) {
	root, api, c, bucket := openRecorded(t)
	ctx := t.Context()
	start := time.Now()
	root.SetClock(func() time.Time { return start })
	s, err := root.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	s.SetClock(func() time.Time { return start })
	var versions []string
	for i := range 12 {
		p := fmt.Sprintf("data/m/gone/f%d", i%8) // 4 replaced
		info, err := s.Put(ctx, p, strings.NewReader(strings.Repeat("x", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, info.Version)
	}
	if _, err := s.Delete(ctx, "data/m/gone/f7"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/kept/a", strings.NewReader("kept"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "data/m/gone/a", strings.NewReader("root's"), nil); err != nil {
		t.Fatal(err)
	}
	ns := testPrefix + "n/alpha/"
	gone := func(k string) bool {
		rest, ok := strings.CutPrefix(k, ns)
		if !ok {
			return false
		}
		if strings.HasPrefix(rest, "l/m%2Fgone/") || rest == "h/m%2Fgone" || strings.HasPrefix(rest, "f/data/m/gone/") {
			return true
		}
		for _, v := range versions {
			if strings.Contains(rest, v) {
				return true
			}
		}
		return false
	}

	// A drop that dies after a few deletes leaves the partition registered.
	api.failDeletesAfter.Store(3)
	api.failing.Store(true)
	first, err := s.DropPartition(ctx, nil, "m/gone")
	if err == nil {
		t.Fatal("a drop whose deletes fail reported success")
	}
	api.failing.Store(false)
	if p, err := s.Partitions(ctx); err != nil || !slices.Contains(p, "m/gone") {
		t.Fatalf("after a half-done drop the partitions are %v, %v; want m/gone still registered", p, err)
	}
	st, err := s.DropPartition(ctx, nil, "m/gone")
	if err != nil || first.Files+st.Files != 7 || first.Tombstones+st.Tombstones != 1 || st.Files == 0 {
		t.Fatalf("the drops = %+v then %+v, %v; want the second to finish the first: 7 files, 1 tombstone in all", first, st, err)
	}
	for _, k := range bucketKeys(t, c, bucket) {
		rest, _ := strings.CutPrefix(k, ns)
		if gone(k) && !slices.ContainsFunc([]string{"c/", "u/", "v/", "q/"}, func(p string) bool { return strings.HasPrefix(rest, p) }) {
			t.Errorf("after the drop the bucket still holds %q", k)
		}
	}
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	if _, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, k := range bucketKeys(t, c, bucket) {
		if gone(k) {
			t.Errorf("after the drop and a reclaim past the grace period the bucket still holds %q", k)
		}
	}
	if _, got, err := s.Get(ctx, "data/m/kept/a"); err != nil || string(got) != "kept" {
		t.Fatalf("the kept partition reads %q, %v", got, err)
	}
	if _, got, err := root.Get(ctx, "data/m/gone/a"); err != nil || string(got) != "root's" {
		t.Fatalf("the root's partition of the same name reads %q, %v", got, err)
	}
}

// TestDropCost prints the requests, by kind, of a drop of k files (each put
// by a commit of its own, one replaced per ten), fenced, for docs/s3.md, in
// a datastore whose index is an object a path (models-v2) and in one whose
// heads hold it (models-v3, a new datastore's):
//
//	go test -run TestDropCost -v ./datastore/s3fs/
func TestDropCost(t *testing.T) {
	for _, l := range []datastore.Layout{datastore.LayoutModelsV2, datastore.LayoutModelsV3} {
		t.Run(l.String(), func(t *testing.T) { dropCost(t, l) })
	}
}

func dropCost(t *testing.T, l datastore.Layout) {
	d := newDriver(t)
	s := datastore.New(d)
	s.SetLayout(l)
	ctx := t.Context()
	fence := datastore.Fence{Key: "lock/rec/ns/sync", Token: []byte(`{"token":1}`)}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 10, 100} {
		part := fmt.Sprintf("m/k%d", k)
		for i := range k + k/10 {
			if _, err := s.Put(ctx, fmt.Sprintf("data/%s/f%d", part, i%k), strings.NewReader("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
		before := d.Requests()
		st, err := s.DropPartition(ctx, &fence, part)
		if err != nil || st.Files != k {
			t.Fatalf("drop of %d files = %+v, %v", k, st, err)
		}
		n := d.Requests()
		t.Logf("drop of %3d files (%3d commits): %3d GET + %d HEAD + %d LIST + %3d PUT + %3d DELETE",
			k, k+k/10, n.Get-before.Get, n.Head-before.Head, n.List-before.List, n.Put-before.Put, n.Delete-before.Delete)
	}
}

// TestCommitRacingDrop: a commit that read its partition's tail before a
// drop and writes after it ends whole one way or the other, never an orphan
// that `ls` lists and a stat does not find. Its log object created after
// the drop: the partition is registered again and the commit is visible,
// as if made after the drop. Its log object created before the drop listed
// the log, its roll-forward (the head's write, which holds the index) after:
// the commit is dropped whole.
func TestCommitRacingDrop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      string // the committer's write before which the drop runs
		visible bool
	}{
		{"log object after the drop", "l/m%2Fr/00000000000000000002", true},
		// The roll-forward's write of the head, which holds the index.
		{"roll-forward after the drop", "h/m%2Fr", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, api, _, _ := openRecorded(t)
			ctx := t.Context()
			if _, err := s.Put(ctx, "data/m/r/a", strings.NewReader("a"), nil); err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			dropped := make(chan error, 1)
			api.beforePut = func(pctx context.Context, key string) {
				if pctx.Value(tagKey{}) == "committer" && key == testPrefix+tc.at {
					once.Do(func() {
						_, err := s.DropPartition(context.WithValue(ctx, tagKey{}, "dropper"), nil, "m/r")
						dropped <- err
					})
				}
			}
			info, err := s.Put(context.WithValue(ctx, tagKey{}, "committer"), "data/m/r/b", strings.NewReader("b"), nil)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-dropped:
				if err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("the drop never ran: no write to %s", tc.at)
			}
			api.beforePut = nil
			_, statErr := s.Stat(ctx, "data/m/r/b")
			files, err := s.ListAll(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			parts, err := s.Partitions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h, err := s.Head(ctx, "m/r")
			if err != nil {
				t.Fatal(err)
			}
			wantNotFound := func(p string) {
				if _, err := s.Stat(ctx, p); !errors.Is(err, metastore.ErrNotFound) {
					t.Fatalf("Stat(%s) after the drop: %v, want not found", p, err)
				}
			}
			wantNotFound("data/m/r/a")
			if tc.visible {
				if statErr != nil || len(files) != 1 || files[0].Path != "data/m/r/b" || !slices.Contains(parts, "m/r") || h.Seq != info.Pos {
					t.Fatalf("the racing commit (pos %d) is not whole: stat %v, ls %v, partitions %v, head %+v", info.Pos, statErr, files, parts, h)
				}
				if _, got, err := s.Get(ctx, "data/m/r/b"); err != nil || string(got) != "b" {
					t.Fatalf("Get = %q, %v", got, err)
				}
			} else {
				wantNotFound("data/m/r/b")
				if len(files) != 0 || slices.Contains(parts, "m/r") || h.Seq != 0 {
					t.Fatalf("the dropped commit left: ls %v, partitions %v, head %+v", files, parts, h)
				}
			}
		})
	}
}

// TestNamespaceNames: the driver takes "" (the root), a namespace and an
// internal scope, and refuses a name that could escape its folder.
func TestNamespaceNames(t *testing.T) {
	d := newDriver(t)
	for _, ok := range []string{"", "alpha", "a.b-c_d", datastore.CatalogScope} {
		if _, err := d.Namespace(ok); err != nil {
			t.Errorf("Namespace(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"a/b", "..", "_", "__x", "-x", strings.Repeat("n", 65), "a~"} {
		if _, err := d.Namespace(bad); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("Namespace(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	// The catalog scope holds its own files, apart from the root's.
	ctx := t.Context()
	cd, _ := d.Namespace(datastore.CatalogScope)
	cat, root := datastore.New(cd), datastore.New(d)
	if _, err := cat.Put(ctx, "catalog/x", strings.NewReader("c"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Stat(ctx, "catalog/x"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the root stats the catalog scope's file: %v", err)
	}
	if _, got, err := cat.Get(ctx, "catalog/x"); err != nil || string(got) != "c" {
		t.Fatalf("catalog scope Get = %q, %v", got, err)
	}
}
