package s3fs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// TestCheckRepair (issue 28, rows 4 and 5): objects deleted or damaged by
// a foreign writer (a raw SDK client) are each reported by Check, naming
// the object, and Repair rebuilds what the log holds and moves the rest
// aside: a deleted head, a deleted and a garbage index entry, stray keys
// under h/, l/ and f/, and a forged fence entry with a huge token (which
// commits and readers ignore, but check names). After the repair a second check
// finds nothing, every file is read and listed again, and a fenced commit
// lands.
func TestCheckRepair(t *testing.T) {
	s, _, c, bucket := foreignStore(t)
	ctx := t.Context()
	fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(1<<32 | 5)}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"data/m/1/a", "data/m/1/b", "data/m/2/c", "data/m/3/d"} {
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(key string) {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	damaged := map[string]bool{
		"lake/ds/h/m%2F2":                      true, // deleted
		"lake/ds/f/data/m/1/b~":                true, // deleted
		"lake/ds/f/data/m/1/a~":                true, // garbage
		"lake/ds/h/bad%ZZescape":               true,
		"lake/ds/l/m%2F1/junk":                 true,
		"lake/ds/f/junk":                       true,
		"lake/ds/l/m%2F1/00000000000000000003": true, // forged fence entry
		"lake/ds/u/0junk":                      true,
		"lake/ds/q/0junk":                      true,
		"lake/ds/p/junk":                       true,
		"lake/ds/h/m%2F3":                      true, // garbage
		// The head's copy of the forged fence entry (recent.go), made by
		// the commit after it.
		"lake/ds/h/m%2F1": true,
	}
	rawPut(t, c, bucket, "lake/ds/u/0junk", "x")
	rawPut(t, c, bucket, "lake/ds/q/0junk", "x")
	rawPut(t, c, bucket, "lake/ds/p/junk", "x")
	// Stray keys under u/ and q/ stop no reclaim.
	if _, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil {
		t.Fatalf("reclaim beside stray u/ and q/ keys: %v", err)
	}
	rawPut(t, c, bucket, "lake/ds/h/m%2F3", "{garbage")
	// A damaged partition is named by reclaim, which still does the rest.
	if _, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), "h/m%2F3") {
		t.Fatalf("reclaim beside a damaged head: %v, want it named", err)
	}
	del("lake/ds/h/m%2F2")
	del("lake/ds/f/data/m/1/b~")
	rawPut(t, c, bucket, "lake/ds/f/data/m/1/a~", "garbage")
	rawPut(t, c, bucket, "lake/ds/h/bad%ZZescape", "x")
	rawPut(t, c, bucket, "lake/ds/l/m%2F1/junk", "x")
	rawPut(t, c, bucket, "lake/ds/f/junk", "x")
	huge := uint64(1) << 62
	rawPut(t, c, bucket, "lake/ds/l/m%2F1/00000000000000000003",
		fmt.Sprintf(`{"first":3,"time":"2026-12-01T00:00:00Z","fence":{"key":%q,"token":%d},"fences":{%q:%d}}`, fenceKey, huge, fenceKey, huge))

	// What the damage does before a repair.
	st, err := s.Upload(ctx, "data/m/1/d", strings.NewReader("d"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A forged fence is written by no holder: the commit goes on past it
	// (TestForgedFenceMidLog), and check still names it.
	if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("commit after a forged fence: %v", err)
	}
	if _, err := s.Stat(ctx, "data/m/2/c"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("stat under a deleted head: %v, want not found (the damage this test repairs)", err)
	}

	rep, err := s.Check(ctx, datastore.CheckOptions{Chunks: true})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	if len(rep.Problems) != len(damaged) {
		t.Errorf("check found %d problems, want %d", len(rep.Problems), len(damaged))
	}
	for _, p := range rep.Problems {
		t.Logf("check: %s", p)
		found[strings.TrimPrefix(p.Object, bucket+"/")] = true
		if p.Repaired {
			t.Errorf("check without --repair repaired %s", p.Object)
		}
	}
	for k := range damaged {
		if !found[k] {
			t.Errorf("check did not report %s", k)
		}
	}

	rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true, Fence: fence})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Logf("repair: %s", p)
	}
	if n := rep.Unrepaired(); n != 0 {
		t.Errorf("%d problems left unrepaired", n)
	}
	rep, err = s.Check(ctx, datastore.CheckOptions{Chunks: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("a check after the repair found %v", rep.Problems)
	}
	if _, body, err := s.Get(ctx, "data/m/1/d"); err != nil || string(body) != "d" {
		t.Errorf("get data/m/1/d (committed past the forged fence) after the repair: %q, %v", body, err)
	}
	for _, p := range []string{"data/m/1/a", "data/m/1/b", "data/m/2/c", "data/m/3/d"} {
		if _, body, err := s.Get(ctx, p); err != nil || string(body) != p {
			t.Errorf("get %s after the repair: %q, %v", p, body, err)
		}
	}
	files, err := s.ListAll(ctx, "data/")
	if err != nil || len(files) != 5 {
		t.Errorf("ls after the repair: %d files, %v; want 5", len(files), err)
	}
	if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
		t.Errorf("commit after the repair: %v", err)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("lake/ds/x/")})
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, o := range out.Contents {
		moved = append(moved, aws.ToString(o.Key))
	}
	if len(moved) != 6 { // the six stray keys; the garbage index entry was rebuilt
		t.Errorf("moved aside: %v, want the six stray keys", moved)
	}
}
