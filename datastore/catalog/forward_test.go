package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// forwardSteps is the number of random steps of TestForwardIsTheListedRow
// on a backend (LAKE_FORWARD_STEPS overrides it): cheap on bolt, a few
// seconds on DynamoDB Local and versitygw.
func forwardSteps(t *testing.T, def int) int {
	if v := os.Getenv("LAKE_FORWARD_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LAKE_FORWARD_STEPS=%q: want a positive number", v)
		}
		return n
	}
	return def
}

// TestForwardIsTheListedRow folds random change sequences (puts, overwrites,
// deletes, the definition put and deleted, several entries and versions,
// files directly under the model, writers whose clocks disagree, commits
// with and without the states they replaced read before) and checks after
// every fold that each row written is exactly the row a listing of the
// model builds from the same previous row; and that most rows were brought
// forward from the feed, not listed.
func TestForwardIsTheListedRow(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		ds, err := dsurl.Open(t.Context(), "bolt://"+filepath.Join(t.TempDir(), "lake.db"), &dsurl.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		checkForward(t, ds, forwardSteps(t, 400), 1)
	})
	t.Run("dynamodb", func(t *testing.T) {
		c, table := datastoreTable(t) // foldover_test.go
		checkForward(t, dynamoDatastore(t, c, table), forwardSteps(t, 30), 2)
	})
	t.Run("s3", func(t *testing.T) {
		d, err := s3fs.Open(t.Context(), s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "fwd"})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := datastore.Open(t.Context(), d, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		checkForward(t, ds, forwardSteps(t, 20), 3)
	})
}

func checkForward(t *testing.T, ds *datastore.Store, steps int, seed uint64) {
	ctx := t.Context()
	ns, err := ds.Namespace("fwd")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 31))
	// Writers whose clocks disagree by up to a minute either way, so that
	// a later change may carry an earlier time.
	base := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	tick := 0
	skew := rand.New(rand.NewPCG(seed, 32))
	ns.SetClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick++
		return base.Add(time.Duration(tick)*time.Second + time.Duration(skew.IntN(120)-60)*time.Second)
	})
	const key = "test/fold-fence"
	if err := ns.Records().CASRecord(ctx, key, metastore.ExpectAbsent(), []byte("token-1")); err != nil {
		t.Fatal(err)
	}
	fence := &datastore.Fence{Key: key, Token: []byte("token-1")}
	models := []string{"t/a", "t/b", "t/c/d"}
	paths := []string{DefinitionFile, "x", "y", "e1/v1/raw", "e1/v1/meta", "e1/v1/sub/f", "e1/v2/raw", "e1/v3", "e2/v1/raw", "e2/w/raw"}
	cat, err := ns.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	var folded, forwarded, fromCommit int
	var cursor, first string
	reasons := map[string]int{}
	testHookReason = func(_, reason string) {
		if i := strings.Index(reason, "data/"); i >= 0 {
			reason = reason[:i] + "PATH"
		}
		reasons[reason]++
	}
	var ownModels []string
	overs := 0
	testHookFromCommit = func(model string) { ownModels = append(ownModels, model) }
	defer func() { testHookReason, testHookFromCommit = nil, nil }()
	for step := range steps {
		model := models[rng.IntN(len(models))]
		var before map[string]datastore.Info
		// Mostly one commit, whose replaced states were read before it
		// (as a sync reads them); sometimes another writer's commit
		// before or after that read, or nothing new at all.
		commits, read := 1, 0
		switch rng.IntN(8) {
		case 0:
			commits = 0
		case 1:
			commits, read = 2, 1
		case 2:
			commits = 2
		}
		if rng.IntN(8) == 0 {
			read = -1 // nothing read
		}
		// The sync's own commit is the one whose states were read (the
		// last when none were); mostly its fold is told what it applied
		// (FoldOptions.Committed), sometimes not, so that both ways are
		// checked against the listing.
		own := read
		if own < 0 {
			own = commits - 1
		}
		tell := rng.IntN(4) != 0
		var committed []datastore.Info
		// The partitions another writer's commit changed, before the
		// sync's own and after it.
		othersBefore, othersAfter := map[string]bool{}, map[string]bool{}
		for c := range commits {
			var entries []datastore.Entry
			seen := map[string]bool{}
			for range 1 + rng.IntN(3) {
				p := datastore.ModelPrefix + model + "/" + paths[rng.IntN(len(paths))]
				if seen[p] {
					continue
				}
				seen[p] = true
				if rng.IntN(3) == 0 {
					entries = append(entries, datastore.Entry{Delete: p})
					continue
				}
				size := rng.IntN(40)
				if rng.IntN(10) == 0 {
					size = 5000 + rng.IntN(3000)
				}
				st, err := ns.Upload(ctx, p, bytes.NewReader(bytes.Repeat([]byte{'a' + byte(step%26)}, size)), nil)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, datastore.Entry{Put: &st})
			}
			if c == read {
				// As a sync does: the states the commit replaces, read
				// before it (a path with none as a tombstone).
				var ps []string
				for _, e := range entries {
					ps = append(ps, e.Path())
				}
				got, err := ns.StatMany(ctx, ps)
				if err != nil {
					t.Fatal(err)
				}
				before = map[string]datastore.Info{}
				for _, p := range ps {
					if info, ok := got[p]; ok {
						before[p] = info
					} else {
						before[p] = datastore.Info{Path: p, Deleted: true}
					}
				}
			}
			applied, err := ns.Commit(ctx, nil, entries)
			if err != nil {
				t.Fatal(err)
			}
			if c == own && tell {
				committed = applied
			} else if c != own {
				for _, a := range applied {
					if c < own {
						othersBefore[a.Partition] = true
					} else {
						othersAfter[a.Partition] = true
					}
				}
			}
		}
		prevs := map[string]*Row{}
		for _, m := range models {
			if r, ok := readRow(t, cat, ns.NamespaceName(), m); ok {
				prevs[m] = &r
			}
		}
		// The cursor: mostly the last fold's, sometimes none, one that
		// is not a cursor, or the last fold's over a record removed or
		// moved back since (a second pass must catch up).
		o := FoldOptions{Before: before, Cursor: cursor, Committed: committed}
		if rng.IntN(2) == 0 {
			// The rows as a sync reads them ahead, under the lock
			// (FoldOptions.Rows): no row as a tombstone.
			o.Rows = map[string]datastore.Info{}
			for _, m := range models {
				p := rowPath(ns.NamespaceName(), m)
				info, err := cat.Stat(ctx, p)
				switch {
				case errors.Is(err, metastore.ErrNotFound):
					o.Rows[p] = datastore.Info{Path: p, Deleted: true}
				case err != nil:
					t.Fatal(err)
				default:
					o.Rows[p] = info
				}
			}
		}
		switch rng.IntN(10) {
		case 0:
			o.Cursor = ""
		case 1:
			o.Cursor = "not a cursor"
		case 2, 3:
			recs, key := ns.Records(), cursorKey(ns.NamespaceName())
			rec, err := recs.GetRecord(ctx, key)
			switch {
			case errors.Is(err, metastore.ErrNotFound):
			case err != nil:
				t.Fatal(err)
			case rng.IntN(2) == 0:
				err = recs.DeleteRecord(ctx, key, rec)
			default:
				err = recs.CASRecord(ctx, key, metastore.ExpectValue(rec), []byte(first))
			}
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				t.Fatal(err)
			}
		}
		ownModels = nil
		st, err := FoldWith(ctx, ns, fence, o)
		if err != nil {
			t.Fatalf("step %d: fold: %v", step, err)
		}
		folded += st.Rows
		if st.Cursor == "" {
			t.Fatalf("step %d: the fold left no cursor", step)
		}
		if first == "" {
			first = st.Cursor
		}
		cursor = st.Cursor
		forwarded += st.Forwarded
		fromCommit += st.FromCommit
		for _, m := range ownModels {
			// The other writer's commit is in the same partition,
			// before the sync's (or after it, when the fold read the
			// head): the sync's entries are not all of its changes.
			// One after it that the fold did not read (CursorOver:
			// the changed partitions known from the commit) is left
			// to the next fold.
			if othersBefore[m] || (othersAfter[m] && !st.CursorOver) {
				t.Fatalf("step %d: %s brought forward over the sync's commit alone, with another writer's commit in its partition", step, m)
			}
		}
		if len(ownModels) != st.FromCommit {
			t.Fatalf("step %d: FromCommit %d, the hook named %v", step, st.FromCommit, ownModels)
		}
		if st.FromCommit > st.Forwarded {
			t.Fatalf("step %d: %d rows from the commit, only %d forwarded", step, st.FromCommit, st.Forwarded)
		}
		if st.CursorOver && len(othersAfter) > 0 {
			// A commit after the sync's, which a fold that knew the
			// changed partitions from the sync's commit left: the next
			// fold reads it, and the rows below are level again.
			overs++
			again, err := FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor})
			if err != nil {
				t.Fatalf("step %d: the fold after: %v", step, err)
			}
			if again.CursorOver || again.Rows == 0 {
				t.Fatalf("step %d: the fold after one over the sync's commit did not read what came after it (%+v)", step, again)
			}
			cursor = again.Cursor
		}
		for _, m := range models {
			got, ok := readRow(t, cat, ns.NamespaceName(), m)
			files, err := ns.ListPartitionAll(ctx, m, "")
			if err != nil {
				t.Fatal(err)
			}
			defs, err := ns.StatMany(ctx, []string{DefinitionPath(m)})
			if err != nil {
				t.Fatal(err)
			}
			var def *datastore.Info
			if d, ok := defs[DefinitionPath(m)]; ok {
				def = &d
			}
			prev := prevs[m]
			if len(files) == 0 && def == nil && (prev == nil || prev.State != Orphaned) {
				if ok {
					t.Fatalf("step %d: model %s has nothing, yet its row is %+v", step, m, got)
				}
				continue
			}
			if !ok {
				t.Fatalf("step %d: model %s has no row; files %d, definition %v", step, m, len(files), def)
			}
			now := got.Created // the fold's time, for a first row
			if prev != nil {
				now = time.Time{}
			}
			want := buildRow(ns.NamespaceName(), m, files, def, prev, got.Pos, now)
			if h, err := ns.Head(ctx, m); err != nil || got.Pos != h.Seq {
				t.Fatalf("step %d: model %s's row is at %d, its head at %d (%v)", step, m, got.Pos, h.Seq, err)
			}
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if !bytes.Equal(wb, gb) {
				t.Fatalf("step %d: model %s (folded %d, forwarded %d)\nrow  %s\nlist %s\nprev %+v", step, m, st.Rows, st.Forwarded, gb, wb, prev)
			}
		}
	}
	t.Logf("%d steps: %d rows written, %d brought forward (%d over the sync's own commit, the feed unread; %d folds left a later commit to the next); why (\"\" forwarded): %v", steps, folded, forwarded, fromCommit, overs, reasons)
	if fromCommit == 0 {
		t.Fatalf("no row was brought forward over the sync's own commit")
	}
	if forwarded*3 < folded { // about half are, with this mix
		t.Fatalf("only %d of %d rows were brought forward from the feed", forwarded, folded)
	}
}

func readRow(t *testing.T, cat *datastore.Store, ns, model string) (Row, bool) {
	t.Helper()
	info, err := cat.Stat(t.Context(), rowPath(ns, model))
	if errors.Is(err, metastore.ErrNotFound) {
		return Row{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRow(info)
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}
