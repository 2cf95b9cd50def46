package s3fs_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
)

// TestCompactionMarkOutlivesTheProcess (issue 28, row 6): what compaction
// has read of a log is kept in the store (k/PARTITION), so a reclaim in a
// new process (every lake data sync is one) reads only the log objects
// written since, not the grace period's commits again. Before, the mark
// lived in process memory and each sync's reclaim re-read them all.
func TestCompactionMarkOutlivesTheProcess(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	ctx := t.Context()
	const part = "m/p"
	for i := range 40 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/f%02d", part, i%20), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	opts := datastore.ReclaimOptions{Grace: time.Hour, Horizon: time.Hour}
	if _, err := s.Reclaim(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if reads := api.take(); reads["l"] < 40 {
		t.Fatalf("the first reclaim read %d log objects; want all 40", reads["l"])
	}
	// A second process: its own client, nothing in memory.
	api2 := &readsAPI{API: c, reads: map[string]int{}}
	d2, err := s3fs.Open(ctx, api2, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
	if err != nil {
		t.Fatal(err)
	}
	s2 := datastore.New(d2)
	for i := range 2 {
		if _, err := s2.Put(ctx, fmt.Sprintf("data/%s/g%d", part, i), strings.NewReader("g"), nil); err != nil {
			t.Fatal(err)
		}
	}
	api2.take()
	if _, err := s2.Reclaim(ctx, opts); err != nil {
		t.Fatal(err)
	}
	// Two marks: m/p's, and data's, which holds m/p's directory claim
	// (claims.go) and is compacted like any partition.
	if reads := api2.take(); reads["l"] > 2 || reads["k"] != 2 {
		t.Fatalf("a new process's reclaim read %d log objects and %d marks (%v); want the 2 new objects and the 2 marks", reads["l"], reads["k"], reads)
	}
	// And a third, with nothing new: no log object read at all.
	api3 := &readsAPI{API: c, reads: map[string]int{}}
	d3, err := s3fs.Open(ctx, api3, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
	if err != nil {
		t.Fatal(err)
	}
	api3.take()
	if _, err := datastore.New(d3).Reclaim(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if reads := api3.take(); reads["l"] != 0 {
		t.Fatalf("a reclaim with nothing new read %d log objects (%v)", reads["l"], reads)
	}
}

// TestCompactionListsWhatChanged (issue 31): a reclaim within the grace
// period lists the log from its start only while its objects are old
// enough to delete, and then from its mark on: not the commits it read
// before and cannot delete yet (an hour of them, in the seed's loop, on
// every reclaim of every worker). Past the grace period it deletes the
// same dead objects as a reclaim that lists the whole log.
func TestCompactionListsWhatChanged(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	ctx := t.Context()
	const part, n = "m/p", 150
	for i := range n {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/f%d", part, i%10), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	young := datastore.ReclaimOptions{Grace: time.Hour, Horizon: time.Hour}
	if _, err := s.Reclaim(ctx, young); err != nil {
		t.Fatal(err)
	}
	if reads := api.take(); reads["list:l"] < n {
		t.Fatalf("the first reclaim listed %d log keys (%v); want every one of the %d", reads["list:l"], reads, n)
	}
	for i := range 3 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/g%d", part, i), strings.NewReader("g"), nil); err != nil {
			t.Fatal(err)
		}
	}
	api.take()
	if _, err := s.Reclaim(ctx, young); err != nil {
		t.Fatal(err)
	}
	// m/p's first page and its mark and new objects; data's log (m/p's
	// directory claim) whole.
	if reads := api.take(); reads["list:l"] > 64+4+4 || reads["l"] > 3 {
		t.Fatalf("a reclaim after 3 commits listed %d log keys and read %d objects (%v); want a page, the mark and the 3 new ones", reads["list:l"], reads["l"], reads)
	}

	// A mark that names an object it did not read (a foreign write, an
	// old time): a new process's reclaim trusts it no more, and lists and
	// reads the whole log, as without one.
	forged := fmt.Sprintf(`{"pos":%d,"key":%q,"mod":"2000-01-01T00:00:00Z"}`, n-1, fmt.Sprintf("%sl/m%%2Fp/%020d", testPrefix, n-1))
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(testPrefix + "k/m%2Fp"), Body: strings.NewReader(forged)}); err != nil {
		t.Fatal(err)
	}
	api2 := &readsAPI{API: c, reads: map[string]int{}}
	d2, err := s3fs.Open(ctx, api2, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := datastore.New(d2).Reclaim(ctx, young); err != nil {
		t.Fatal(err)
	}
	if reads := api2.take(); reads["list:l"] < n+3 || reads["l"] < n+3 {
		t.Fatalf("a reclaim under a forged mark listed %d log keys and read %d objects (%v); want the whole log, %d", reads["list:l"], reads["l"], reads, n+3)
	}

	// Past the grace period: what a whole listing deletes, the dead
	// objects (every path's earlier versions), all but the last. S3's
	// times have one-second steps: an object made in the last second is
	// not past even a nanosecond's grace by them.
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Nanosecond, Horizon: time.Hour}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(testPrefix + "l/m%2Fp/")})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, o := range out.Contents {
		left = append(left, strings.TrimPrefix(aws.ToString(o.Key), testPrefix+"l/m%2Fp/"))
	}
	if len(left) != 13 || left[0] != fmt.Sprintf("%020d", n-9) {
		t.Fatalf("the log after a reclaim past the grace: %d objects from %v; want the 13 holding a live version, from position %d", len(left), left[:min(len(left), 3)], n-9)
	}
	for i := range 10 {
		if _, got, err := s.Get(ctx, fmt.Sprintf("data/%s/f%d", part, i)); err != nil || string(got) != fmt.Sprint(n-10+i) {
			t.Fatalf("f%d reads %q, %v; want %d", i, got, err, n-10+i)
		}
	}
}
