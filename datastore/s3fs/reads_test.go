package s3fs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// readsAPI counts, per kind of key below the datastore's prefix (its first
// segment: u, v, q, c, …), the objects read, one per GET or HEAD, and under
// "list:KIND" the keys its listings returned.
type readsAPI struct {
	s3fs.API
	mu    sync.Mutex
	reads map[string]int
}

func (r *readsAPI) count(key string, n int) {
	kind, _, _ := strings.Cut(strings.TrimPrefix(key, testPrefix), "/")
	r.mu.Lock()
	r.reads[kind] += n
	r.mu.Unlock()
}

func (r *readsAPI) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reads
	r.reads = map[string]int{}
	return out
}

func (r *readsAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	r.count(aws.ToString(in.Key), 1)
	return r.API.GetObject(ctx, in, o...)
}

func (r *readsAPI) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	r.count(aws.ToString(in.Key), 1)
	return r.API.HeadObject(ctx, in, o...)
}

func (r *readsAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	out, err := r.API.ListObjectsV2(ctx, in, o...)
	if out != nil {
		r.count(testPrefix+"list:"+strings.TrimPrefix(aws.ToString(in.Prefix), testPrefix), len(out.Contents))
	}
	return out, err
}

// readsStore opens a datastore in a fresh bucket through a readsAPI, and
// returns the bucket's raw client and name for looking from outside.
func readsStore(t *testing.T) (*readsAPI, *datastore.Store, *s3.Client, string) {
	t.Helper()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &readsAPI{API: c, reads: map[string]int{}}
	d, err := s3fs.Open(t.Context(), api, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return api, s, c, bucket
}

// TestReclaimReadsOnlyWhatIsDue: upload intents and replaced versions are
// named by time, so a reclaim within the grace period reads a first small
// page of each and nothing else of them, however many there are (the
// lifecycle reclaims every few seconds); past the grace period it reclaims
// every replaced version's chunks and every intent, and keeps the live
// files whole.
func TestReclaimReadsOnlyWhatIsDue(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	ctx := t.Context()
	start := time.Now()
	const files = 60
	for round := range 2 { // the second round replaces every version of the first
		for i := range files {
			if _, err := s.Put(ctx, fmt.Sprintf("data/m/p/f%03d", i), strings.NewReader(oneChunk(fmt.Sprint(round, i))), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	api.take()
	opts := datastore.ReclaimOptions{Grace: time.Hour}
	s.SetClock(func() time.Time { return start.Add(30 * time.Minute) })
	st, err := s.Reclaim(ctx, opts)
	if err != nil || st.Versions+st.Uploads+st.Chunks != 0 {
		t.Fatalf("reclaim within the grace period = %+v, %v; want nothing reclaimed", st, err)
	}
	reads := api.take()
	for _, kind := range []string{"list:u", "list:v", "list:q", "u", "v", "q"} {
		if reads[kind] > 32 || (!strings.HasPrefix(kind, "list:") && reads[kind] > 0) {
			t.Errorf("reclaim within the grace period read %d objects of %s/ (%v); want at most one first page of 32 keys listed and no object read", reads[kind], kind, reads)
		}
	}
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	st, err = s.Reclaim(ctx, opts)
	if err != nil || st.Versions != files || st.Chunks != files || st.Uploads != 0 {
		t.Fatalf("reclaim past the grace period = %+v, %v; want %d versions and their chunks, no upload", st, err, files)
	}
	for i := range files {
		p := fmt.Sprintf("data/m/p/f%03d", i)
		if _, got, err := s.Get(ctx, p); err != nil || string(got) != oneChunk(fmt.Sprint(1, i)) {
			t.Fatalf("%s after the reclaim reads %.40q, %v; want the second round's", p, got, err)
		}
	}
	left := map[string]int{}
	for _, k := range bucketKeys(t, c, bucket) {
		kind, _, _ := strings.Cut(strings.TrimPrefix(k, testPrefix), "/")
		left[kind]++
	}
	if left["u"]+left["v"]+left["q"] != 0 || left["c"] != files {
		t.Fatalf("after the reclaim the bucket holds %v; want no intent or marker and one chunk per live file", left)
	}
}

// TestPullListsOnlyWhatIsNew: a pull from where the last one stopped (an
// object's end) lists the log objects after it, not the MaxCommit
// positions before it, so its cost follows what changed however long the
// log is; a pull from within an object still finds that object.
func TestPullListsOnlyWhatIsNew(t *testing.T) {
	api, s, _, _ := readsStore(t)
	ctx := t.Context()
	const part = "m/p"
	for i := range 150 { // one log object a put
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/f%03d", part, i%40), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.Head(ctx, part)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/new%d", part, i), strings.NewReader("n"), nil); err != nil {
			t.Fatal(err)
		}
	}
	api.take()
	ch, _, err := s.Changes(ctx, part, h.Seq, 1000)
	if err != nil || len(ch) != 3 {
		t.Fatalf("changes after %d: %d, %v; want the 3 new puts", h.Seq, len(ch), err)
	}
	if reads := api.take(); reads["list:l"]+reads["l"] > 3+3 {
		t.Errorf("a pull of 3 new commits read %d log keys and objects (%v); want the 3 new objects listed and read (6)", reads["list:l"]+reads["l"], reads)
	}
	// From inside a commit of several entries: the object holding the
	// next position starts before it.
	var es []datastore.Entry
	for i := range 4 {
		st, err := s.Upload(ctx, fmt.Sprintf("data/%s/multi%d", part, i), strings.NewReader("m"), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	h, _ = s.Head(ctx, part)
	if _, err := s.Commit(ctx, nil, es); err != nil {
		t.Fatal(err)
	}
	ch, _, err = s.Changes(ctx, part, h.Seq+2, 1000)
	if err != nil || len(ch) != 2 || ch[0].Path != fmt.Sprintf("data/%s/multi2", part) {
		t.Fatalf("changes from inside a commit: %+v, %v; want its last 2 entries", ch, err)
	}
}

// TestCompactionReadsEachYoungObjectOnce: a reclaim within the grace period
// reads the log objects it has not read before (it lists the log's keys),
// and purges a tombstone that has passed the horizon since without reading
// its object again.
func TestCompactionReadsEachYoungObjectOnce(t *testing.T) {
	api, s, _, _ := readsStore(t)
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	const part = "m/p"
	for i := range 40 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/f%02d", part, i%20), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, fmt.Sprintf("data/%s/f00", part)); err != nil {
		t.Fatal(err)
	}
	opts := datastore.ReclaimOptions{Grace: time.Hour, Horizon: time.Minute}
	if st, err := s.Reclaim(ctx, opts); err != nil || st.Tombstones != 0 {
		t.Fatalf("first reclaim = %+v, %v; want no tombstone purged (within the horizon)", st, err)
	}
	if reads := api.take(); reads["l"] < 41 {
		t.Fatalf("the first reclaim read %d log objects (%v); want all 41", reads["l"], reads)
	}
	for i := range 2 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/g%d", part, i), strings.NewReader("g"), nil); err != nil {
			t.Fatal(err)
		}
	}
	s.SetClock(func() time.Time { return start.Add(2 * time.Minute) })
	api.take()
	st, err := s.Reclaim(ctx, opts)
	if err != nil || st.Tombstones != 1 {
		t.Fatalf("second reclaim = %+v, %v; want the tombstone, past the horizon now, purged", st, err)
	}
	if reads := api.take(); reads["l"] > 2 || reads["list:l"] < 43 {
		t.Fatalf("the second reclaim read %d log objects and listed %d keys (%v); want the 2 new objects read, every key listed", reads["l"], reads["list:l"], reads)
	}
	if _, _, err := s.Get(ctx, fmt.Sprintf("data/%s/f00", part)); err == nil {
		t.Fatal("the purged path still reads")
	}
	for i := 1; i < 20; i++ {
		p := fmt.Sprintf("data/%s/f%02d", part, i)
		if _, got, err := s.Get(ctx, p); err != nil || string(got) != fmt.Sprint(20+i) {
			t.Fatalf("%s reads %q, %v; want its second version", p, got, err)
		}
	}
}

// TestCompactionByTheHeadIndex (issue 31): a partition whose head holds its
// index (layout models-v3) is compacted from the head alone: the reclaim
// reads no log object, and deletes exactly the dead objects a reclaim that
// reads each one deletes (layout models, the control: every object read),
// keeps the live ones and the log's last, and purges a tombstone past the
// horizon in the head. A raw client's objects under the log's prefix: a
// key that names no position is neither read nor deleted; a dead object
// overwritten with garbage is deleted like the object it replaced (it holds
// no path's latest change, by the head), never read as one.
func TestCompactionByTheHeadIndex(t *testing.T) {
	for _, l := range []datastore.Layout{datastore.LayoutModels, datastore.LayoutModelsV3} {
		t.Run(l.String(), func(t *testing.T) {
			api, s, c, bucket := readsStore(t)
			s.SetLayout(l)
			ctx := t.Context()
			const part = "m/p"
			logPrefix := testPrefix + "l/m%2Fp/"
			for i := range 40 { // positions 1 to 40: f00..f19 twice
				if _, err := s.Put(ctx, fmt.Sprintf("data/%s/f%02d", part, i%20), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
					t.Fatal(err)
				}
			}
			del, err := s.Delete(ctx, fmt.Sprintf("data/%s/f00", part)) // 41
			if err != nil {
				t.Fatal(err)
			}
			if l == datastore.LayoutModelsV3 {
				raw := func(key, body string) {
					if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
						t.Fatal(err)
					}
				}
				raw(logPrefix+"notes.txt", "a foreign object")
				raw(fmt.Sprintf("%s%020d", logPrefix, 5), "not a log object") // f04's first version, dead
			}
			time.Sleep(1100 * time.Millisecond) // past S3's one-second times
			api.take()
			st, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Nanosecond, UploadGrace: time.Hour, Horizon: time.Hour})
			if err != nil || st.Tombstones != 0 {
				t.Fatalf("reclaim within the horizon = %+v, %v; want no tombstone purged", st, err)
			}
			reads := api.take()
			if l == datastore.LayoutModelsV3 && reads["l"] != 0 {
				t.Fatalf("the reclaim read %d log objects (%v); want none: the head holds the index", reads["l"], reads)
			}
			if l == datastore.LayoutModels && reads["l"] < 40 {
				t.Fatalf("the control's reclaim read %d log objects (%v); want each (40)", reads["l"], reads)
			}
			keys := rawKeys(t, c, bucket, logPrefix)
			// Positions 1 to 21 are dead (the first round, and f00's
			// second version, which the delete replaced).
			var want []string
			for pos := 22; pos <= 41; pos++ {
				want = append(want, fmt.Sprintf("%s%020d", logPrefix, pos))
			}
			if l == datastore.LayoutModelsV3 {
				want = append(want, logPrefix+"notes.txt")
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("the log after the reclaim: %v; want %v", keys, want)
			}
			for i := 1; i < 20; i++ {
				p := fmt.Sprintf("data/%s/f%02d", part, i)
				if _, got, err := s.Get(ctx, p); err != nil || string(got) != fmt.Sprint(20+i) {
					t.Fatalf("%s reads %q, %v; want its second version", p, got, err)
				}
			}
			api.take()
			st, err = s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Nanosecond, UploadGrace: time.Hour, Horizon: time.Nanosecond})
			if err != nil || st.Tombstones != 1 {
				t.Fatalf("reclaim past the horizon = %+v, %v; want f00's tombstone purged", st, err)
			}
			if reads := api.take(); l == datastore.LayoutModelsV3 && reads["l"] != 0 {
				t.Fatalf("the purge read %d log objects (%v); want none", reads["l"], reads)
			}
			if _, _, err := s.Changes(ctx, part, del.Pos-1, 10); !errors.Is(err, datastore.ErrHorizon) {
				t.Fatalf("a feed read from before the purged tombstone: %v; want ErrHorizon", err)
			}
		})
	}
}
