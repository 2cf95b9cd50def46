package s3fs_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
