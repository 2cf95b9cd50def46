package s3fs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// commitRequests opens the datastore under prefix (recorded with layout l)
// through a recording client, puts one file, and returns the writes the
// put of a second version of it sent.
func commitRequests(t *testing.T, l datastore.Layout, prefix string) []string {
	t.Helper()
	var out []string
	for _, r := range commitAllRequests(t, l, prefix) {
		if !strings.HasPrefix(r, "GET ") && !strings.HasPrefix(r, "LIST ") && !strings.HasPrefix(r, "HEAD ") {
			out = append(out, r)
		}
	}
	return out
}

// commitAllRequests is commitRequests with the reads too.
func commitAllRequests(t *testing.T, l datastore.Layout, prefix string) []string {
	t.Helper()
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	recordLayout(t, raw, bucket, prefix, l)
	ka := &killAPI{API: raw}
	_, s := openDatastore(t, ka, bucket, prefix)
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ka.mu.Lock()
	ka.armed, ka.at = true, 1<<30
	ka.mu.Unlock()
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatal(err)
	}
	ka.mu.Lock()
	defer ka.mu.Unlock()
	var out []string
	for _, r := range ka.sent {
		out = append(out, strings.Replace(r, prefix+"/", "", 1))
	}
	return out
}

// headKill fails the PutObject of a partition's head (a key under h/ that
// is no mark) while armed: a committer killed after its log create, right
// before its head.
type headKill struct {
	s3fs.API
	armed atomic.Bool
}

func (k *headKill) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	key := aws.ToString(in.Key)
	if k.armed.Load() && strings.Contains(key, "/h/") && !strings.Contains(key, "!") {
		return nil, fmt.Errorf("%w: %w", metastore.ErrUnavailable, errKilled)
	}
	return k.API.PutObject(ctx, in, o...)
}

// TestHeadCommitWrites (issue 31, layout models-v5): a commit of one log
// object writes the object and the head, and no pending mark; before
// models-v5 it also created the mark and deleted it.
func TestHeadCommitWrites(t *testing.T) {
	v5 := commitRequests(t, datastore.LayoutModelsV5, "hc-writes-v5")
	if want := []string{"PUT l/m%2F1/00000000000000000002", "PUT h/m%2F1"}; !slices.Equal(v5, want) {
		t.Fatalf("models-v5 commit sent %q; want %q", v5, want)
	}
	v4 := commitRequests(t, datastore.LayoutModelsV4, "hc-writes-v4")
	if want := []string{"PUT h/m%2F1!p00000000000000000002", "PUT l/m%2F1/00000000000000000002", "PUT h/m%2F1", "DELETE h/m%2F1!p00000000000000000002"}; !slices.Equal(v4, want) {
		t.Fatalf("models-v4 commit sent %q; want %q", v4, want)
	}
}

// TestHeadCommitListsNoLog (issue 31, layout models-v5): a commit's first
// attempt, from a head that holds the fences of its last object, lists no
// log: its create at the position after the watermark is the check (the
// killed-committer test's next writer finds that position taken and reads
// the tail whole). Before models-v5 the commit listed the log.
func TestHeadCommitListsNoLog(t *testing.T) {
	v5 := commitAllRequests(t, datastore.LayoutModelsV5, "hc-lists-v5")
	if slices.ContainsFunc(v5, func(r string) bool { return strings.HasPrefix(r, "LIST ") }) {
		t.Fatalf("models-v5 commit sent %q; want no LIST", v5)
	}
	v4 := commitAllRequests(t, datastore.LayoutModelsV4, "hc-lists-v4")
	if !slices.Contains(v4, "LIST l/m%2F1/") {
		t.Fatalf("models-v4 commit sent %q; want its LIST of the log", v4)
	}
}

// v5Readers are the ways another process reads a partition; in models-v5
// every one of them sees a commit exactly when a head holds it.
var v5Readers = append(slices.Clone(readers),
	struct {
		name string
		sees func(ctx context.Context, s *datastore.Store, cursor, version string) (bool, error)
	}{"changes", func(ctx context.Context, s *datastore.Store, _, version string) (bool, error) {
		ch, _, err := s.Changes(ctx, "m/1", 1, 10)
		return err == nil && len(ch) == 1 && ch[0].Version == version, err
	}},
	struct {
		name string
		sees func(ctx context.Context, s *datastore.Store, cursor, version string) (bool, error)
	}{"head", func(ctx context.Context, s *datastore.Store, _, _ string) (bool, error) {
		h, err := s.Head(ctx, "m/1")
		return err == nil && h.Seq == 2, err
	}},
)

// TestHeadCommitKilledBeforeItsHead (issue 31, layout models-v5): a
// committer killed after its log create and before its head's write is
// told the commit is not acknowledged, and then no reader of another
// process sees it, whichever way it reads (a pull's ChangedPartitions and
// Changes, Changes alone, ls, stat, Head): they agree with each other, as
// a commit before models-v5 made them agree by its pending mark
// (TestKilledCommitRollsForward). The partition's next writer rolls it
// forward before its own commit, and from then on every reader sees it.
func TestHeadCommitKilledBeforeItsHead(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	checked := 0
	for _, r := range v5Readers {
		for k := 1; k < 100; k++ {
			prefix := fmt.Sprintf("hc-kill/%s/%d", r.name, k)
			ka := &killAPI{API: api}
			_, sA := openDatastore(t, ka, bucket, prefix)
			_, sB := openDatastore(t, api, bucket, prefix)
			if sA.Layout() != datastore.LayoutModelsV5 {
				t.Fatalf("layout %s, want models-v5", sA.Layout())
			}
			st, cursor, sent, finished, cerr := killedCommit(ctx, t, sA, sB, ka, k)
			if finished {
				if cerr != nil {
					t.Fatalf("%s: the commit, not killed: %v", r.name, cerr)
				}
				break
			}
			for _, s := range sent {
				if strings.Contains(s, "!p") {
					t.Fatalf("%s k=%d: the commit of one object sent %s: a pending mark", r.name, k, s)
				}
			}
			created := slices.ContainsFunc(sent, func(s string) bool { return strings.HasPrefix(s, "PUT "+prefix+"/l/") })
			if cerr == nil {
				t.Fatalf("%s k=%d (after %q): killed before its head, the commit reported success", r.name, k, sent)
			}
			if !created {
				continue
			}
			checked++
			sees, err := r.sees(ctx, sB, cursor, st.Version)
			if err != nil {
				t.Fatalf("%s k=%d: %v", r.name, k, err)
			}
			// Only the partition's next writer rolls it forward.
			if want := r.name == "next-writer-then-list"; sees != want {
				t.Errorf("%s: committer killed before request %d (after %s): the reader sees the commit %v; want %v", r.name, k, sent[len(sent)-1], sees, want)
			}
			if r.name == "next-writer-then-list" {
				continue
			}
			// And it is the next writer that makes it seen, by every
			// reader: a stat, then the reader itself.
			if _, err := sB.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
				t.Fatal(err)
			}
			info, err := sB.Stat(ctx, "data/m/1/a")
			if err != nil || info.Version != st.Version || info.Pos != 2 {
				t.Fatalf("%s: after the next writer, stat = %+v, %v; want version %s at position 2", r.name, info, err, st.Version)
			}
		}
	}
	if checked < len(v5Readers) {
		t.Fatalf("%d kill points after the log create checked; want one a reader", checked)
	}
}

// TestHeadCommitForeignObject (issue 31, layout models-v5): a log object
// that a raw S3 client creates at the partition's next position, well
// formed, is a commit of no lake writer: no reader sees it (a stat alone,
// a pull, ls), until lake's next commit of the partition, whose create
// lost that position, rolls it forward before its own; then every reader
// sees both, in position order. Garbage at the next position is damage:
// the next commit names it and writes nothing.
func TestHeadCommitForeignObject(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	_, s := openDatastore(t, raw, bucket, "hc-foreign")
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"first": 2, "time": time.Now().UTC(), "entries": []map[string]any{
		{"path": "data/m/1/x", "version": "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0", "size": 1, "inline": "eA==",
			"sha256": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}}}
	body, _ := json.Marshal(obj)
	if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("hc-foreign/l/m%2F1/00000000000000000002"),
		Body: strings.NewReader(string(body)), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	_, other := openDatastore(t, raw, bucket, "hc-foreign")
	if _, err := other.Stat(ctx, "data/m/1/x"); err == nil {
		t.Fatal("a stat reads the foreign object that no head holds")
	}
	if ch, _, err := other.Changes(ctx, "m/1", 1, 10); err != nil || len(ch) != 0 {
		t.Fatalf("Changes after 1 = %+v, %v; want none", ch, err)
	}
	if files, err := other.ListAll(ctx, "data/m/1/"); err != nil || len(files) != 1 {
		t.Fatalf("ls = %+v, %v; want data/m/1/a alone", files, err)
	}
	if _, err := s.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	ch, _, err := other.Changes(ctx, "m/1", 1, 10)
	if err != nil || len(ch) != 2 || ch[0].Path != "data/m/1/x" || ch[0].Pos != 2 || ch[1].Path != "data/m/1/b" || ch[1].Pos != 3 {
		t.Fatalf("Changes after lake's next commit = %+v, %v; want x at 2, then b at 3", ch, err)
	}
	if _, got, err := other.Get(ctx, "data/m/1/x"); err != nil || string(got) != "x" {
		t.Fatalf("Get(x) = %q, %v", got, err)
	}
	// Garbage at the next position: damage, nothing written.
	if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("hc-foreign/l/m%2F1/00000000000000000004"),
		Body: strings.NewReader("garbage"), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/1/c", strings.NewReader("c"), nil); err == nil {
		t.Fatal("a commit over garbage at its next position succeeded")
	}
	if _, err := other.Stat(ctx, "data/m/1/c"); err == nil {
		t.Fatal("the refused commit is read")
	}
}

// TestHeadCommitCheckRollsForward (issue 31, layout models-v5): lake data
// check names a commit no head holds (its committer killed before its
// head) and --repair rolls it forward.
func TestHeadCommitCheckRollsForward(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	ka := &headKill{API: raw}
	_, s := openDatastore(t, ka, bucket, "hc-check")
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ka.armed.Store(true)
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err == nil {
		t.Fatal("killed before its head, the commit reported success")
	}
	_, other := openDatastore(t, raw, bucket, "hc-check")
	rep, err := other.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "not rolled forward") {
		t.Fatalf("check = %+v; want the commit not rolled forward named", rep.Problems)
	}
	if _, err := other.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil {
		t.Fatal(err)
	}
	if info, err := other.Stat(ctx, "data/m/1/a"); err != nil || info.Version != st.Version {
		t.Fatalf("after --repair, stat = %+v, %v; want version %s", info, err, st.Version)
	}
	if rep, err := other.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check after --repair = %+v, %v", rep, err)
	}
}

// flipHold holds the first PutObject of a head (a key under h/, no mark)
// that follows a staged commit's flip (a PutObject under t/ whose body says
// "done") until released: the commit is decided and no head holds it yet.
type flipHold struct {
	s3fs.API
	mu      sync.Mutex
	flipped bool
	held    chan struct{}
	resume  chan struct{}
}

func (f *flipHold) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	key := aws.ToString(in.Key)
	if strings.Contains(key, "/t/") && in.Body != nil {
		body, err := io.ReadAll(in.Body)
		if err != nil {
			return nil, err
		}
		in.Body = bytes.NewReader(body)
		if strings.Contains(string(body), `"done"`) {
			f.mu.Lock()
			f.flipped = true
			f.mu.Unlock()
		}
	}
	f.mu.Lock()
	hit := f.flipped && f.held != nil && strings.Contains(key, "/h/") && !strings.Contains(key, "!")
	held := f.held
	if hit {
		f.held = nil
	}
	f.mu.Unlock()
	if hit {
		close(held)
		<-f.resume
	}
	return f.API.PutObject(ctx, in, o...)
}

// TestHeadCommitPartAfterHiddenObject (issue 31, layout models-v5): a
// staged commit (two partitions) whose partition holds an object no head
// holds (a committer killed before its head) rolls it forward before it
// creates its part there. Held between its flip and its roll-forward (the
// commit decided, no head holding it), a reader of another process sees
// its part in both partitions; had the part followed the hidden object,
// which readers stop at, the reader would see it in one and not the other.
func TestHeadCommitPartAfterHiddenObject(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	fh := &flipHold{API: raw}
	ka := &headKill{API: fh}
	_, s := openDatastore(t, ka, bucket, "hc-part")
	for _, p := range []string{"data/m/1/a", "data/m/2/a"} {
		if _, err := s.Put(ctx, p, strings.NewReader("0"), nil); err != nil {
			t.Fatal(err)
		}
	}
	hidden, err := s.Upload(ctx, "data/m/1/h", strings.NewReader("h"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ka.armed.Store(true)
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &hidden}}); err == nil {
		t.Fatal("killed before its head, the commit reported success")
	}
	ka.armed.Store(false)
	_, other := openDatastore(t, raw, bucket, "hc-part")
	if _, err := other.Stat(ctx, "data/m/1/h"); err == nil {
		t.Fatal("a commit no head holds is read")
	}
	var es []datastore.Entry
	for _, p := range []string{"data/m/1/t", "data/m/2/t"} {
		st, err := s.Upload(ctx, p, strings.NewReader("t"), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	fh.mu.Lock()
	fh.held, fh.resume, fh.flipped = make(chan struct{}), make(chan struct{}), false
	held := fh.held
	fh.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(ctx, nil, es)
		done <- err
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the staged commit ended before its roll-forward: %v", err)
	}
	var seen []string
	for _, p := range []string{"data/m/1/t", "data/m/2/t"} {
		if _, err := other.Stat(ctx, p); err == nil {
			seen = append(seen, p)
		} else {
			t.Logf("stat %s while held: %v", p, err)
		}
	}
	close(fh.resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("between the staged commit's flip and its heads, a reader sees %v of its two parts; want both", seen)
	}
	for _, p := range []string{"data/m/1/h", "data/m/1/t", "data/m/2/t"} {
		if _, err := other.Stat(ctx, p); err != nil {
			t.Fatalf("stat %s after the staged commit: %v", p, err)
		}
	}
	ch, _, err := other.Changes(ctx, "m/1", 1, 10)
	if err != nil || len(ch) != 2 || ch[0].Path != "data/m/1/h" || ch[1].Path != "data/m/1/t" {
		t.Fatalf("Changes of m/1 = %+v, %v; want h, then the staged commit's t", ch, err)
	}
}

// TestHeadCommitNewPartitionRechecks (issue 31, layout models-v5): a
// fenced commit that creates its partition's head re-reads the lock
// record right before its create. A holder paused between its first check
// and its head's create, taken over meanwhile, would otherwise create a
// head the new holder's listing (made before it) did not fence, and land
// a commit after the new holder read the path absent: the fence entries
// cannot order it. Here it is refused, and never read.
func TestHeadCommitNewPartitionRechecks(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	const prefix = "hc-recheck"
	hold := &holdAPI{API: raw, prefix: prefix, lists: map[string]int{}}
	_, sA := openDatastore(t, hold, bucket, prefix)
	dB, sB := openDatastore(t, raw, bucket, prefix)
	fenceA := &datastore.Fence{Key: fenceKey, Token: lockRecord(1<<32 | 1)}
	fenceB := &datastore.Fence{Key: fenceKey, Token: lockRecord(1<<32 | 2)}
	if err := dB.CASRecord(ctx, fenceKey, metastore.ExpectAbsent(), fenceA.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := sB.Put(ctx, "other/x", strings.NewReader("x"), nil); err != nil {
		t.Fatal(err)
	}
	st, err := sA.Upload(ctx, "top/a", strings.NewReader("A"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hold.arm("PUT /h/top$") // A, after its first check, before its head
	done := make(chan error, 1)
	go func() {
		_, err := sA.Commit(ctx, fenceA, []datastore.Entry{{Put: &st}})
		done <- err
	}()
	select {
	case <-hold.held:
	case err := <-done:
		t.Fatalf("A's commit ended before its head's create: %v", err)
	}
	if err := dB.CASRecord(ctx, fenceKey, metastore.ExpectValue(fenceA.Token), fenceB.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := sB.FenceTakeover(ctx, fenceB); err != nil {
		t.Fatal(err)
	}
	if _, err := sB.Stat(ctx, "top/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("B's read of top/a: %v; want not found", err)
	}
	close(hold.resume)
	if err := <-done; !datastore.IsFenceConflict(err) {
		t.Fatalf("A's commit, taken over before its head: %v; want a fence conflict", err)
	}
	if info, err := sB.Stat(ctx, "top/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("after A resumed, top/a = %+v, %v: a stale holder's commit landed after the new holder read it absent", info, err)
	}
}

// TestNewHeadListsNoLog (issue 31, layout models-v5): a commit that creates
// its partition's head lists no log (the create at position 1 is the
// check, as a first attempt's from a head that holds its fences), and an
// object left at position 1 with no head (a drop not finished, a foreign
// writer) is met by that create and read then: the outcome is the one of a
// datastore of models-v4, whose new head's commit lists the log, the
// control: the object is rolled forward ahead of the commit, and garbage
// there is damage, nothing written.
func TestNewHeadListsNoLog(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	leftover := func(prefix, part string, body []byte) {
		t.Helper()
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/l/" + part + "/00000000000000000001"),
			Body: bytes.NewReader(body), IfNoneMatch: aws.String("*")}); err != nil {
			t.Fatal(err)
		}
	}
	obj, _ := json.Marshal(map[string]any{"first": 1, "time": time.Now().UTC(), "entries": []map[string]any{
		{"path": "data/m/1/x", "version": "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0", "size": 1, "inline": "eA==",
			"sha256": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}}})
	for _, l := range []datastore.Layout{datastore.LayoutModelsV5, datastore.LayoutModelsV4} {
		t.Run(l.String(), func(t *testing.T) {
			prefix := fmt.Sprintf("newhead/%s/%d", l, time.Now().UnixNano())
			recordLayout(t, raw, bucket, prefix, l)
			ka := &killAPI{API: raw}
			_, s := openDatastore(t, ka, bucket, prefix)
			lists := func(f func()) int {
				return sentMatching(ka, f, func(r string) bool { return strings.HasPrefix(r, "LIST "+prefix+"/l/n%2F1/") })
			}
			// A new partition with an empty log.
			if n := lists(func() {
				if _, err := s.Put(ctx, "data/n/1/a", strings.NewReader("a"), nil); err != nil {
					t.Fatal(err)
				}
			}); (n == 0) != (l == datastore.LayoutModelsV5) {
				t.Fatalf("the new partition's log listed %d time(s) by its first commit", n)
			}
			// A new partition over an object left at position 1.
			leftover(prefix, "m%2F1", obj)
			if _, err := s.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
				t.Fatal(err)
			}
			_, other := openDatastore(t, raw, bucket, prefix)
			ch, _, err := other.Changes(ctx, "m/1", 0, 10)
			if err != nil || len(ch) != 2 || ch[0].Path != "data/m/1/x" || ch[0].Pos != 1 || ch[1].Path != "data/m/1/b" || ch[1].Pos != 2 {
				t.Fatalf("Changes = %+v, %v; want x at 1 (the object left), then b at 2", ch, err)
			}
			if _, got, err := other.Get(ctx, "data/m/1/b"); err != nil || string(got) != "b" {
				t.Fatalf("Get(b) = %q, %v", got, err)
			}
			// Garbage at position 1 of a new partition: damage, nothing
			// written.
			leftover(prefix, "k%2F1", []byte("garbage"))
			if _, err := s.Put(ctx, "data/k/1/c", strings.NewReader("c"), nil); err == nil {
				t.Fatal("a new partition's commit over garbage at position 1 succeeded")
			}
			if info, err := other.Stat(ctx, "data/k/1/c"); err == nil {
				t.Fatalf("the refused commit's file is read: %+v", info)
			}
		})
	}
}
