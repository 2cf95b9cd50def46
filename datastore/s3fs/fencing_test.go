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

// pauseAPI blocks the request numbered at (counted from 1 once armed)
// before sending it, until released: a holder paused at one request of its
// commit, as a SIGSTOP between two requests would leave it.
type pauseAPI struct {
	s3fs.API
	mu      sync.Mutex
	armed   bool
	n, at   int
	paused  chan struct{} // closed when the request at is reached
	release chan struct{} // closed to let it go
	sent    []string      // the armed requests, in order ("PUT key")
}

func newPauseAPI(api s3fs.API) *pauseAPI {
	return &pauseAPI{API: api, paused: make(chan struct{}), release: make(chan struct{})}
}

func (p *pauseAPI) arm(at int) {
	p.mu.Lock()
	p.armed, p.n, p.at = true, 0, at
	p.mu.Unlock()
}

func (p *pauseAPI) step(op string, key *string) {
	p.mu.Lock()
	if !p.armed {
		p.mu.Unlock()
		return
	}
	p.n++
	hit := p.n == p.at
	p.sent = append(p.sent, op+" "+deref(key))
	p.mu.Unlock()
	if hit {
		close(p.paused)
		<-p.release
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (p *pauseAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	p.step("PUT", in.Key)
	return p.API.PutObject(ctx, in, o...)
}
func (p *pauseAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	p.step("GET", in.Key)
	return p.API.GetObject(ctx, in, o...)
}
func (p *pauseAPI) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	p.step("HEAD", in.Key)
	return p.API.HeadObject(ctx, in, o...)
}
func (p *pauseAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	p.step("LIST", in.Prefix)
	return p.API.ListObjectsV2(ctx, in, o...)
}
func (p *pauseAPI) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	p.step("DELETE", in.Key)
	return p.API.DeleteObject(ctx, in, o...)
}

// lockRecord is a lock record as the lock package writes it (only its
// token matters to a commit's fence): a takeover replaces it with the next
// token.
func lockRecord(token uint64) []byte {
	return fmt.Appendf(nil, `{"token":%d,"held":true,"holder":"h%d"}`, token, token)
}

const fenceKey = "lock/rec/default/sync"

// pausedTakeover runs one interleaving: holder A (token T) commits
// data/m/1/a and is paused before its request k; B takes the lock over
// (T+1), fences the namespace (FenceTakeover, what lake data sync does
// after a takeover), reads data/m/1/a, and commits a write based on it
// (to data/m/1/a when same, else to data/n/1/b); then A resumes. It
// returns whether A reached request k, and A's commit error.
//
// violation says what went wrong, if anything. Without fence (the negative
// control) B skips FenceTakeover. With early, A resumes (and finishes)
// after B's read and before B's commit, else after B's commit.
func pausedTakeover(t *testing.T, api s3fs.API, bucket string, k int, same, fence, early bool) (reached bool, sent []string, violation string, aErr error) {
	return pausedTakeoverOf(t, api, bucket, k, same, fence, early, false)
}

// pausedTakeoverOf is pausedTakeover; with staged, A's commit also puts a
// file of a new partition (data/k/1/c), so that it is staged under a
// commit record and flipped (whole.go), and the checks hold for both of
// its files: visible together or not at all.
func pausedTakeoverOf(t *testing.T, api s3fs.API, bucket string, k int, same, fence, early, staged bool) (reached bool, sent []string, violation string, aErr error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("fence/%s/%v/%v/%v/%v/%v/%v/%d", holdersLayout, fence, same, early, staged, holdersFresh, holdersOwnWrite, k)
	h := openHolders(ctx, t, api, bucket, prefix)
	p, sA, sB, fenceB := h.p, h.sA, h.sB, h.fenceB
	if holdersFresh {
		h.seed(ctx, t, "data/n/1/b") // A's commit creates m/1's head
	} else {
		h.seed(ctx, t, "data/m/1/a", "data/n/1/b")
	}
	stA, err := sA.Upload(ctx, "data/m/1/a", strings.NewReader("A"), nil)
	if err != nil {
		t.Fatal(err)
	}
	entriesA := []datastore.Entry{{Put: &stA}}
	var stA2 datastore.Staged
	if staged {
		if stA2, err = sA.Upload(ctx, "data/k/1/c", strings.NewReader("A2"), nil); err != nil {
			t.Fatal(err)
		}
		entriesA = append(entriesA, datastore.Entry{Put: &stA2})
	}
	done, reached, sent, aErr := h.commitA(ctx, k, entriesA)
	if !reached {
		return false, sent, "", aErr
	}
	h.takeOver(ctx, t, k, fence) // while A is paused
	seen, err := sB.Stat(ctx, "data/m/1/a")
	if err != nil && (!holdersFresh || !errors.Is(err, metastore.ErrNotFound)) {
		t.Fatal(err)
	}
	target := "data/n/1/b"
	if same {
		target = "data/m/1/a"
	}
	stB, err := sB.Upload(ctx, target, strings.NewReader("B saw "+seen.Version), nil)
	if err != nil {
		t.Fatal(err)
	}
	if early {
		close(p.release)
		aErr = <-done
	}
	if _, err := sB.Commit(ctx, fenceB, []datastore.Entry{{Put: &stB}}); err != nil {
		t.Fatalf("k=%d: B's commit: %v", k, err)
	}
	if !early {
		close(p.release)
		aErr = <-done
	}

	// What every reader sees afterwards.
	visible := map[string]bool{}
	if info, err := sB.Stat(ctx, "data/m/1/a"); err == nil {
		visible["stat"] = info.Version == stA.Version
	} else if !holdersFresh || !errors.Is(err, metastore.ErrNotFound) {
		t.Fatal(err)
	}
	ch, _, err := sB.Changes(ctx, "m/1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ch {
		if c.Version == stA.Version {
			visible["changes"] = true
		}
	}
	files, err := sB.ListAll(ctx, "data/m/")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Version == stA.Version {
			visible["list"] = true
		}
	}
	if staged {
		// The second file: visible exactly when the first is.
		second := false
		if info, err := sB.Stat(ctx, "data/k/1/c"); err == nil {
			second = info.Version == stA2.Version
		} else if !errors.Is(err, metastore.ErrNotFound) {
			t.Fatal(err)
		}
		if second != visible["stat"] && (!same || aErr != nil) {
			return reached, nil, fmt.Sprintf("A's staged commit is visible in part: data/k/1/c %v, data/m/1/a %v", second, visible), aErr
		}
		if aErr == nil && !second {
			return reached, nil, "A's acknowledged staged commit: data/k/1/c is not what a stat returns", aErr
		}
		if aErr != nil && second {
			return reached, nil, "A's refused staged commit: data/k/1/c is visible", aErr
		}
	}
	sawA := seen.Version == stA.Version
	switch {
	case aErr != nil && !datastore.IsFenceConflict(aErr):
		violation = fmt.Sprintf("A's commit failed with %v, want a fence conflict or success", aErr)
	case aErr != nil && (visible["stat"] || visible["changes"] || visible["list"]):
		violation = fmt.Sprintf("A's refused commit is visible: %v", visible)
	case aErr == nil && !sawA:
		// A's commit stood, so it must be ordered before B's fence:
		// B, reading after its fence, must have seen it.
		violation = fmt.Sprintf("A's stale commit landed after B's fence (B read %s, not A's %s); visible: %v", seen.Version, stA.Version, visible)
	case aErr == nil && !same && !visible["stat"]:
		violation = "A's acknowledged commit is not what a stat returns"
	}
	return reached, nil, violation, aErr
}

// holders are holder A's store, over a pauseAPI, and holder B's, over the
// same bucket and prefix, with the lock record holding A's fence: the
// setting of the paused-takeover tests.
type holders struct {
	p              *pauseAPI
	dB             *s3fs.Driver
	sA, sB         *datastore.Store
	fenceA, fenceB *datastore.Fence
}

func openHolders(ctx context.Context, t *testing.T, api s3fs.API, bucket, prefix string) holders {
	t.Helper()
	h := holders{p: newPauseAPI(api)}
	dA, err := s3fs.Open(ctx, h.p, s3fs.Options{Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if h.dB, err = s3fs.Open(ctx, api, s3fs.Options{Bucket: bucket, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	h.sA, h.sB = datastore.New(dA), datastore.New(h.dB)
	if holdersLayout != datastore.LayoutModels {
		h.sA.SetLayout(holdersLayout)
		h.sB.SetLayout(holdersLayout)
	}
	const tokA = 1<<32 | 1
	h.fenceA = &datastore.Fence{Key: fenceKey, Token: lockRecord(tokA)}
	h.fenceB = &datastore.Fence{Key: fenceKey, Token: lockRecord(tokA + 1)}
	acquirer := h.dB
	if holdersOwnWrite {
		// A acquired the lock itself a moment ago: its checks take that
		// write (ownwrite.go), for an age no pause here reaches, and read
		// no record; the fence entries alone must order its commit.
		dA.SetOwnWriteAge(time.Hour)
		acquirer = dA
	}
	if err := acquirer.CASRecord(ctx, fenceKey, metastore.ExpectAbsent(), h.fenceA.Token); err != nil {
		t.Fatal(err)
	}
	return h
}

// seed commits each of paths ("0") through B's store, a commit each, under
// A's fence: what the datastore held before A's commit under test.
func (h holders) seed(ctx context.Context, t *testing.T, paths ...string) {
	t.Helper()
	for _, path := range paths {
		st, err := h.sB.Upload(ctx, path, strings.NewReader("0"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.sB.Commit(ctx, h.fenceA, []datastore.Entry{{Put: &st}}); err != nil {
			t.Fatal(err)
		}
	}
}

// commitA starts A's fenced commit of entries, paused before its request
// k. reached is false if the commit ended first: then sent are its
// requests and aErr its error; else done gives its error once released.
func (h holders) commitA(ctx context.Context, k int, entries []datastore.Entry) (done chan error, reached bool, sent []string, aErr error) {
	h.p.arm(k)
	done = make(chan error, 1)
	go func() {
		_, err := h.sA.Commit(ctx, h.fenceA, entries)
		done <- err
	}()
	select {
	case <-h.p.paused:
		return done, true, nil, nil
	case aErr = <-done:
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return done, false, h.p.sent, aErr
	}
}

// takeOver is B taking the lock over from A (its record written over A's)
// and, with fence, fencing the namespace (FenceTakeover), as lake data
// sync does after a takeover.
func (h holders) takeOver(ctx context.Context, t *testing.T, k int, fence bool) {
	t.Helper()
	if err := h.dB.CASRecord(ctx, fenceKey, metastore.ExpectValue(h.fenceA.Token), h.fenceB.Token); err != nil {
		t.Fatal(err)
	}
	if fence {
		if _, err := h.sB.FenceTakeover(ctx, h.fenceB); err != nil {
			t.Fatalf("k=%d: FenceTakeover: %v", k, err)
		}
	}
}

// TestPausedHolderAtEveryRequest (issue 28, row 1): holder A is paused
// before each request of its fenced commit in turn, while B takes the lock
// over, fences (FenceTakeover), reads and commits; then A resumes. In every
// interleaving A's commit is either refused as a fence conflict and
// invisible to every reader (stat, feed, listing), or it landed before B's
// fence and B read it: never a stale commit after a newer one, never a lost
// update. B writes the same path, or another partition; A resumes before
// B's commit (after B's read) or after it.
func TestPausedHolderAtEveryRequest(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	for _, c := range []struct{ same, early bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, false)
	}
	// And in a datastore whose heads hold the index: the roll-forward's
	// writes are the head's (headindex.go).
	restore := withHoldersLayout(datastore.LayoutModelsV3)
	for _, c := range []struct{ same, early bool }{{true, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, false)
	}
	restore()
	// And in a new datastore's layout, models-v5 (headcommit.go), where
	// the head's write is the commit and a commit sends no pending mark;
	// also where A's commit is the first of its partition (a model's
	// first commit is staged, with its claims).
	defer withHoldersLayout(datastore.LayoutModelsV5)()
	for _, c := range []struct{ same, early bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, false)
	}
	defer withHoldersFresh()()
	for _, c := range []struct{ same, early bool }{{true, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, false)
	}
	// And where A acquired the lock itself a moment before: its commit
	// reads no lock record (ownwrite.go), on a partition it creates and
	// on one that stands.
	defer withHoldersOwnWrite()()
	for _, c := range []struct{ same, early bool }{{true, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, false)
	}
	holdersFresh = false
	for _, c := range []struct{ same, early bool }{{true, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, false)
	}
}

// holdersOwnWrite: A wrote the lock record itself (its acquisition), so
// that its commit's checks are that write, with no read of the record.
var holdersOwnWrite bool

// withHoldersOwnWrite sets holdersOwnWrite until the returned func runs.
func withHoldersOwnWrite() func() {
	holdersOwnWrite = true
	return func() { holdersOwnWrite = false }
}

// holdersFresh: A's commit is the first of its partition (data/m/1/a is
// not seeded), so it creates the partition's head.
var holdersFresh bool

// withHoldersFresh sets holdersFresh until the returned func runs.
func withHoldersFresh() func() {
	holdersFresh = true
	return func() { holdersFresh = false }
}

// holdersLayout is the layout openHolders' stores compute with (the
// zero one, "models", a datastore of before issue 31, unless a test sets
// another: withHoldersLayout). The package's tests do not run in parallel.
var holdersLayout = datastore.LayoutModels

// withHoldersLayout sets holdersLayout to l until the returned func runs.
func withHoldersLayout(l datastore.Layout) func() {
	prev := holdersLayout
	holdersLayout = l
	return func() { holdersLayout = prev }
}

// TestPausedStagedHolderAtEveryRequest: the same with A's commit staged
// (two partitions, one of them new: a commit record, a part each, the
// flip). Its parts are fenced by the flip's check and by the newer
// holder's fence entries (which give a pending part up at once), not by a
// read of the lock record before each part.
func TestPausedStagedHolderAtEveryRequest(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	for _, c := range []struct{ same, early bool }{{true, true}, {false, false}} {
		pauseAtEveryRequest(t, api, bucket, c.same, c.early, true)
	}
	restore := withHoldersLayout(datastore.LayoutModelsV3)
	pauseAtEveryRequest(t, api, bucket, true, true, true)
	restore()
	defer withHoldersLayout(datastore.LayoutModelsV5)()
	pauseAtEveryRequest(t, api, bucket, true, true, true)
	// A acquired the lock itself: its record and its flip read no lock
	// record (ownwrite.go).
	defer withHoldersOwnWrite()()
	pauseAtEveryRequest(t, api, bucket, true, true, true)
}

// pauseAtEveryRequest runs pausedTakeoverOf with A paused before each of
// its requests in turn, reports each violation, and wants both outcomes
// (refused, and stood before the fence) among the interleavings.
func pauseAtEveryRequest(t *testing.T, api s3fs.API, bucket string, same, early, staged bool) {
	t.Helper()
	refused, stood, checked := 0, 0, 0
	var unpaused []string
	for k := 1; ; k++ {
		reached, sent, v, aErr := pausedTakeoverOf(t, api, bucket, k, same, true, early, staged)
		if !reached {
			unpaused = sent
			break
		}
		if v != "" {
			t.Errorf("paused before request %d, B writing the same path %v, A resumed before B's commit %v: %s", k, same, early, v)
		}
		checked++
		if aErr != nil {
			refused++
		} else {
			stood++
		}
		if k > 100 {
			t.Fatal("the commit sent more than 100 requests")
		}
	}
	t.Logf("same path %v, A resumed before B's commit %v: %d interleavings checked (A's commit is %d requests: %s); refused %d, stood before the fence %d",
		same, early, checked, len(unpaused), strings.Join(unpaused, ", "), refused, stood)
	if refused == 0 || stood == 0 {
		t.Errorf("want both outcomes among the interleavings: refused %d, stood %d", refused, stood)
	}
}

// TestPausedHolderWithoutFenceIsCaught is the negative control: the same
// interleavings with B skipping FenceTakeover (as lake data sync did before
// issue 28) land A's stale commit after B's read, which the checker above
// reports.
func TestPausedHolderWithoutFenceIsCaught(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	for _, c := range []struct {
		l   datastore.Layout
		own bool
	}{{datastore.LayoutModels, false}, {datastore.LayoutModelsV5, false}, {datastore.LayoutModelsV5, true}} {
		l := c.l
		restore := withHoldersLayout(l)
		if c.own {
			defer withHoldersOwnWrite()()
		}
		caught := 0
		for k := 1; k < 100; k++ {
			reached, _, v, _ := pausedTakeover(t, api, bucket, k, true, false, true)
			if !reached {
				break
			}
			if v != "" {
				caught++
			}
		}
		restore()
		holdersOwnWrite = false
		if caught == 0 {
			t.Fatalf("%s (A's own write as its check %v): without the fence no interleaving was caught: the checker cannot fail", l, c.own)
		}
		t.Logf("%s (A's own write as its check %v) without the fence: %d interleavings caught", l, c.own, caught)
	}
}
