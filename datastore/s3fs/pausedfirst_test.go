package s3fs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestPausedFirstCommitOfAModel (issue 31): holder A makes a model's first
// commit, which is tried as a commit of one log object, creates the
// model's head after a check of its lock record, finds it needs its claim
// in data and is made again, staged, with no second check before its
// record (commit.go): the flip's check and the newer holder's fence
// entries stand for it. A is paused before each of its requests in turn
// while B takes the lock over, fences the namespace (FenceTakeover),
// stats A's file and commits elsewhere; then A resumes. In every
// interleaving A's commit is either refused as a fence conflict and
// invisible to a stat, a listing and the feed, or it stood before B's
// fence and B's stat read it; both outcomes occur.
func TestPausedFirstCommitOfAModel(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	refused, stood := 0, 0
	var all []string
	for k := 1; ; k++ {
		if k > 100 {
			t.Fatal("the commit sent more than 100 requests")
		}
		reached, sent, v, aErr := pausedFirstCommit(t, api, bucket, k)
		if !reached {
			all = sent
			break
		}
		if v != "" {
			t.Errorf("paused before request %d: %s", k, v)
		}
		if aErr != nil {
			refused++
		} else {
			stood++
		}
	}
	t.Logf("A's first commit of a model is %d requests: %s; refused %d, stood before the fence %d", len(all), strings.Join(all, ", "), refused, stood)
	if refused == 0 || stood == 0 {
		t.Errorf("want both outcomes among the interleavings: refused %d, stood %d", refused, stood)
	}
}

// pausedFirstCommit runs one interleaving of TestPausedFirstCommitOfAModel
// with A paused before its request k.
func pausedFirstCommit(t *testing.T, api s3fs.API, bucket string, k int) (reached bool, sent []string, violation string, aErr error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("first/%d", k)
	h := openHolders(ctx, t, api, bucket, prefix)
	p, sA, sB, fenceB := h.p, h.sA, h.sB, h.fenceB
	h.seed(ctx, t, "data/n/1/b") // another model first, so that data is a partition of claims
	stA, err := sA.Upload(ctx, "data/k/1/c", strings.NewReader("A"), nil)
	if err != nil {
		t.Fatal(err)
	}
	done, reached, sent, aErr := h.commitA(ctx, k, []datastore.Entry{{Put: &stA}})
	if !reached {
		return false, sent, "", aErr
	}
	h.takeOver(ctx, t, k, true)
	var sawA bool
	if seen, err := sB.Stat(ctx, "data/k/1/c"); err == nil {
		sawA = seen.Version == stA.Version
	} else if !errors.Is(err, metastore.ErrNotFound) {
		t.Fatal(err)
	}
	stB, err := sB.Upload(ctx, "data/n/1/b", strings.NewReader("B"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sB.Commit(ctx, fenceB, []datastore.Entry{{Put: &stB}}); err != nil {
		t.Fatalf("k=%d: B's commit: %v", k, err)
	}
	close(p.release)
	aErr = <-done

	visible := map[string]bool{}
	if info, err := sB.Stat(ctx, "data/k/1/c"); err == nil {
		visible["stat"] = info.Version == stA.Version
	} else if !errors.Is(err, metastore.ErrNotFound) {
		t.Fatal(err)
	}
	if ch, _, err := sB.Changes(ctx, "k/1", 0, 100); err == nil {
		for _, c := range ch {
			visible["changes"] = visible["changes"] || c.Version == stA.Version
		}
	} else if !errors.Is(err, metastore.ErrNotFound) {
		t.Fatal(err)
	}
	files, err := sB.ListAll(ctx, "data/k/")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		visible["list"] = visible["list"] || f.Version == stA.Version
	}
	switch {
	case aErr != nil && !datastore.IsFenceConflict(aErr):
		violation = fmt.Sprintf("A's commit failed with %v, want a fence conflict or success", aErr)
	case aErr != nil && (visible["stat"] || visible["changes"] || visible["list"]):
		violation = fmt.Sprintf("A's refused commit is visible: %v", visible)
	case aErr == nil && !sawA:
		violation = fmt.Sprintf("A's stale commit landed after B's fence (B's stat did not read it); visible: %v", visible)
	case aErr == nil && !visible["stat"]:
		violation = "A's acknowledged commit is not what a stat returns"
	}
	return reached, nil, violation, aErr
}
