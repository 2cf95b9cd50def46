package s3fs_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
)

// TestDropKnowsEntriesByTheirETags (issue 31, dropknown.go): a guarded
// drop of a model whose index entries outnumber its log objects reads the
// log objects and no entry, the guard's included: each entry is known by
// its listed ETag, the MD5 of what the roll-forward wrote. It drops the
// same files, and hands the same chunked version to Reclaim, as a drop
// that reads each entry. An entry another writer rewrote (other bytes,
// another ETag) is read, and dropped as before. The log objects are not
// read either: the head the drop reads carries copies of both (recent.go).
// A copy another writer forged in the head (an entry's size changed, the
// head rewritten by a raw client) builds an entry whose ETag does not
// match: that entry is read, and the drop is the same.
func TestDropKnowsEntriesByTheirETags(t *testing.T) {
	for _, foreign := range []string{"", "entry", "copy"} {
		t.Run("foreign="+foreign, func(t *testing.T) {
			api, s, c, bucket := readsStore(t)
			ctx := t.Context()
			var entries []datastore.Entry
			for i := range 6 {
				body := fmt.Sprintf("file %d", i)
				if i == 5 {
					body = oneChunk("chunked")
				}
				st, err := s.Upload(ctx, fmt.Sprintf("data/m/1/f%d", i), strings.NewReader(body), nil)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, datastore.Entry{Put: &st})
			}
			def, err := s.Upload(ctx, "data/m/1/model.yaml", strings.NewReader("type: m\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, nil, append(entries, datastore.Entry{Put: &def})); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Delete(ctx, "data/m/1/model.yaml"); err != nil {
				t.Fatal(err)
			}
			switch foreign {
			case "entry":
				// Another writer's bytes for f2's entry: the same entry,
				// written again with a trailing newline (another ETag).
				rawRewrite(t, c, bucket, testPrefix+"f/data/m/1/f2~", "\n")
			case "copy":
				forgeRecentSize(t, c, bucket, testPrefix+"h/m%2F1", "data/m/1/f2")
			}
			dropper := s
			if foreign == "copy" {
				// Another process drops: this one's last commit handed it
				// the head it wrote, which it would start from (handoff.go),
				// not the forged one.
				d, err := s3fs.Open(ctx, api, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
				if err != nil {
					t.Fatal(err)
				}
				dropper = datastore.New(d)
				defer dropper.Close()
			}
			api.take()
			st, dropped, err := dropper.DropPartitionIfDeleted(ctx, nil, "m/1", "data/m/1/model.yaml")
			if err != nil || !dropped {
				t.Fatalf("drop: %v, dropped %v", err, dropped)
			}
			if st.Files != 6 || st.Tombstones != 1 {
				t.Fatalf("drop stats %+v; want 6 files and the definition's tombstone", st)
			}
			wantGets := 0
			if foreign != "" {
				wantGets = 1
			}
			reads := api.take()
			if reads["f"] != wantGets {
				t.Fatalf("the drop read %d index entries (%v); want %d", reads["f"], reads, wantGets)
			}
			if reads["l"] != 0 {
				t.Fatalf("the drop read %d log objects (%v); want none, the head copies them", reads["l"], reads)
			}
			// The chunked version is handed to Reclaim (q/TIME/VERSION).
			q, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(testPrefix + "q/")})
			if err != nil {
				t.Fatal(err)
			}
			if len(q.Contents) != 1 || !strings.HasSuffix(aws.ToString(q.Contents[0].Key), entries[5].Put.Version) {
				t.Fatalf("the due queue after the drop: %d entries; want the chunked version %s", len(q.Contents), entries[5].Put.Version)
			}
			if page, err := s.List(ctx, "data/m/1/", 100, ""); err != nil || len(page.Files) != 0 {
				t.Fatalf("after the drop the model lists %v, %v", page.Files, err)
			}
		})
	}
}

// forgeRecentSize rewrites the head at key with a raw client, the size of
// path's entry in its copies of the last log objects (recent.go) one more:
// a copy that no longer says what its object says.
func forgeRecentSize(t *testing.T, c *s3.Client, bucket, key, path string) {
	t.Helper()
	o, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	err = json.NewDecoder(o.Body).Decode(&h)
	o.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	recent, _ := h["recent"].([]any)
	forged := false
	for _, r := range recent {
		obj, _ := r.(map[string]any)
		entries, _ := obj["entries"].([]any)
		for _, e := range entries {
			if m, _ := e.(map[string]any); m["path"] == path {
				size, _ := m["size"].(float64)
				m["size"] = size + 1
				forged = true
			}
		}
	}
	if !forged {
		t.Fatalf("the head %s carries no copy of %s's entry: %v", key, path, h)
	}
	body, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	rawPut(t, c, bucket, key, string(body))
}
