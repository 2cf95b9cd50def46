package s3fs_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
)

// TestHeadCarriesItsObjectsFences (issue 31): the roll-forward copies the
// fences of the log object ending at the applied position into the head,
// so a writer in a fresh process judges the log after it by the copy and
// does not read that object (one GET less a commit). Seen from outside: the
// head's JSON holds the copy. A head without it (written before, or by a
// foreign writer) costs the GET again and the next roll-forward writes the
// copy back; a copy that disagrees with its object (a foreign writer's) is
// named by lake data check, and --repair drops it.
func TestHeadCarriesItsObjectsFences(t *testing.T) {
	s, _, c, bucket := foreignStore(t)
	ctx := t.Context()
	const tok = 1<<32 | 7
	fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(tok)}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	headKey := "lake/ds/h/m%2F1"
	readHead := func() map[string]any {
		t.Helper()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(headKey)})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		body, _ := io.ReadAll(out.Body)
		var h map[string]any
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	writeHead := func(h map[string]any) {
		t.Helper()
		body, _ := json.Marshal(h)
		rawPut(t, c, bucket, headKey, string(body))
	}
	// commit commits path from a fresh process (no tail handed over from
	// an earlier call) and returns the GETs it sent.
	commit := func(path string) int64 {
		t.Helper()
		d, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: "lake/ds"})
		if err != nil {
			t.Fatal(err)
		}
		w := datastore.New(d)
		defer w.Close()
		st, err := w.Upload(ctx, path, strings.NewReader(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		before := d.Requests()
		if _, err := w.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
			t.Fatalf("commit of %s: %v", path, err)
		}
		return d.Requests().Get - before.Get
	}
	copied := func(when string, applied float64) {
		t.Helper()
		h := readHead()
		fences, _ := h["fences"].(map[string]any)
		if h["applied"] != applied || h["fencesAt"] != applied || fences[fenceKey] != float64(tok) {
			t.Errorf("%s: head %v, want applied and fencesAt %v and fences {%s: %d}", when, h, applied, fenceKey, uint64(tok))
		}
	}

	commit("data/m/1/a")
	commit("data/m/1/b")
	copied("after two commits", 2)
	withCopy := commit("data/m/1/c")
	copied("after a third", 3)

	// A head as lake wrote it before the copy existed.
	h := readHead()
	delete(h, "fences")
	delete(h, "fencesAt")
	writeHead(h)
	without := commit("data/m/1/d")
	if without != withCopy+1 {
		t.Errorf("a commit read %d objects with the head's copy and %d without; want exactly one more without", withCopy, without)
	}
	copied("after a commit over a head without the copy", 4)

	// A foreign writer lowers the copy: lake data check names the head.
	h = readHead()
	h["fences"] = map[string]uint64{fenceKey: 1}
	writeHead(h)
	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.HasSuffix(rep.Problems[0].Object, headKey) || !strings.Contains(rep.Problems[0].What, "copy of the fences") {
		t.Fatalf("check of a head whose copy disagrees: %v, want one problem naming %s", rep.Problems, headKey)
	}
	rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true, Fence: fence})
	if err != nil || rep.Unrepaired() != 0 {
		t.Fatalf("repair: %v, %v", rep.Problems, err)
	}
	if h := readHead(); h["fencesAt"] != nil || h["fences"] != nil {
		t.Errorf("head after the repair: %v, want no copy", h)
	}
	if rep, err := s.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair: %v, %v; want clean", rep.Problems, err)
	}
	commit("data/m/1/e")
	copied("after a commit following the repair", 5)
	files, err := s.ListAll(ctx, "data/m/1/")
	if err != nil || len(files) != 5 {
		t.Errorf("ls: %d files, %v; want 5", len(files), err)
	}

	// A forged value that a roll-forward copied: the object it ends at and
	// the head's copy both name a token no holder was issued. Lowering the
	// object alone would leave the copy; the check names both, the repair
	// mends both, and a second check is clean.
	const huge = uint64(1) << 62
	obj := "lake/ds/l/m%2F1/00000000000000000005"
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(obj)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	var o map[string]any
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	o["fences"] = map[string]uint64{fenceKey: huge}
	forged, _ := json.Marshal(o)
	rawPut(t, c, bucket, obj, string(forged))
	h = readHead()
	h["fences"] = map[string]uint64{fenceKey: huge}
	writeHead(h)
	rep, err = s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, p := range rep.Problems {
		named[strings.TrimPrefix(p.Object, bucket+"/")] = true
	}
	// The head twice: its copy of the fences, and its copy of the object
	// (recent.go), which the raw client left as it was.
	if len(rep.Problems) != 3 || !named[obj] || !named[headKey] {
		t.Fatalf("check of a forged value in the object and its head's copy: %v, want the object and the head", rep.Problems)
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true, Fence: fence}); err != nil || rep.Unrepaired() != 0 {
		t.Fatalf("repair: %v, %v", rep.Problems, err)
	}
	if rep, err := s.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair of a forged value: %v, %v; want clean", rep.Problems, err)
	}
	commit("data/m/1/f")
	copied("after a commit following that repair", 6)
}
