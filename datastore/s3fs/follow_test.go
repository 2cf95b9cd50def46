package s3fs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/lifecycle"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// The catalog fold carried by the sync's commit on S3 (follow.go): a
// fenced commit offered a CommitFollower commits the follower's rows in
// the catalog scope after its own, with one read of the lock record for
// both, then the follower's record unless it is optional.

const followRow = "default/m/1" // the root namespace's partition of the catalog scope

// follower offers s's next commit a follower committing a row (content
// row) in the catalog scope, carrying a record write when rec is set.
func follower(ctx context.Context, t *testing.T, s *datastore.Store, fence *datastore.Fence, row string, rec *datastore.RecordWrite) (context.Context, *datastore.CommitFollower, datastore.Staged) {
	t.Helper()
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	st, err := cat.Upload(ctx, followRow, strings.NewReader(row), nil)
	if err != nil {
		t.Fatal(err)
	}
	fctx, f := s.WithCommitFollower(ctx, func([]datastore.Info, func(string) ([]datastore.Head, string, bool)) *datastore.CommitRider {
		return cat.FollowingCommit(ctx, fence, []datastore.Entry{{Put: &st}}, rec)
	})
	return fctx, f, st
}

// followed opens the datastore under prefix through api, with the lock
// record holding the returned fence and the partitions registered, as a
// sync's are after its first (a file of m/1, the root namespace's row):
// the setting of a commit carrying its fold. It returns the store and its
// catalog's.
func followed(t *testing.T, api s3fs.API, bucket, prefix string) (s, cat *datastore.Store, fence *datastore.Fence) {
	t.Helper()
	ctx := t.Context()
	d, s := openDatastore(t, api, bucket, prefix)
	// Every check of the fence reads the record, as a holder's check more
	// than a second after its acquisition does: the carried commits' check
	// is what these tests count and pause (ownwrite_test.go: the holder's
	// own write as its check).
	d.SetOwnWriteAge(0)
	fence = &datastore.Fence{Key: fenceKey, Token: lockRecord(7)}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Put(ctx, followRow, strings.NewReader("row 0"), nil); err != nil {
		t.Fatal(err)
	}
	return s, cat, fence
}

// recordReads runs f with ka recording, and returns how many times f read
// the record key of the datastore under prefix.
func recordReads(ka *killAPI, prefix, key string, f func()) int {
	return sentMatching(ka, f, func(r string) bool { return r == "GET "+prefix+"/r/"+key+"~" })
}

// sentMatching runs f with ka recording, and returns how many of the
// requests f sent match.
func sentMatching(ka *killAPI, f func(), match func(request string) bool) int {
	ka.mu.Lock()
	ka.armed, ka.n, ka.at, ka.sent = true, 0, 1<<30, nil
	ka.mu.Unlock()
	f()
	ka.mu.Lock()
	defer ka.mu.Unlock()
	ka.armed = false
	n := 0
	for _, r := range ka.sent {
		if match(r) {
			n++
		}
	}
	return n
}

// takeOverAndFence opens the datastore under prefix as a new holder that
// takes the lock over from the record's bytes from to those of token,
// and fences (FenceTakeover, as lake data sync after a takeover); it
// returns the holder's store.
func takeOverAndFence(t *testing.T, raw s3fs.API, bucket, prefix string, from []byte, token uint64) *datastore.Store {
	t.Helper()
	ctx := t.Context()
	_, sB := openDatastore(t, raw, bucket, prefix)
	fenceB := &datastore.Fence{Key: fenceKey, Token: lockRecord(token)}
	if err := sB.Records().CASRecord(ctx, fenceKey, metastore.ExpectValue(from), fenceB.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := sB.FenceTakeover(ctx, fenceB); err != nil {
		t.Fatal(err)
	}
	return sB
}

// TestFollowerRidesOneCheck: the follower's row lands with the commit, and
// the lock record is read once for both commits (without the follower,
// the same two commits read it twice); its record, a PUT of its own here
// (DynamoDB's transaction carries it), is left when optional, written
// after the rows when not, and left when it does not hold what the write
// expects.
func TestFollowerRidesOneCheck(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	for _, l := range []datastore.Layout{datastore.LayoutModelsV5, datastore.LayoutModels} {
		t.Run(l.String(), func(t *testing.T) {
			ctx := t.Context()
			prefix := fmt.Sprintf("follow/%s/%d", l, time.Now().UnixNano())
			recordLayout(t, raw, bucket, prefix, l)
			ka := &killAPI{API: raw}
			s, cat, fence := followed(t, ka, bucket, prefix)
			lockReads := func(f func()) int { return recordReads(ka, prefix, fenceKey, f) }
			commit := func(ctx context.Context, content string) {
				st, err := s.Upload(ctx, "data/m/1/a", strings.NewReader(content), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
					t.Fatal(err)
				}
			}

			rec := &datastore.RecordWrite{Key: "datastore/catalog/default", Expect: metastore.ExpectAbsent(), Value: []byte("cursor 1"), Optional: true}
			var row datastore.Staged
			carried := lockReads(func() {
				fctx, f, st := follower(ctx, t, s, fence, "row 1", rec)
				row = st
				commit(fctx, "1")
				r, ok := f.Carried()
				if !ok {
					t.Fatal("the follower was not carried")
				}
				if out, ok := r.Carried(); !ok || len(out) != 1 || out[0].Partition != "default" || out[0].Version != st.Version {
					t.Fatalf("the rider applied %+v, %v; want the row in partition default", out, ok)
				}
			})
			// An optional record is left (no PUT of its own): the caller
			// keeps the cursor (catalog.Plan).
			if rec.Written() {
				t.Fatal("the follower's optional record was written")
			}
			if got, err := s.Records().GetRecord(ctx, rec.Key); !errors.Is(err, metastore.ErrNotFound) {
				t.Fatalf("record = %q, %v; want it left absent", got, err)
			}
			if info, err := cat.Stat(ctx, followRow); err != nil || info.Version != row.Version {
				t.Fatalf("the carried row is not what a stat returns: %+v, %v", info, err)
			}
			apart := lockReads(func() {
				commit(ctx, "2")
				if _, err := cat.Put(ctx, followRow, strings.NewReader("row 2"), nil); err != nil {
					t.Fatal(err)
				}
				st, err := cat.Upload(ctx, followRow, strings.NewReader("row 3"), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cat.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: the lock record read %d time(s) for a commit and its carried fold, %d for the two apart", l, carried, apart)
			if carried != 1 || apart != 2 {
				t.Fatalf("lock record reads: carried %d (want 1), apart %d (want 2)", carried, apart)
			}

			// A record not optional is written after the rows; one that
			// does not hold what the write expects is left, and says so.
			due := &datastore.RecordWrite{Key: rec.Key, Expect: metastore.ExpectAbsent(), Value: []byte("cursor 2")}
			fctx, f, _ := follower(ctx, t, s, fence, "row 4", due)
			commit(fctx, "4")
			if _, ok := f.Carried(); !ok || !due.Written() {
				t.Fatalf("a record due: carried %v, written %v; want both", ok, due.Written())
			}
			if got, err := s.Records().GetRecord(ctx, rec.Key); err != nil || string(got) != "cursor 2" {
				t.Fatalf("record = %q, %v; want cursor 2", got, err)
			}
			stale := &datastore.RecordWrite{Key: rec.Key, Expect: metastore.ExpectValue([]byte("cursor 0")), Value: []byte("cursor 9")}
			fctx, f, _ = follower(ctx, t, s, fence, "row 5", stale)
			commit(fctx, "5")
			if _, ok := f.Carried(); !ok || stale.Written() {
				t.Fatalf("a record not as expected: carried %v, written %v; want carried, not written", ok, stale.Written())
			}
			if got, _ := s.Records().GetRecord(ctx, rec.Key); string(got) != "cursor 2" {
				t.Fatalf("record = %q, want it untouched", got)
			}

		})
	}
}

// TestFollowerUnderAStaleFence: a commit refused by its fence carries
// nothing, and a follower under another fence than the commit's is not
// carried.
func TestFollowerUnderAStaleFence(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("follow-stale/%d", time.Now().UnixNano())
	recordLayout(t, raw, bucket, prefix, datastore.LayoutModelsV5)
	_, s := openDatastore(t, raw, bucket, prefix)
	fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(7)}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectAbsent(), lockRecord(8)); err != nil {
		t.Fatal(err)
	}
	fctx, f, _ := follower(ctx, t, s, fence, "stale row", nil)
	st, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("stale"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(fctx, fence, []datastore.Entry{{Put: &st}}); !datastore.IsFenceConflict(err) {
		t.Fatalf("commit under a stale fence: %v, want a fence conflict", err)
	}
	if _, ok := f.Carried(); ok {
		t.Fatal("a refused commit carried its follower")
	}
	cat, _ := s.CatalogStore()
	if _, err := cat.Stat(ctx, followRow); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the row of a refused commit's follower: %v, want not found", err)
	}

	// The commit under the record's token, its follower under another.
	held := &datastore.Fence{Key: fenceKey, Token: lockRecord(8)}
	fctx, f, _ = follower(ctx, t, s, fence, "other fence", nil)
	if _, err := s.Commit(fctx, held, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Carried(); ok {
		t.Fatal("a follower under another fence than the commit's was carried")
	}
	if _, err := cat.Stat(ctx, followRow); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the row of a follower under another fence: %v, want not found", err)
	}
}

// TestPausedFollowerAtEveryRequest: holder A's commit carrying a row is
// paused before each of its requests in turn (the data commit's and the
// row's) while B takes the lock over, fences the namespace and its
// partition of the catalog (FenceTakeover), reads the row and A's file,
// and commits a row of its own; A resumes before or after B's commit. In
// every interleaving each of A's two commits either stood before B's fence
// (and B's reads saw it) or was refused and is seen by no reader: the
// row's commit, which reads no lock record of its own, is fenced by the
// data commit's check and the fence entry B appends to the catalog
// partition.
func TestPausedFollowerAtEveryRequest(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	defer withHoldersLayout(datastore.LayoutModelsV5)()
	for _, early := range []bool{true, false} {
		outcomes := map[string]int{}
		var requests []string
		for k := 1; ; k++ {
			reached, sent, outcome, v := pausedFollower(t, api, bucket, k, early, true)
			if !reached {
				requests = sent
				break
			}
			if v != "" {
				t.Errorf("A paused before request %d, resumed before B's commit %v: %s", k, early, v)
			}
			outcomes[outcome]++
			if k > 100 {
				t.Fatal("the commit sent more than 100 requests")
			}
		}
		t.Logf("A resumed before B's commit %v: A's commit and its row are %d requests (%s); outcomes %v", early, len(requests), strings.Join(requests, ", "), outcomes)
		// Both commits refused (paused before the data commit's
		// check), the data standing and the row refused (paused
		// between them: the row meets B's fence entry), both standing.
		for _, o := range []string{"both refused", "data stood, row refused", "both stood"} {
			if outcomes[o] == 0 {
				t.Errorf("no interleaving ended %q: %v", o, outcomes)
			}
		}
	}
}

// TestPausedFollowerWithoutCatalogFenceIsCaught is the negative control:
// the same interleavings with B fencing the namespace's partitions but not
// its partition of the catalog land A's carried row after B's read, which
// the checker reports.
func TestPausedFollowerWithoutCatalogFenceIsCaught(t *testing.T) {
	api, bucket := s3local.Client(t), s3local.Bucket(t)
	defer withHoldersLayout(datastore.LayoutModelsV5)()
	caught := 0
	for k := 1; k < 100; k++ {
		reached, _, _, v := pausedFollower(t, api, bucket, k, true, false)
		if !reached {
			break
		}
		if v != "" {
			caught++
		}
	}
	t.Logf("without the catalog partition's fence entry: %d interleavings caught", caught)
	if caught == 0 {
		t.Fatal("without the catalog partition's fence entry no interleaving was caught: the checker cannot fail")
	}
}

// pausedFollower runs one interleaving of TestPausedFollowerAtEveryRequest
// and names its outcome. Without catalogFence (the negative control) B
// fences the namespace's partitions but not its partition of the catalog.
func pausedFollower(t *testing.T, api s3fs.API, bucket string, k int, early, catalogFence bool) (reached bool, sent []string, outcome, violation string) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h := openHolders(ctx, t, api, bucket, fmt.Sprintf("follow-paused/%v/%d/%d", early, k, time.Now().UnixNano()))
	h.seed(ctx, t, "data/m/1/a")
	catB, err := h.sB.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	st0, err := catB.Upload(ctx, followRow, strings.NewReader("row 0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catB.Commit(ctx, h.fenceA, []datastore.Entry{{Put: &st0}}); err != nil {
		t.Fatal(err)
	}
	stA, err := h.sA.Upload(ctx, "data/m/1/a", strings.NewReader("A"), nil)
	if err != nil {
		t.Fatal(err)
	}
	fctx, f, rowA := follower(ctx, t, h.sA, h.fenceA, "row A", nil)
	h.p.arm(k)
	done := make(chan error, 1)
	go func() {
		_, err := h.sA.Commit(fctx, h.fenceA, []datastore.Entry{{Put: &stA}})
		done <- err
	}()
	var aErr error
	select {
	case <-h.p.paused:
	case <-done: // the commit ended before request k
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return false, h.p.sent, "", ""
	}
	if catalogFence {
		h.takeOver(ctx, t, k, true)
	} else {
		h.takeOver(ctx, t, k, false)
		parts, err := h.sB.Driver().Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.dB.FencePartitions(ctx, *h.fenceB, parts); err != nil {
			t.Fatal(err)
		}
	}
	seenFile, err := h.sB.Stat(ctx, "data/m/1/a")
	if err != nil {
		t.Fatal(err)
	}
	seenRow, err := catB.Stat(ctx, followRow)
	if err != nil {
		t.Fatal(err)
	}
	stB, err := catB.Upload(ctx, followRow, strings.NewReader("B saw "+seenRow.Version), nil)
	if err != nil {
		t.Fatal(err)
	}
	if early {
		close(h.p.release)
		aErr = <-done
	}
	if _, err := catB.Commit(ctx, h.fenceB, []datastore.Entry{{Put: &stB}}); err != nil {
		t.Fatalf("k=%d: B's row: %v", k, err)
	}
	if !early {
		close(h.p.release)
		aErr = <-done
	}
	if aErr != nil && !datastore.IsFenceConflict(aErr) {
		return true, nil, "", fmt.Sprintf("A's commit failed with %v, want a fence conflict or success", aErr)
	}
	// What B read after its fence, the file's feed, and the row now (B
	// wrote it last: A's version there landed after B's commit).
	fileLanded := false
	ch, _, err := h.sB.Changes(ctx, "m/1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ch {
		fileLanded = fileLanded || c.Version == stA.Version
	}
	rowNow, err := catB.Stat(ctx, followRow)
	if err != nil {
		t.Fatal(err)
	}
	sawRow := seenRow.Version == rowA.Version
	_, carried := f.Carried()
	switch {
	case aErr != nil && (fileLanded || sawRow || carried):
		return true, nil, "", fmt.Sprintf("A's refused commit: file in the feed %v, row seen by B %v, carried %v", fileLanded, sawRow, carried)
	case rowNow.Version == rowA.Version:
		return true, nil, "", "A's row landed after B's commit"
	case fileLanded && seenFile.Version != stA.Version:
		return true, nil, "", "A's file landed after B's fence: B's stat did not see it"
	case carried && !sawRow:
		return true, nil, "", "A's follower is carried but B's stat after its fence did not see the row"
	case aErr == nil && !fileLanded:
		return true, nil, "", "A's acknowledged commit is not in the feed"
	}
	switch {
	case aErr != nil:
		outcome = "both refused"
	case carried:
		outcome = "both stood"
	case sawRow:
		outcome = "data stood, row landed uncarried"
	default:
		outcome = "data stood, row refused"
	}
	return true, nil, outcome, ""
}

// TestDropCarriesTheRowRemoval: the lifecycle's drop of an orphaned model
// carries the removal of the model's catalog row (datastore.CommitRider)
// after the partition is gone, fenced by the drop's read of the lock
// record: one read for both, two for the same drop and removal apart (the
// negative control). The row is gone, the catalog's feed has its deletion
// at the position Apply reports, and the partition is gone.
func TestDropCarriesTheRowRemoval(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("follow-drop/%d", time.Now().UnixNano())
	recordLayout(t, raw, bucket, prefix, datastore.LayoutModelsV5)
	ka := &killAPI{API: raw}
	d, root := openDatastore(t, ka, bucket, prefix)
	d.SetOwnWriteAge(0) // the check's reads are what is counted (as followed's)
	ns, err := root.Namespace("ns")
	if err != nil {
		t.Fatal(err)
	}
	fence := &datastore.Fence{Key: "lock/rec/ns/sync", Token: lockRecord(3)}
	if err := root.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	lockReads := func(f func()) int { return recordReads(ka, prefix, fence.Key, f) }
	orphan := func(model string) {
		t.Helper()
		var es []datastore.Entry
		for _, p := range []string{"data/" + model + "/model.yaml", "data/" + model + "/out/1/raw"} {
			st, err := ns.Upload(ctx, p, strings.NewReader("x"), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		if _, err := ns.Commit(ctx, fence, es); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Commit(ctx, fence, []datastore.Entry{{Delete: "data/" + model + "/model.yaml"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.Fold(ctx, ns, fence); err != nil {
			t.Fatal(err)
		}
		if r, ok, err := catalog.Get(ctx, ns, "ns", model); err != nil || !ok || r.State != catalog.Orphaned {
			t.Fatalf("%s's row before the drop: %+v, %v, %v; want it orphaned", model, r, ok, err)
		}
	}
	cat, err := ns.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}

	orphan("m/a")
	var st lifecycle.Stats
	carried := lockReads(func() {
		if st, err = lifecycle.Apply(ctx, ns, fence, []lifecycle.Action{{Kind: lifecycle.DropModel, Namespace: "ns", Model: "m/a"}}); err != nil || st.Models != 1 {
			t.Fatalf("drop m/a: %+v, %v", st, err)
		}
	})
	if _, ok, err := catalog.Get(ctx, ns, "ns", "m/a"); err != nil || ok {
		t.Fatalf("m/a's row after the drop: %v, %v; want it removed", ok, err)
	}
	if got, err := ns.StatMany(ctx, []string{"data/m/a/out/1/raw"}); err != nil || len(got) != 0 {
		t.Fatalf("m/a's file after the drop: %v, %v; want none", got, err)
	}
	if len(st.Removed) != 1 || len(st.Removed[0]) != 1 || !st.Removed[0][0].Deleted || st.Removed[0][0].Path != catalog.RowPath("ns", "m/a") {
		t.Fatalf("the removal as Apply reports it: %+v; want the row's tombstone", st.Removed)
	}
	rm := st.Removed[0][0]
	if ch, _, err := cat.Changes(ctx, rm.Partition, rm.Pos-1, 10); err != nil || len(ch) != 1 || ch[0].Path != rm.Path || !ch[0].Deleted {
		t.Fatalf("the catalog's feed at the removal: %+v, %v; want the row's deletion at %d", ch, err, rm.Pos)
	}

	orphan("m/b")
	apart := lockReads(func() {
		if _, dropped, err := ns.DropPartitionIfDeleted(ctx, fence, "m/b", catalog.DefinitionPath("m/b")); err != nil || !dropped {
			t.Fatalf("drop m/b: %v, %v", dropped, err)
		}
		if _, err := catalog.Remove(ctx, ns, fence, "ns", "m/b"); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("the lock record read %d time(s) for a drop and its row's removal carried, %d apart", carried, apart)
	if carried != 1 || apart != 2 {
		t.Fatalf("lock record reads: carried %d (want 1), apart %d (want 2)", carried, apart)
	}
}

// TestFollowerAfterARewriteNotATakeover pins what the carrier's check does
// not refuse, and what it does: a foreign client rewrites the lock record
// (no takeover, no fence entry) while holder A's carried row waits for its
// create, after A's data commit. The row lands, describing the data commit
// that stands, as it would had A paused after its check; A's next commit,
// a commit of its own under the token the record no longer holds, applies
// nothing; and a holder that then takes the lock over and fences reads
// A's row.
func TestFollowerAfterARewriteNotATakeover(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("follow-rewrite/%d", time.Now().UnixNano())
	recordLayout(t, raw, bucket, prefix, datastore.LayoutModelsV5)
	hold := &holdAPI{API: raw, prefix: prefix, lists: map[string]int{}}
	s, cat, fence := followed(t, hold, bucket, prefix)
	fctx, f, row := follower(ctx, t, s, fence, "row A", nil)
	file, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("A"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hold.arm("PUT /_catalog/l/")
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(fctx, fence, []datastore.Entry{{Put: &file}})
		done <- err
	}()
	select {
	case <-hold.held:
	case err := <-done:
		t.Fatalf("the commit ended (%v) before its carried row's create", err)
	}
	// The foreign rewrite: a raw PutObject of another holder's record.
	if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/r/" + fenceKey + "~"),
		Body: bytes.NewReader(lockRecord(8))}); err != nil {
		t.Fatal(err)
	}
	close(hold.resume)
	if err := <-done; err != nil {
		t.Fatalf("the data commit: %v", err)
	}
	if _, ok := f.Carried(); !ok {
		t.Fatal("the row was not carried")
	}
	if info, err := cat.Stat(ctx, followRow); err != nil || info.Version != row.Version {
		t.Fatalf("the carried row: %+v, %v; want A's, landed", info, err)
	}
	// A's next commit of its own is refused: its check reads the record.
	again, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("A again"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &again}}); !datastore.IsFenceConflict(err) {
		t.Fatalf("A's next commit under the rewritten record: %v, want a fence conflict", err)
	}
	// A holder taking the lock over from the rewritten record, fencing.
	sB := takeOverAndFence(t, raw, bucket, prefix, lockRecord(8), 9)
	catB, err := sB.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	if info, err := catB.Stat(ctx, followRow); err != nil || info.Version != row.Version {
		t.Fatalf("the new holder's stat of the row: %+v, %v; want A's", info, err)
	}
	if info, err := sB.Stat(ctx, "data/m/1/a"); err != nil || info.Version != file.Version {
		t.Fatalf("the new holder's stat of the file: %+v, %v; want A's data commit", info, err)
	}
}
