package s3fs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// afterLogAPI runs then once, right after the first log object's create
// (the commit point), as a foreign writer racing the commit's roll-forward.
type afterLogAPI struct {
	s3fs.API
	once sync.Once
	then func()
}

func (a *afterLogAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := a.API.PutObject(ctx, in, o...)
	if err == nil && strings.Contains(*in.Key, "/l/") && a.then != nil {
		a.once.Do(a.then)
	}
	return out, err
}

// TestCommitShortcutsAgainstAForeignWriter (issue 31, hostile peer): a
// commit reads the index once, by a listing of the puts' directory, and
// its roll-forward writes each entry conditional on what that read found
// (If-None-Match for a path the listing did not show) instead of reading
// it again. A raw SDK client's index entry below a new file is still a
// clash (the listing names it); one written between the commit's create
// and its roll-forward, at a higher position, is never overwritten: the
// conditional create fails, the entry is read, and it stays.
func TestCommitShortcutsAgainstAForeignWriter(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	api := &afterLogAPI{API: raw}
	d, err := s3fs.Open(ctx, api, s3fs.Options{Bucket: bucket, Prefix: "sc"})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	s.SetLayout(datastore.LayoutModelsV2)
	t.Cleanup(func() { s.Close() })
	put := func(key, body string) {
		t.Helper()
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatalf("raw PutObject %s: %v", key, err)
		}
	}
	commit := func(paths ...string) error {
		var es []datastore.Entry
		for _, p := range paths {
			st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		_, err := s.Commit(ctx, nil, es)
		return err
	}
	if err := commit("data/m/1/x", "data/m/1/y"); err != nil {
		t.Fatal(err)
	}
	// A live file below a new one, written by the foreign client alone.
	put("sc/f/data/m/1/dir/deep~", `{"path":"data/m/1/dir/deep","version":"vforeign","size":1,"pos":7,"time":"2026-12-01T00:00:00Z"}`)
	if err := commit("data/m/1/dir", "data/m/1/z"); err == nil || !strings.Contains(err.Error(), datastore.ClashReason+"data/m/1/dir/deep") {
		t.Fatalf("a put of a directory holding a foreign file = %v, want a clash", err)
	}
	// A foreign entry at a higher position lands between the create and
	// the roll-forward of a new file.
	api.then = func() {
		put("sc/f/data/m/1/n1~", `{"path":"data/m/1/n1","version":"vforeign","size":1,"pos":99,"time":"2026-12-01T00:00:00Z"}`)
	}
	if err := commit("data/m/1/n1", "data/m/1/n2"); err != nil {
		t.Fatal(err)
	}
	files, err := s.ListAll(ctx, "data/m/1/n")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = f.Version
	}
	if got["data/m/1/n1"] != "vforeign" {
		t.Errorf("the foreign entry at a higher position was overwritten: ls = %v", got)
	}
	if got["data/m/1/n2"] == "" || got["data/m/1/n2"] == "vforeign" {
		t.Errorf("the commit's other file was not rolled forward: ls = %v", got)
	}
}

// TestForeignHeadBase (issue 31, hostile peer): the head's "base" (the
// object ending at its watermark, from which a writer lists the tail) is
// only a hint. A raw SDK client rewrites it to a position inside an
// object, past the watermark, at an earlier object, and to garbage
// positions; each time the next commit still lands at the log's next
// position and every reader sees it.
func TestForeignHeadBase(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	d, err := s3fs.Open(ctx, raw, s3fs.Options{Bucket: bucket, Prefix: "hb"})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	s.SetLayout(datastore.LayoutModelsV2)
	t.Cleanup(func() { s.Close() })
	commit := func(paths ...string) {
		t.Helper()
		var es []datastore.Entry
		for _, p := range paths {
			st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		if _, err := s.Commit(ctx, nil, es); err != nil {
			t.Fatal(err)
		}
	}
	commit("data/m/1/a", "data/m/1/b", "data/m/1/c") // positions 1..3, one object
	commit("data/m/1/d", "data/m/1/e")               // 4..5
	seq := uint64(5)
	for i, base := range []uint64{4, 2, 1, 3, 99, 0} {
		o, err := raw.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("hb/h/m%2F1")})
		if err != nil {
			t.Fatal(err)
		}
		var h map[string]any
		if err := json.NewDecoder(o.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		o.Body.Close()
		h["base"] = base
		body, _ := json.Marshal(h)
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("hb/h/m%2F1"), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		p := fmt.Sprintf("data/m/1/x%d", i)
		commit(p)
		seq++
		h2, err := s.Head(ctx, "m/1")
		if err != nil || h2.Seq != seq {
			t.Fatalf("base %d: head after a commit = %+v, %v; want seq %d", base, h2, err, seq)
		}
		ch, _, err := s.Changes(ctx, "m/1", seq-1, 10)
		if err != nil || len(ch) != 1 || ch[0].Path != p || ch[0].Pos != seq {
			t.Fatalf("base %d: the pull after %d = %+v, %v; want %s at %d", base, seq-1, ch, err, p, seq)
		}
		if info, err := s.Stat(ctx, p); err != nil || info.Pos != seq {
			t.Fatalf("base %d: stat %s = %+v, %v", base, p, info, err)
		}
	}
	files, err := s.ListAll(ctx, "data/m/1/")
	if err != nil || len(files) != 11 {
		t.Fatalf("ListAll = %d files, %v; want 11", len(files), err)
	}
}
