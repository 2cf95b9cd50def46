package s3fs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// killAPI fails every request from the armed request numbered at on,
// without sending it: a committer killed (SIGKILL) just before request at.
type killAPI struct {
	s3fs.API
	mu    sync.Mutex
	armed bool
	n, at int
	sent  []string
}

var errKilled = errors.New("killed")

func (k *killAPI) step(op string, key *string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.armed {
		return nil
	}
	k.n++
	if k.n >= k.at {
		return fmt.Errorf("%w: %w", metastore.ErrUnavailable, errKilled)
	}
	k.sent = append(k.sent, op+" "+deref(key))
	return nil
}

func (k *killAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if err := k.step("PUT", in.Key); err != nil {
		return nil, err
	}
	return k.API.PutObject(ctx, in, o...)
}
func (k *killAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if err := k.step("GET", in.Key); err != nil {
		return nil, err
	}
	return k.API.GetObject(ctx, in, o...)
}
func (k *killAPI) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if err := k.step("HEAD", in.Key); err != nil {
		return nil, err
	}
	return k.API.HeadObject(ctx, in, o...)
}
func (k *killAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if err := k.step("LIST", in.Prefix); err != nil {
		return nil, err
	}
	return k.API.ListObjectsV2(ctx, in, o...)
}
func (k *killAPI) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	if err := k.step("DELETE", in.Key); err != nil {
		return nil, err
	}
	return k.API.DeleteObject(ctx, in, o...)
}

// killedCommit is the setting of the killed-committer tests: B puts
// data/m/1/a and reads the changed partitions (cursor); A, over ka armed
// to fail from its request k on, commits a second version (st) of it. It
// returns the requests A sent before it was killed, whether A's commit
// ended before request k (finished), and the commit's error.
func killedCommit(ctx context.Context, t *testing.T, sA, sB *datastore.Store, ka *killAPI, k int) (st datastore.Staged, cursor string, sent []string, finished bool, err error) {
	t.Helper()
	if _, err := sB.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
		t.Fatal(err)
	}
	_, cursor, err = sB.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st, err = sA.Upload(ctx, "data/m/1/a", strings.NewReader("A"), nil); err != nil {
		t.Fatal(err)
	}
	ka.mu.Lock()
	ka.armed, ka.at = true, k
	ka.mu.Unlock()
	_, err = sA.Commit(ctx, nil, []datastore.Entry{{Put: &st}})
	ka.mu.Lock()
	defer ka.mu.Unlock()
	return st, cursor, ka.sent, ka.n < k, err
}

// readers are the ways another process reads a partition after a
// committer died; each must see the commit, whoever reads first.
var readers = []struct {
	name string
	sees func(ctx context.Context, s *datastore.Store, cursor, version string) (bool, error)
}{
	{"changed-partitions", func(ctx context.Context, s *datastore.Store, cursor, version string) (bool, error) {
		heads, _, err := s.ChangedPartitions(ctx, cursor)
		if err != nil {
			return false, err
		}
		for _, h := range heads {
			if h.Partition == "m/1" {
				ch, _, err := s.Changes(ctx, "m/1", 1, 10)
				return err == nil && len(ch) == 1 && ch[0].Version == version, err
			}
		}
		return false, nil
	}},
	{"list", func(ctx context.Context, s *datastore.Store, _, version string) (bool, error) {
		files, err := s.ListAll(ctx, "data/m/")
		return err == nil && len(files) == 1 && files[0].Version == version, err
	}},
	{"stat", func(ctx context.Context, s *datastore.Store, _, version string) (bool, error) {
		info, err := s.Stat(ctx, "data/m/1/a")
		return err == nil && info.Version == version, err
	}},
	{"next-writer-then-list", func(ctx context.Context, s *datastore.Store, _, version string) (bool, error) {
		if _, err := s.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
			return false, err
		}
		files, err := s.ListAll(ctx, "data/m/1/a")
		return err == nil && len(files) == 1 && files[0].Version == version, err
	}},
}

// TestKilledCommitRollsForward (issue 28, row 2): a committer killed after
// its log create, before each later request of its commit in turn (the
// pending marker's delete, the index entry, the head), leaves a commit
// that every reader of another process sees, whichever reads first: an
// unscoped pull's ChangedPartitions, a listing (ls), a stat (get), the
// partition's next writer. Before, the head's ETag and the index kept the
// old version until a later commit or a reclaim.
func TestKilledCommitRollsForward(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	checked := 0
	// Both places of the pending marks: under p/ (a datastore recorded
	// "models" before issue 31) and beside the heads (models-v2).
	for _, layout := range []datastore.Layout{datastore.LayoutModels, datastore.LayoutModelsV2, datastore.LayoutModelsV3} {
		for _, r := range readers {
			for k := 1; k < 100; k++ {
				prefix := fmt.Sprintf("kill/%s/%s/%d", layout, r.name, k)
				ka := &killAPI{API: api}
				dA, err := s3fs.Open(ctx, ka, s3fs.Options{Bucket: bucket, Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				dB, err := s3fs.Open(ctx, api, s3fs.Options{Bucket: bucket, Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				sA, sB := datastore.New(dA), datastore.New(dB)
				sA.SetLayout(layout)
				sB.SetLayout(layout)
				st, cursor, sent, finished, cerr := killedCommit(ctx, t, sA, sB, ka, k)
				if finished {
					break // the commit sent fewer than k requests
				}
				created := false
				for _, s := range sent {
					created = created || strings.HasPrefix(s, "PUT "+prefix+"/l/")
				}
				if !created {
					if cerr == nil {
						t.Fatalf("%s k=%d: killed before its log create, the commit reported success", r.name, k)
					}
					continue // killed before the commit point: nothing to see
				}
				checked++
				if ok, err := r.sees(ctx, sB, cursor, st.Version); err != nil || !ok {
					t.Errorf("%s %s: committer killed before request %d (after %s): the reader does not see the commit (err %v)", layout, r.name, k, sent[len(sent)-1], err)
				}
			}
		}
	}
	t.Logf("%d kill points after the log create checked, over %d readers and 2 layouts", checked, len(readers))
	if checked < 2*len(readers) {
		t.Fatal("no kill point after the log create")
	}
}
