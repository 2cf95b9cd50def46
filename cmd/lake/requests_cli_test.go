package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/reqcount"
	"github.com/lakemeta/lake/internal/s3local"
)

// requestsPerSync is one kind of sync counted by TestRequestsPerSync: the
// requests lake made (counted on the wire), the fewest the work needs, and
// the most this test accepts (what lake does now: a regression fails).
type requestsPerSync struct {
	kind          string
	counts        reqcount.Counts
	seq           int // round trips in sequence (reqcount's Sequence)
	minimum, most int
}

// TestRequestsPerSync counts, from outside, the requests each kind of
// `lake data sync` sends to DynamoDB Local and to S3 (versitygw): a
// counting proxy (internal/reqcount) sits between the lake process and
// the store, in a namespace with the catalog and the lifecycle on. It
// prints the figures of docs/bench-sync.md ("Requests per sync"):
//
//	go test ./cmd/lake/ -run TestRequestsPerSync -v
//
// LAKE_REQUESTS_FILES sets the files of the first sync (30, to stay cheap;
// the docs' figures are of 300); LAKE_REQUESTS_TABLE=1 also prints them as
// a markdown table on standard output, for the docs' figures block.
func TestRequestsPerSync(t *testing.T) {
	files := 30
	if v := os.Getenv("LAKE_REQUESTS_FILES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			t.Fatalf("LAKE_REQUESTS_FILES=%q: want 1 to 10000", v)
		}
		files = n
	}
	if os.Getenv("LAKE_REQUESTS_TABLE") == "1" {
		// The docs' figures block: `… -v | grep '^|'` keeps the table.
		fmt.Println("| sync | backend | requests | minimum | ratio | in sequence | the requests |")
		fmt.Println("|---|---|---|---|---|---|---|")
	}
	t.Run("dynamodb", func(t *testing.T) {
		p, err := reqcount.Start(ddblocal.Endpoint(t))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		store := "dynamodb://" + ddblocal.TableName(t) + "?endpoint=" + p.URL
		t.Cleanup(func() { deleteDataTable(t, store) })
		measureSyncs(t, p, store, nil, files, dynamoMost)
	})
	t.Run("s3", func(t *testing.T) {
		p, err := reqcount.Start(s3local.Endpoint(t))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		store := "s3://" + s3local.Bucket(t) + "/req"
		measureSyncs(t, p, store, []string{"AWS_ENDPOINT_URL_S3=" + p.URL}, files, s3Most)
	})
}

// The most requests each kind of sync may take (nothing changed, one
// changed file, the first sync of 30 files and of 300, nothing changed
// after a commit), as measured: a change that costs more fails the test.
// Issue 31 took them from 4, 26, 1316 (300 files) and 8 on DynamoDB and
// 7, 171, 2813 and 15 on S3: the layout remembered and proved by the commit,
// small files inline, clash reads batched, empty deeper models not queried,
// staged commits packed, partitions registered in the commit, one
// read-ahead, the lock record kept by the tree, the catalog row brought
// forward from the feed (over the sync's own commit without reading the
// feed, its previous row read ahead with the dirty paths' states, its
// cursor written in the rows' transaction); on S3
// pending marks beside the heads and a commit's reads made once. Issue 27's
// directory claims on S3 cost one LIST of data's log in a commit of a new
// file (the clash check reads that partition's tail, which now exists), one
// request in a first sync (the claim's head, object and roll-forward, less
// the reads the staged commit now reuses) and, once, the claims-only head
// read by the next sync's ChangedPartitions: 38 → 39, 112 → 113, 382 →
// 383, 11 → 13. Then: a first row of a model the sync's commit began built
// from that commit (no feed read: DynamoDB 30 files 27 → 21, 300 files
// 44 → 38), a put over
// a live file on S3 that reads nothing more than its entry, and an S3 commit
// starting from the tail its process's stat had just read (one changed
// file 39 → 29). And an S3 staged commit of one object a partition moves
// its cursors past itself as a small commit does (nothing changed right
// after the first sync 13 → 3; the first sync's fold reads no changed
// partitions: 103 → 94, 373 → 364). And the fold's cursor moved by its
// compare-and-swap alone right after the fold's own fenced commit (S3's
// fenced record write was a read, the write and a read: 29 → 27, 94 → 92,
// 364 → 362). And an S3 head holding the fences of the object it ends at,
// so a commit to an existing partition does not read that object: 27 → 25.
// And a DynamoDB staged commit checking the layout in its partitions'
// registration instead of reading the record first: 38 → 37; and an S3
// reader's tail serving a writer when its head holds the fences: 362 → 361
// (30 files 92 → 91); and DynamoDB's catalog rows of a first sync's three
// models checked with one Query of their partition, not three: 37 → 35
// (30 files 21 → 18). And a DynamoDB staged commit's entry lists, record
// and live-set id forgotten in one transaction, not a BatchWriteItem and a
// transaction: 35 → 34 (30 files 18 → 17). And an S3 staged commit's
// parts fenced by its flip, without a read of the lock record before each
// part: 361 → 358 (30 files 91 → 88). And a DynamoDB staged commit's flip
// carried by its first settling transaction: 30 files 17 → 16 (300 files
// stay 34: their 300 settling writes and the flip's 2 items take 4
// transactions of 100 either way); and its partitions registered and its
// layout checked in its first staging transaction, not in a transaction
// of their own before it: 34 → 33 (30 files 16 → 15); and its index
// entries moved from the heads and counters its staging left, not read
// back: 33 → 32 (30 files 15 → 14). And a DynamoDB staged commit's
// index move and forgetting carried by its last settling transaction:
// 32 → 30 (30 files 14 → 13); and its staging transactions after the
// first built from what the earlier ones read and wrote, without a read:
// 30 → 24. And an S3 staged commit starting from the tails its process's
// Stat had just read (the new models' heads not read again): 88 → 85,
// 358 → 355. And a DynamoDB commit of more entries than the worst case
// allows but whose items fit in one transaction made as that one
// transaction, not staged: 30 files 13 → 11. And an S3 Stat beside its
// namespace's heads listing (a sync's stat of its dirty paths and of their
// catalog rows) not listing the log when the listing shows the head it
// read and no pending mark: one changed file 25 → 23. And the remembered
// layout proved by the namespace's entry the sync reads for its policy
// (datastore/layoutproof.go), not by a read of the layout record: S3 one
// changed file 23 → 22, the first syncs 85 → 84 and 355 → 354. And a new
// S3 datastore's heads holding their partitions' path index (layout
// models-v3, datastore/s3fs/headindex.go): no index object written a file
// nor read by a stat, one changed file 22 → 18, the first syncs of 30 and
// of 300 files 84 → 45 and 354 → 45. And an S3 tree remembering the heads
// its last sync read or wrote (treesync/headseed.go), which its stat takes
// where the pull's listing shows them at the remembered ETag (MD5-checked,
// datastore/s3fs/knownheads.go): the changed file's partition head and the
// catalog row's head not read, one changed file 18 → 16. And a new
// catalog row's put on DynamoDB making no file-or-directory check (the
// catalog's scope is flat, datastore.FlatScope): the first syncs of 30 and
// of 300 files 11 → 10 and 24 → 23. And a DynamoDB sync's commit carrying
// its catalog fold in its own transaction where the fold needs no read
// (catalog.PlanFold): one changed file 6 → 5, the first sync of 30 files
// 10 → 9 (300 files are a staged commit, which carries none). And a new
// S3 datastore keeping each namespace's registry record beside its heads
// (layout models-v4, datastore/s3fs/listedrecords.go), so that a sync
// takes its namespace's record from its pull's listing when it shows the
// ETag the tree's last sync read or wrote: every sync one GET fewer,
// nothing changed 3 → 2, one changed file 16 → 15, the first syncs 45 → 44.
// And an S3 stat beside its namespace's heads listing not reading a head
// the listing shows absent (datastore/s3fs/knownheads.go): the first
// syncs' new models, 44 → 40. And an S3 commit of one log object visible
// by its head (layout models-v5, datastore/s3fs/headcommit.go): no pending
// mark and no mark's delete, one changed file 15 → 11, the first syncs
// 40 → 38. And an S3 sync's catalog fold carried by its commit, fenced by
// that commit's read of the lock record (datastore/s3fs/follow.go): one
// changed file 11 → 10, and a staged commit's after its flip: the first
// syncs 38 → 37; the fold cursor's record left behind on S3 (the tree keeps
// the cursor): 10 → 9, 37 → 36. And an S3 check of the fence answered by
// the holder's own acquisition of the lock record less than a second
// before (datastore/s3fs/ownwrite.go): one changed file 9 → 8, the first
// syncs 36 → 33 (the new partitions' registration, the staged commit's
// record and its flip read the record no more). And an S3 commit that
// creates its partition's head listing no log (its create at position 1
// is the check): the first syncs 33 → 28.
var (
	dynamoMost = [6]int{1, 5, 9, 23, 1, 1}
	s3Most     = [6]int{2, 8, 28, 28, 2, 2}
)

func measureSyncs(t *testing.T, p *reqcount.Proxy, store string, env []string, files int, most [6]int) {
	dir := t.TempDir()
	lake := func(args ...string) result {
		t.Helper()
		return runEnv(t, dir, "", env, append([]string{"--store", store}, args...)...)
	}
	ok(t, lake("data", "init"))
	ok(t, lake("data", "lifecycle", "--namespace", "ns", "--enable"))
	sync := func() { t.Helper(); ok(t, lake("data", "sync", "--namespace", "ns")) }
	sync() // the tree's first sync: nothing to push yet
	for i := range files {
		f := filepath.Join(dir, "data", "t", fmt.Sprintf("m%d", i%3), fmt.Sprintf("f%03d", i))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, fmt.Appendf(nil, "file %d\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// LAKE_REQUESTS_TRACE=1 logs each request of each sync, to tell what
	// each was for.
	// The proxy holds each request 5 ms, so that requests sent at once
	// overlap there and the round trips in sequence count lake's order,
	// not this machine's scheduling.
	p.Hold(5 * time.Millisecond)
	type taken struct {
		counts reqcount.Counts
		seq    int
	}
	take := func(kind string) taken {
		if os.Getenv("LAKE_REQUESTS_TRACE") != "" {
			for _, l := range p.Log() {
				t.Logf("%s: %s", kind, l)
			}
		}
		seq := p.Sequence()
		return taken{p.Take(), seq}
	}
	p.Take()
	sync()
	first := take("first")
	sync()
	after := take("after")
	sync()
	none := take("none")
	if err := os.WriteFile(filepath.Join(dir, "data", "t", "m0", "f000"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sync()
	one := take("one")
	sync()
	afterOne := take("after-one")
	rows := []requestsPerSync{
		// One read proves nothing changed.
		{"nothing changed", none.counts, none.seq, 1, most[0]},
		// The same, right after a commit (which the cursor was read
		// before): the read names the partitions of that commit.
		{"nothing changed, after one", after.counts, after.seq, 1, most[4]},
		// The same after the one changed file's small commit, which
		// the sync's cursor was moved past (CursorAdvancer) where the
		// store proves it.
		{"nothing changed, after one file", afterOne.counts, afterOne.seq, 1, most[5]},
		// Lock, one pull read, one chunk write, the commit, release.
		{"one changed file", one.counts, one.seq, 5, most[1]},
		// Writes of 25 a request (BatchWriteItem's most) for the
		// content, the lock, the commit, release.
		{fmt.Sprintf("first sync of %d new files", files), first.counts, first.seq, (files+24)/25 + 4, firstMost(files, most)},
	}
	backend := map[bool]string{true: "DynamoDB", false: "S3"}[strings.HasPrefix(store, "dynamodb:")]
	for _, r := range rows {
		ratio := float64(r.counts.Total()) / float64(r.minimum)
		t.Logf("%-28s %4d requests, minimum %d, ratio %.1f×, %d in sequence: %s", r.kind, r.counts.Total(), r.minimum, ratio, r.seq, r.counts)
		if os.Getenv("LAKE_REQUESTS_TABLE") == "1" {
			fmt.Printf("| %s | %s | %d | %d | %.1f× | %d | %s |\n", r.kind, backend, r.counts.Total(), r.minimum, ratio, r.seq, r.counts)
		}
	}
	for _, r := range rows {
		if r.counts.Total() > r.most {
			t.Errorf("%s: %d requests, more than the %d measured before: %s", r.kind, r.counts.Total(), r.most, r.counts)
		}
	}
}

// firstMost is the ceiling of the first sync of files new files: the
// measured figure for 30 (what CI runs) and 300 (the docs' figures), and
// between or past them the line through both.
func firstMost(files int, most [6]int) int {
	return most[2] + (most[3]-most[2])*(files-30)/270
}
