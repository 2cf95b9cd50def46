package treesync_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

const (
	counterPath = "data/shared/1/counter"
	blobPath    = "data/shared/1/blob"
	notePath    = "data/shared/1/note"
)

// blob is a multi-chunk file whose first line names its own SHA-256 of the
// rest, so that a reader can tell a whole file from a partial one.
func blob(n int) []byte {
	body := strings.Repeat(fmt.Sprintf("counter %d\n", n), (datastore.ChunkSize+1000)/10)
	sum := sha256.Sum256([]byte(body))
	return []byte(hex.EncodeToString(sum[:]) + "\n" + body)
}

func wholeBlob(b []byte) bool {
	head, body, ok := strings.Cut(string(b), "\n")
	sum := sha256.Sum256([]byte(body))
	return ok && head == hex.EncodeToString(sum[:])
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// slowLock waits long enough for ten workers queued on one lock under -race.
var slowLock = &lock.Options{Lease: 5 * time.Second, Wait: 3 * time.Minute}

// TestConcurrentWorkers runs ten workers, each with its own directory,
// through the seed's loop at once: a counter and a multi-chunk file on a
// shared model under one namespace (Run), a note changed outside the lock
// and synced on the shared model (conflicts), and files of its own model
// under its own namespace. No increment is lost, no pulled file is ever
// partial (a reader checks the directories throughout), every note commit
// extends the one its writer had seen (a lost update would give two
// commits the same parent), and conflicts are reported, never overwritten.
func TestConcurrentWorkers(t *testing.T) {
	const workers, iterations = 10, 2
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		trees := make([]*treesync.Tree, workers)
		ownDirs := make([]string, workers)
		for i := range ownDirs {
			ownDirs[i] = t.TempDir()
		}
		for i := range trees {
			trees[i] = newTree(t, s, &treesync.Options{Namespace: "shared", Lock: slowLock})
		}
		seed := newTree(t, s, &treesync.Options{Namespace: "shared"})
		write(t, seed, notePath, "root")
		sync(t, seed, treesync.Scope{})

		stop := make(chan struct{})
		var partial atomic.Int64
		var readerWG gosync.WaitGroup
		readerWG.Add(1)
		go func() {
			defer readerWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, tr := range trees {
					if b, err := os.ReadFile(filepath.Join(tr.Dir(), blobPath)); err == nil && !wholeBlob(b) {
						partial.Add(1)
					}
				}
			}
		}()

		var increments, conflicts atomic.Int64
		var mu gosync.Mutex
		parents := map[string]string{} // note hash → the note hash it replaced
		var wg gosync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tr := trees[w]
				// Its own namespace has its own files: its own directory.
				own, err := treesync.Open(ownDirs[w], s, &treesync.Options{Namespace: fmt.Sprintf("w%d", w), Lock: fastLock})
				if err != nil {
					errs <- err
					return
				}
				resolver, err := treesync.Open(tr.Dir(), s, &treesync.Options{Namespace: "shared", Prefer: treesync.PreferRemote, Lock: slowLock})
				if err != nil {
					errs <- err
					return
				}
				for i := range iterations {
					// The counter: read, increment, write, under the lock.
					_, err := tr.Run(ctx, treesync.Scope{Models: []string{"shared/1"}}, func(ctx context.Context, ls *lock.Lease) error {
						n := 0
						if b, err := os.ReadFile(filepath.Join(tr.Dir(), counterPath)); err == nil {
							n, _ = strconv.Atoi(string(b))
						}
						if b, err := os.ReadFile(filepath.Join(tr.Dir(), blobPath)); err == nil && !wholeBlob(b) {
							return fmt.Errorf("pulled a partial blob")
						}
						os.MkdirAll(filepath.Join(tr.Dir(), "data/shared/1"), 0o755)
						// Its own write is atomic too, so the reader checks what pulls wrote.
						tmp := filepath.Join(tr.Dir(), "data/shared/1/.blob.tmp")
						if err := os.WriteFile(tmp, blob(n+1), 0o644); err != nil {
							return err
						}
						if err := os.Rename(tmp, filepath.Join(tr.Dir(), blobPath)); err != nil {
							return err
						}
						return os.WriteFile(filepath.Join(tr.Dir(), counterPath), []byte(strconv.Itoa(n+1)), 0o644)
					}, treesync.RunOptions{})
					if err != nil {
						errs <- fmt.Errorf("worker %d counter run %d: %w", w, i, err)
						return
					}
					increments.Add(1)

					// The note: changed outside the lock, then synced.
					prev, _ := os.ReadFile(filepath.Join(tr.Dir(), notePath))
					next := []byte(fmt.Sprintf("worker %d iteration %d after %s", w, i, hashOf(prev)))
					os.WriteFile(filepath.Join(tr.Dir(), notePath), next, 0o644)
					_, err = tr.Sync(ctx, treesync.Scope{})
					var ce *treesync.ConflictError
					switch {
					case errors.As(err, &ce):
						conflicts.Add(1)
						if _, err := resolver.Sync(ctx, treesync.Scope{}); err != nil {
							errs <- fmt.Errorf("worker %d resolving: %w", w, err)
							return
						}
					case err != nil:
						errs <- fmt.Errorf("worker %d note sync %d: %w", w, i, err)
						return
					default:
						mu.Lock()
						if _, dup := parents[hashOf(next)]; dup {
							mu.Unlock()
							errs <- fmt.Errorf("note %q committed twice", next)
							return
						}
						parents[hashOf(next)] = hashOf(prev)
						mu.Unlock()
					}

					// Its own model, its own namespace: never contends.
					p := fmt.Sprintf("data/w%d/1/iter-%d", w, i)
					os.MkdirAll(filepath.Join(own.Dir(), filepath.Dir(p)), 0o755)
					os.WriteFile(filepath.Join(own.Dir(), p), []byte(p), 0o644)
					if _, err := own.Sync(ctx, treesync.Scope{Models: []string{fmt.Sprintf("w%d/1", w)}}); err != nil {
						errs <- fmt.Errorf("worker %d own sync %d: %w", w, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		readerWG.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := partial.Load(); n > 0 {
			t.Fatalf("a reader saw %d partial blobs", n)
		}
		shared, err := s.Namespace("shared")
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := shared.Get(ctx, counterPath)
		if err != nil || string(got) != strconv.Itoa(workers*iterations) {
			t.Fatalf("counter = %q, %v; want %d (lost updates)", got, err, workers*iterations)
		}
		if _, b, err := shared.Get(ctx, blobPath); err != nil || !wholeBlob(b) {
			t.Fatalf("remote blob: %v (whole %v)", err, wholeBlob(b))
		}
		// Every committed note has a distinct parent, and the chain from the
		// remote note back to the root passes through every one of them.
		seenParent := map[string]string{}
		for child, parent := range parents {
			if other, dup := seenParent[parent]; dup {
				t.Fatalf("notes %s and %s both replaced %s: a lost update", other, child, parent)
			}
			seenParent[parent] = child
		}
		_, cur, _ := shared.Get(ctx, notePath)
		h, chain := hashOf(cur), 0
		for h != hashOf([]byte("root")) {
			p, ok := parents[h]
			if !ok {
				t.Fatalf("remote note %s is not a commit any worker made", h)
			}
			h, chain = p, chain+1
		}
		if chain != len(parents) {
			t.Fatalf("the note's history holds %d commits, workers made %d", chain, len(parents))
		}
		for w := range workers {
			ns, err := s.Namespace(fmt.Sprintf("w%d", w))
			if err != nil {
				t.Fatal(err)
			}
			if files, err := s.ListAll(ctx, fmt.Sprintf("data/w%d/", w)); err != nil || len(files) != 0 {
				t.Fatalf("worker %d's model leaked into the default namespace: %d files (%v)", w, len(files), err)
			}
			files, err := ns.ListAll(ctx, fmt.Sprintf("data/w%d/", w))
			if err != nil || len(files) != iterations {
				t.Fatalf("worker %d's model holds %d files (%v), want %d", w, len(files), err, iterations)
			}
		}
		t.Logf("%d increments, %d note commits, %d conflicts reported", increments.Load(), len(parents), conflicts.Load())
	})
}
