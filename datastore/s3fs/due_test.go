package s3fs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// TestForeignDueEntryKeepsALiveVersion (issue 28, found from outside): a
// due-queue entry q/TIME/VERSION written by another client and naming a
// live version, with or without a path in it, never makes Reclaim delete
// that version's chunks; a version lake itself replaced is still reclaimed.
func TestForeignDueEntryKeepsALiveVersion(t *testing.T) {
	s, _, c, bucket := foreignStore(t)
	ctx := t.Context()
	now := time.Now()
	s.SetClock(func() time.Time { return now })
	live, err := s.Put(ctx, "data/m/1/a", strings.NewReader("live bytes"), nil)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Put(ctx, "data/m/1/b", strings.NewReader(oneChunk("first")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/1/b", strings.NewReader("second"), nil); err != nil {
		t.Fatal(err)
	}
	past := func(h time.Duration) string {
		return now.Add(-h * time.Hour).UTC().Format("20060102T150405.000000000Z")
	}
	rawPut(t, c, bucket, "lake/ds/q/"+past(48)+"/"+live.Version, "")
	rawPut(t, c, bucket, "lake/ds/q/"+past(47)+"Z/"+live.Version, "a key that names no time")
	rawPut(t, c, bucket, "lake/ds/q/"+past(46)+"/"+live.Version, `{"path":"data/m/1/a"}`)
	rawPut(t, c, bucket, "lake/ds/v/"+live.Version+"x", `{"path":"data/m/1/a"}`)

	now = now.Add(2 * datastore.DefaultGrace)
	st, err := s.Reclaim(ctx, datastore.ReclaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Versions != 1 {
		t.Errorf("reclaimed %d versions, want 1 (%s, replaced by lake)", st.Versions, old.Version)
	}
	if st.LiveKept != 2 {
		t.Errorf("kept %d queued live versions, want 2 (the forged entries that parse)", st.LiveKept)
	}
	if _, b, err := s.Get(ctx, "data/m/1/a"); err != nil || string(b) != "live bytes" {
		t.Fatalf("the live file after reclaim reads %q, %v", b, err)
	}
}
