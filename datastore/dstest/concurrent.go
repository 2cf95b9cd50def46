package dstest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// ack is a change a writer saw acknowledged.
type ack struct {
	partition, path string
	pos             uint64
}

// ackLog is the acknowledged changes in the order they were acknowledged.
type ackLog struct {
	mu   sync.Mutex
	acks []ack
}

func (l *ackLog) add(infos []datastore.Info) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range infos {
		l.acks = append(l.acks, ack{i.Partition, i.Path, i.Pos})
	}
}

func (l *ackLog) snapshot() []ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks[:len(l.acks):len(l.acks)]
}

// testConcurrent runs writers over models partitions (rewriting and deleting
// a small set of paths each) while pullers pull every partition throughout.
// Each puller checks, after every pull, that for every change acknowledged
// before the pull began at or below the position it reached it has seen that
// change or its path's newer one is still ahead (never miss), that positions come in (after, upTo] and in order (never
// repeat), and at the end that its view equals the store's.
func testConcurrent(t *testing.T, s *datastore.Store, models int) {
	const writers, opsPerWriter, pathsPerModel, pullers = 8, 20, 6, 3
	parts := make([]string, models)
	for m := range parts {
		parts[m] = fmt.Sprintf("conc/%d", m)
	}
	var log ackLog
	var writing atomic.Int32
	writing.Store(writers)
	errs := make(chan error, writers+pullers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			rng := rand.New(rand.NewPCG(uint64(w), 17))
			for i := range opsPerWriter {
				m := rng.IntN(models)
				p := fmt.Sprintf("data/%s/f%d", parts[m], rng.IntN(pathsPerModel))
				var infos []datastore.Info
				var err error
				switch {
				case rng.IntN(10) == 0:
					var info datastore.Info
					info, err = s.Delete(t.Context(), p)
					if errors.Is(err, metastore.ErrNotFound) {
						continue
					}
					infos = []datastore.Info{info}
				case rng.IntN(4) == 0: // a commit of two paths of two models
					p2 := fmt.Sprintf("data/%s/g%d", parts[rng.IntN(models)], rng.IntN(pathsPerModel))
					var entries []datastore.Entry
					for _, q := range []string{p, p2} {
						st, uerr := s.Upload(t.Context(), q, strings.NewReader(fmt.Sprintf("w%d i%d", w, i)), nil)
						if uerr != nil {
							errs <- uerr
							return
						}
						entries = append(entries, datastore.Entry{Put: &st})
					}
					infos, err = s.Commit(t.Context(), nil, entries)
				default:
					var info datastore.Info
					info, err = s.Put(t.Context(), p, strings.NewReader(fmt.Sprintf("w%d i%d", w, i)), nil)
					infos = []datastore.Info{info}
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d op %d on %s: %w", w, i, p, err)
					return
				}
				log.add(infos)
			}
		}()
	}
	views := make([]map[string]datastore.Info, pullers)
	for pl := range pullers {
		views[pl] = map[string]datastore.Info{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := puller(t, s, parts, &log, &writing, views[pl]); err != nil {
				errs <- fmt.Errorf("puller %d: %w", pl, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every puller's view is the store's final state.
	var all []string
	for _, part := range parts {
		for _, pre := range []string{"f", "g"} {
			for i := range pathsPerModel {
				all = append(all, fmt.Sprintf("data/%s/%s%d", part, pre, i))
			}
		}
	}
	final, err := s.StatMany(t.Context(), all)
	if err != nil {
		t.Fatal(err)
	}
	if len(log.snapshot()) < writers*opsPerWriter/2 {
		t.Fatalf("only %d changes acknowledged", len(log.snapshot()))
	}
	for pl, view := range views {
		if len(view) != len(final) {
			t.Fatalf("puller %d saw %d paths, the store has %d", pl, len(view), len(final))
		}
		for p, want := range final {
			got := view[p]
			if got.Pos != want.Pos || got.Version != want.Version || got.Deleted != want.Deleted {
				t.Fatalf("puller %d: %s is %+v in its view, %+v in the store", pl, p, got, want)
			}
		}
	}
}

func puller(t *testing.T, s *datastore.Store, parts []string, log *ackLog, writing *atomic.Int32, view map[string]datastore.Info) error {
	pos := map[string]uint64{}
	seen := map[string]bool{}
	for last := false; ; {
		done := writing.Load() == 0 // one more full round after the writers end
		for _, part := range parts {
			before := log.snapshot()
			after := pos[part]
			ch, upTo, err := s.Changes(t.Context(), part, after, 5)
			if err != nil {
				return err
			}
			if upTo < after {
				return fmt.Errorf("%s: position went back from %d to %d", part, after, upTo)
			}
			prev := after
			for _, c := range ch {
				if c.Pos <= prev || c.Pos > upTo || c.Partition != part {
					return fmt.Errorf("%s: change %s@%d outside (%d, %d] or out of order", part, c.Path, c.Pos, prev, upTo)
				}
				id := fmt.Sprintf("%s@%d", part, c.Pos)
				if seen[id] {
					return fmt.Errorf("change %s seen twice", id)
				}
				seen[id] = true
				prev = c.Pos
				view[c.Path] = c
			}
			pos[part] = upTo
			for _, a := range before {
				if a.partition != part || a.pos > upTo || view[a.path].Pos >= a.pos {
					continue
				}
				// Each path keeps only its latest entry: a change the
				// puller did not see is fine only if a newer one of the
				// same path lies beyond upTo, for the next pull.
				m, err := s.StatMany(t.Context(), []string{a.path})
				if err != nil {
					return err
				}
				if m[a.path].Pos <= upTo {
					return fmt.Errorf("%s: reached %d but missed acknowledged change %s@%d (view has %d, store has %d)", part, upTo, a.path, a.pos, view[a.path].Pos, m[a.path].Pos)
				}
			}
		}
		if last {
			// Drained: every partition is at its head.
			for _, part := range parts {
				h, err := s.Head(t.Context(), part)
				if err != nil {
					return err
				}
				if pos[part] != h.Seq {
					last = false
				}
			}
			if last {
				return nil
			}
		}
		last = done
	}
}

// testReaderRacesWriter rewrites a multi-chunk file while readers read it
// and a reclaimer deletes replaced versions as soon as they are replaced: a
// reader must always get one version whole.
func testReaderRacesWriter(t *testing.T, s *datastore.Store) {
	const p, versions = "data/race/1/file", 24
	size := 2*datastore.ChunkSize + 1000
	put(t, s, p, pattern(size, 0))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var whole, unavailable atomic.Int64
	errs := make(chan error, 8)
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		defer stop.Store(true)
		for v := 1; v <= versions; {
			_, err := s.Put(t.Context(), p, strings.NewReader(pattern(size, byte(v))), nil)
			if err != nil {
				errs <- err
				return
			}
			v++
		}
	}()
	wg.Add(1)
	go func() { // the reclaimer, with a grace period of nothing
		defer wg.Done()
		for !stop.Load() {
			if _, err := s.Reclaim(t.Context(), datastore.ReclaimOptions{Grace: time.Nanosecond, UploadGrace: time.Hour}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() { // readers
			defer wg.Done()
			for !stop.Load() {
				_, got, err := s.Get(t.Context(), p)
				if errors.Is(err, metastore.ErrUnavailable) {
					unavailable.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if len(got) != size || !bytes.Equal(got, []byte(pattern(size, got[0]))) {
					errs <- fmt.Errorf("read a mix of versions (%d bytes, first byte %d)", len(got), got[0])
					return
				}
				whole.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if whole.Load() == 0 {
		t.Fatalf("no read completed (%d gave up on a file changing under them)", unavailable.Load())
	}
	t.Logf("%d whole reads, %d gave up (file kept changing)", whole.Load(), unavailable.Load())
	_, got, err := s.Get(t.Context(), p)
	if err != nil || !bytes.Equal(got, []byte(pattern(size, versions))) {
		t.Fatalf("final read: %v", err)
	}
}
