package s3fs_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// holdAPI holds the first request whose key has hold in it, once armed,
// until released; it counts the listings by the kind of their prefix ("h"
// or "l", the first segment after the datastore's prefix).
type holdAPI struct {
	s3fs.API
	prefix string
	mu     sync.Mutex
	hold   string // "PUT KEYPART" or "DELETE KEYPART" ("KEYPART$": the key's end); "" when not armed
	held   chan struct{}
	resume chan struct{}
	lists  map[string]int
}

func (a *holdAPI) arm(hold string) {
	a.mu.Lock()
	a.hold, a.held, a.resume = hold, make(chan struct{}), make(chan struct{})
	a.mu.Unlock()
}

func (a *holdAPI) holdIf(req, key string) {
	a.mu.Lock()
	verb, part, _ := strings.Cut(a.hold, " ")
	match := strings.Contains(key, part)
	if end, ok := strings.CutSuffix(part, "$"); ok {
		match = strings.HasSuffix(key, end)
	}
	hit := a.hold != "" && verb == req && match
	var held, resume chan struct{}
	if hit {
		a.hold, held, resume = "", a.held, a.resume
	}
	a.mu.Unlock()
	if hit {
		close(held)
		<-resume
	}
}

func (a *holdAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	a.holdIf("PUT", aws.ToString(in.Key))
	return a.API.PutObject(ctx, in, o...)
}

func (a *holdAPI) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	a.holdIf("DELETE", aws.ToString(in.Key))
	return a.API.DeleteObject(ctx, in, o...)
}

func (a *holdAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	kind, _, _ := strings.Cut(strings.TrimPrefix(aws.ToString(in.Prefix), a.prefix+"/"), "/")
	a.mu.Lock()
	a.lists[kind]++
	a.mu.Unlock()
	return a.API.ListObjectsV2(ctx, in, o...)
}

func (a *holdAPI) takeLists() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.lists
	a.lists = map[string]int{}
	return out
}

// TestReaderSkipsASettledMark (issue 31): a reader whose listing of the
// heads shows another writer's pending mark, whose commit that writer
// rolled into the head before the reader reads it (the committer held
// between its roll-forward and the mark's delete, the race every reader of
// a busy namespace meets), takes the commit from the head: it lists no log
// and the heads only once, and reports the partition changed with the new
// version readable. A commit held before its roll-forward (its committer
// dead, as far as the reader knows) is rolled forward by the reader, which
// then lists the heads again, so it sees it (issue 28's guarantee).
func TestReaderSkipsASettledMark(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	for _, c := range []struct {
		name, hold string
		// the reader's listings of the heads and of the log
		wantH, wantL int
	}{
		{"rolled before the reader", "DELETE /h/m%2F1!p", 1, 0},
		{"not rolled yet", "PUT /h/m%2F1$", 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := "settled-" + strings.ReplaceAll(c.name, " ", "-")
			wapi := &holdAPI{API: raw, prefix: prefix, lists: map[string]int{}}
			rapi := &holdAPI{API: raw, prefix: prefix, lists: map[string]int{}}
			// A commit's pending mark: before models-v5 (whose
			// commits of one object have none, headcommit.go).
			recordLayout(t, raw, bucket, prefix, datastore.LayoutModelsV4)
			_, w := openDatastore(t, wapi, bucket, prefix)
			_, r := openDatastore(t, rapi, bucket, prefix)
			if _, err := w.Put(ctx, "data/m/1/a", strings.NewReader("one"), nil); err != nil {
				t.Fatal(err)
			}
			_, cursor, err := r.ChangedPartitions(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			st, err := w.Upload(ctx, "data/m/1/a", strings.NewReader("two"), nil)
			if err != nil {
				t.Fatal(err)
			}
			wapi.arm(c.hold)
			done := make(chan error, 1)
			go func() {
				_, err := w.Commit(ctx, nil, []datastore.Entry{{Put: &st}})
				done <- err
			}()
			<-wapi.held
			rapi.takeLists()
			heads, _, err := r.ChangedPartitions(ctx, cursor)
			if err != nil {
				t.Fatal(err)
			}
			lists := rapi.takeLists()
			close(wapi.resume)
			if err := <-done; err != nil {
				t.Fatalf("the held commit: %v", err)
			}
			if len(heads) != 1 || heads[0].Partition != "m/1" {
				t.Fatalf("changed partitions %v; want m/1", heads)
			}
			if lists["h"] != c.wantH || lists["l"] != c.wantL {
				t.Fatalf("the reader listed the heads %d times and the log %d times; want %d and %d", lists["h"], lists["l"], c.wantH, c.wantL)
			}
			if _, got, err := r.Get(ctx, "data/m/1/a"); err != nil || string(got) != "two" {
				t.Fatalf("the reader gets %q, %v; want the held commit's", got, err)
			}
		})
	}
}
