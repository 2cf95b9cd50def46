package s3fs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
)

// TestForgedFenceMidLog (issue 28, row 5): a hostile peer (raw PutObject,
// as boto3 would) puts log objects whose fences name a token of the sync
// lock above any token it ever issued: a fence entry at the partition's
// next position, and an overwrite of a commit in the middle of the log.
// Taken at its word, such a value made every later genuine commit look
// stale to readers (skipped until lake data check --repair) and every
// commit after it fail. Now commits still land, a fresh reader of the
// whole log sees every genuine commit, a stale holder's object is still
// hidden, and lake data check names both forged objects; --repair lowers
// them and a second check is clean.
func TestForgedFenceMidLog(t *testing.T) {
	s, _, c, bucket := foreignStore(t)
	ctx := t.Context()
	const tok = 1<<32 | 5
	fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(tok)}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	commit := func(p string) error {
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Commit(ctx, fence, []datastore.Entry{{Put: &st}})
		return err
	}
	for _, p := range []string{"data/m/1/a", "data/m/1/b", "data/m/1/c"} { // positions 1..3
		if err := commit(p); err != nil {
			t.Fatal(err)
		}
	}
	logKey := func(pos int) string { return fmt.Sprintf("lake/ds/l/m%%2F1/%020d", pos) }
	huge := uint64(1) << 62
	// A forged fence entry at the next position.
	rawPut(t, c, bucket, logKey(4), fmt.Sprintf(`{"first":4,"time":"2026-12-01T00:00:00Z","fence":{"key":%q,"token":%d},"fences":{%q:%d}}`, fenceKey, huge, fenceKey, huge))
	for _, p := range []string{"data/m/1/d", "data/m/1/e"} { // positions 5, 6
		if err := commit(p); err != nil {
			t.Fatalf("commit of %s after a forged fence entry: %v", p, err)
		}
	}
	// A stale holder's object (token below the lock's), then a genuine
	// commit after it: the stale change stays hidden.
	rawPut(t, c, bucket, logKey(7), fmt.Sprintf(`{"first":7,"entries":[{"path":"data/m/1/stale","version":"v","size":1,"chunks":1,"sha256":"x"}],"time":"2026-12-01T00:00:00Z","fence":{"key":%q,"token":%d},"fences":{%q:%d}}`, fenceKey, tok-1, fenceKey, tok-1))
	if err := commit("data/m/1/f"); err != nil { // position 8
		t.Fatalf("commit after a stale holder's object: %v", err)
	}
	// Damage mid-log: the commit at position 2 overwritten with a forged
	// fence, its change kept.
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(logKey(2))})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatal(err)
	}
	obj["fences"] = map[string]uint64{fenceKey: huge, "lock/rec/other/sync": huge}
	forged, _ := json.Marshal(obj)
	rawPut(t, c, bucket, logKey(2), string(forged))

	genuine := []string{"data/m/1/a", "data/m/1/b", "data/m/1/c", "data/m/1/d", "data/m/1/e", "data/m/1/f"}
	readers := func(when string) {
		t.Helper()
		// A fresh process: a new driver reading the whole log.
		d2, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: "lake/ds"})
		if err != nil {
			t.Fatal(err)
		}
		r := datastore.New(d2)
		defer r.Close()
		ch, _, err := r.Changes(ctx, "m/1", 0, 100)
		if err != nil {
			t.Fatalf("%s: pull of the whole log: %v", when, err)
		}
		var got []string
		for _, i := range ch {
			got = append(got, i.Path)
		}
		slices.Sort(got)
		if !slices.Equal(got, genuine) {
			t.Errorf("%s: a pull of the whole log sees %v, want every genuine commit %v (and not the stale one)", when, got, genuine)
		}
		for _, p := range genuine {
			if _, b, err := r.Get(ctx, p); err != nil || string(b) != p {
				t.Errorf("%s: get %s: %q, %v", when, p, b, err)
			}
		}
		if _, err := r.Stat(ctx, "data/m/1/stale"); !errors.Is(err, metastore.ErrNotFound) {
			t.Errorf("%s: stat of the stale holder's path: %v, want not found", when, err)
		}
		files, err := r.ListAll(ctx, "data/")
		if err != nil || len(files) != len(genuine) {
			t.Errorf("%s: ls: %d files, %v; want %d", when, len(files), err, len(genuine))
		}
	}
	readers("before the check")

	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, p := range rep.Problems {
		t.Logf("check: %s", p)
		named[strings.TrimPrefix(p.Object, bucket+"/")] = true
	}
	// The head's copies of the log's last objects (recent.go) hold the
	// forged entry and the overwritten commit as it was: named too.
	for _, k := range []string{logKey(2), logKey(4), "lake/ds/h/m%2F1"} {
		if !named[k] {
			t.Errorf("check did not name the forged %s", k)
		}
	}
	if len(rep.Problems) != 3 {
		t.Errorf("check found %d problems, want the 2 forged objects and the head's copies (the other lock's record is missing: that proves nothing)", len(rep.Problems))
	}
	rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true, Fence: fence})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Unrepaired(); n != 0 || len(rep.Problems) != 3 {
		t.Errorf("repair: %d problems, %d unrepaired; want 3 repaired: %v", len(rep.Problems), n, rep.Problems)
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair: %v, %v; want clean", rep.Problems, err)
	}
	readers("after the repair")
	genuine = append(genuine, "data/m/1/g")
	if err := commit("data/m/1/g"); err != nil {
		t.Fatalf("commit after the repair: %v", err)
	}
	readers("after a commit following the repair")
}

// TestFenceWalkReadsARecordOnlyWhenNeeded: a pull of a sound log reads no
// lock record (the fence rule costs nothing there); after a forged fence
// entry, a pull of the whole log reads the record once, for the first
// genuine object that would otherwise look stale.
func TestFenceWalkReadsARecordOnlyWhenNeeded(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	ctx := t.Context()
	fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(1<<32 | 5)}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	commit := func(p string) {
		t.Helper()
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"data/m/1/a", "data/m/1/b", "data/m/1/c"} {
		commit(p)
	}
	api.take()
	if ch, _, err := s.Changes(ctx, "m/1", 0, 100); err != nil || len(ch) != 3 {
		t.Fatalf("pull: %d changes, %v", len(ch), err)
	}
	if reads := api.take(); reads["r"] != 0 {
		t.Errorf("a pull of a sound log read %d records (%v), want none", reads["r"], reads)
	}
	rawPut(t, c, bucket, strings.TrimSuffix(testPrefix, "/")+"/l/m%2F1/00000000000000000004",
		fmt.Sprintf(`{"first":4,"time":"2026-12-01T00:00:00Z","fence":{"key":%q,"token":%d},"fences":{%q:%d}}`, fenceKey, uint64(1)<<62, fenceKey, uint64(1)<<62))
	commit("data/m/1/d")
	commit("data/m/1/e")
	api.take()
	if ch, _, err := s.Changes(ctx, "m/1", 0, 100); err != nil || len(ch) != 5 {
		t.Fatalf("pull past a forged fence entry: %d changes, %v; want 5", len(ch), err)
	}
	if reads := api.take(); reads["r"] != 1 {
		t.Errorf("a pull past a forged fence entry read %d records (%v), want 1", reads["r"], reads)
	}
}
