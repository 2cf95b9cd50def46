package s3fs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
)

// TestDropKnowsEntriesByTheirETags (issue 31, dropknown.go): a guarded
// drop of a model whose index entries outnumber its log objects reads the
// log objects and no entry, the guard's included: each entry is known by
// its listed ETag, the MD5 of what the roll-forward wrote. It drops the
// same files, and hands the same chunked version to Reclaim, as a drop
// that reads each entry. An entry another writer rewrote (other bytes,
// another ETag) is read, and dropped as before.
func TestDropKnowsEntriesByTheirETags(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		t.Run(fmt.Sprintf("foreign=%v", foreign), func(t *testing.T) {
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
			if foreign {
				// Another writer's bytes for f2's entry: the same entry,
				// written again with a trailing newline (another ETag).
				rawRewrite(t, c, bucket, testPrefix+"f/data/m/1/f2~", "\n")
			}
			api.take()
			st, dropped, err := s.DropPartitionIfDeleted(ctx, nil, "m/1", "data/m/1/model.yaml")
			if err != nil || !dropped {
				t.Fatalf("drop: %v, dropped %v", err, dropped)
			}
			if st.Files != 6 || st.Tombstones != 1 {
				t.Fatalf("drop stats %+v; want 6 files and the definition's tombstone", st)
			}
			wantGets := 0
			if foreign {
				wantGets = 1
			}
			if reads := api.take(); reads["f"] != wantGets {
				t.Fatalf("the drop read %d index entries (%v); want %d", reads["f"], reads, wantGets)
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
