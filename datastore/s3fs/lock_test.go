package s3fs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/lock/locktest"
	"github.com/lakemeta/lake/metastore"
)

func TestLockStorage(t *testing.T) {
	locktest.RunStorageTests(t, func(t *testing.T) lock.Storage { return dslock.New(datastore.New(newDriver(t))) })
}

// register is the file the workloads increment: its metadata holds the
// count and the token of the holder that wrote it; its content is the count
// repeated over several chunks, so that a reader that mixed two versions
// would see two counts.
const register = "data/reg/1/counter"

type regMeta struct {
	Count int    `json:"count"`
	Token uint64 `json:"token"`
}

func regContent(count int) []byte {
	line := fmt.Sprintf("%09d\n", count)
	return bytes.Repeat([]byte(line), (2*datastore.ChunkSize+777)/len(line))
}

// readRegister returns the register's count (0 when absent), checking that
// its content is one version whole.
func readRegister(ctx context.Context, s *datastore.Store) (int, error) {
	info, data, err := s.Get(ctx, register)
	if errors.Is(err, metastore.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var m regMeta
	if err := json.Unmarshal(info.Meta, &m); err != nil {
		return 0, fmt.Errorf("register metadata %q: %v", info.Meta, err)
	}
	if !bytes.Equal(data, regContent(m.Count)) {
		return 0, fmt.Errorf("partial or mixed file: %d bytes do not hold count %d whole", len(data), m.Count)
	}
	return m.Count, nil
}

// increment is one locked update of the register at the Go API level, as a
// sync under `lake data run` does it: the holder appends a fence entry to
// the log it will write, reads, uploads, commits fenced, and the caller
// releases. fenced=false is the negative control: no fence entry and an
// unfenced commit, the lease checked only before the work (what a lock
// without fencing tokens offers).
func increment(ctx context.Context, s *datastore.Store, d *s3fs.Driver, ls *lock.Lease, fenced bool, pause func()) (count int, err error) {
	// The lease's own check, before the work: a holder paused after it
	// (and past its lease) is stopped by nothing but the store's fence.
	if err := ls.Err(); err != nil {
		return 0, err
	}
	fence := *dslock.Fence(ls)
	if fenced {
		if err := d.AppendFence(ctx, fence, []string{datastore.Partition(register)}); err != nil {
			return 0, err
		}
	}
	cur, err := readRegister(ctx, s)
	if err != nil {
		return 0, err
	}
	meta, _ := json.Marshal(regMeta{Count: cur + 1, Token: uint64(ls.Token())})
	st, err := s.Upload(ctx, register, bytes.NewReader(regContent(cur+1)), meta)
	if err != nil {
		return 0, err
	}
	if pause != nil {
		pause()
	}
	if fenced {
		_, err = s.Commit(ctx, &fence, []datastore.Entry{{Put: &st}})
	} else {
		_, err = s.Commit(ctx, nil, []datastore.Entry{{Put: &st}})
	}
	return cur + 1, err
}

// visibleWrites returns the register's writes as readers see them: its
// changes in position order, one page of one change at a time so that none
// is folded into a later one.
func visibleWrites(t *testing.T, s *datastore.Store) []regMeta {
	t.Helper()
	var out []regMeta
	after := uint64(0)
	for {
		ch, upTo, err := s.Changes(t.Context(), datastore.Partition(register), after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch {
			var m regMeta
			if err := json.Unmarshal(c.Meta, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		if upTo == after {
			return out
		}
		after = upTo
	}
}

// checkHistory is the fencing checker, where "accepted" means "visible to
// readers": in the order readers see them, no write carries a token below
// one already seen (a stale holder's write visible after a newer holder's),
// and every write's count is one more than the one before it (no update
// lost).
func checkHistory(ws []regMeta) (violations []string) {
	var maxTok uint64
	prev := 0
	for i, w := range ws {
		if w.Token < maxTok {
			violations = append(violations, fmt.Sprintf("write %d (count %d) of token %d visible after token %d", i, w.Count, w.Token, maxTok))
		}
		if w.Count != prev+1 {
			violations = append(violations, fmt.Sprintf("write %d has count %d after count %d: an update was lost", i, w.Count, prev))
		}
		maxTok = max(maxTok, w.Token)
		prev = w.Count
	}
	return violations
}

// childEnv carries a childConfig to the test binary started as a holder.
const childEnv = "LAKE_S3FS_TEST_CHILD"

type childConfig struct {
	Bucket, Prefix, ID string
	Fenced             bool
	Duration, Lease    time.Duration
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	os.Exit(m.Run())
}

// runChild increments the register under the lock until its time is up,
// printing one line per outcome: "ok", "refused" (the store's fence
// refused a write) or "lost" (the lease said it was lost before the write).
func runChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	d, err := openURL(ctx, cfg.Bucket, cfg.Prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s := freshStore(d)
	l, err := lock.New(dslock.New(s), &lock.Options{Lease: cfg.Lease, Wait: time.Minute, ClockSkew: time.Second, Holder: cfg.ID})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		ls, err := l.Acquire(ctx, "ns/register")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for range 3 {
			_, err := increment(ctx, s, d, ls, cfg.Fenced, nil)
			switch {
			case err == nil:
				fmt.Println("ok")
			case datastore.IsFenceConflict(err):
				fmt.Println("refused")
			case errors.Is(err, lock.ErrLost):
				fmt.Println("lost")
			default:
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err != nil {
				break
			}
		}
		ls.Release(ctx)
	}
	return 0
}

// holderIndex reads which child ("pN") holds the lock, or -1.
func holderIndex(ctx context.Context, d *s3fs.Driver) int {
	l, err := lock.New(dslock.New(datastore.New(d)), nil)
	if err != nil {
		return -1
	}
	info, err := l.Inspect(ctx, "ns/register")
	if err != nil || !info.Held {
		return -1
	}
	i, err := strconv.Atoi(strings.TrimPrefix(info.Holder, "p"))
	if err != nil {
		return -1
	}
	return i
}

// TestLockClockIsServers: a Locker on S3 stamps its records with the
// server's clock as estimated from its responses (lock.Clock); versitygw
// runs on this host, so the estimate must agree with the host's clock
// within a Date's second.
func TestLockClockIsServers(t *testing.T) {
	d := newDriver(t)
	st := dslock.New(datastore.New(d))
	if d := time.Since(st.Now()).Abs(); d > 1500*time.Millisecond {
		t.Fatalf("server clock estimate is %v away from this host's (same host)", d)
	}
	l, err := lock.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(t.Context(), "ns/clock")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(t.Context())
	info, err := l.Inspect(t.Context(), "ns/clock")
	if err != nil || info.Acquired.IsZero() || time.Since(info.Acquired).Abs() > 2*time.Second {
		t.Fatalf("acquired at %v (%v), now %v", info.Acquired, err, time.Now())
	}
}
