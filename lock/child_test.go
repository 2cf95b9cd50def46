package lock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/storeurl"
)

// childEnv carries a childConfig to a test binary started as a contender.
const childEnv = "LAKE_LOCK_TEST_CHILD"

// childConfig is what one contending process does.
type childConfig struct {
	Store string `json:"store"`
	Mode  string `json:"mode"` // "mutex", "fenced" or "nonce"
	Name  string `json:"name"`
	ID    string `json:"id"`
	// Acquisitions (mutex) or Duration (fenced, nonce) bound the run.
	Acquisitions int           `json:"acquisitions"`
	Duration     time.Duration `json:"duration"`
	Lease        time.Duration `json:"lease"`
	Skew         time.Duration `json:"skew"`
	// Dir holds the occupancy file of the mutex mode.
	Dir string `json:"dir"`
	// Faults makes a share of storage operations fail (see faults).
	Faults bool `json:"faults"`
}

// event is one line of a contender's history, on its stdout.
type event struct {
	Ev    string    `json:"ev"` // "acq", "write", "violation", "done"
	Token uint64    `json:"tok,omitempty"`
	Prev  uint64    `json:"prev,omitempty"` // the register's token before a write
	At    time.Time `json:"at"`             // acq: when it returned; write: when it was sent
	OK    bool      `json:"ok,omitempty"`   // write: accepted
	Note  string    `json:"note,omitempty"`
	N     int       `json:"n,omitempty"`
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	os.Exit(m.Run())
}

func runChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	s, err := storeurl.Open(ctx, cfg.Store, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	h := &history{enc: json.NewEncoder(os.Stdout)}
	st := &faultyStorage{MetaStorage: Metastore(s), s: s, f: newFaults(cfg.Faults)}
	switch cfg.Mode {
	case "mutex":
		err = childMutex(ctx, cfg, st, s, h)
	case "fenced":
		err = childFenced(ctx, cfg, st, h)
	case "nonce":
		err = childNonce(ctx, cfg, st, h)
	default:
		err = fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, cfg.ID+": "+err.Error())
		return 1
	}
	h.emit(event{Ev: "done"})
	return 0
}

type history struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (h *history) emit(e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enc.Encode(e)
}

// childMutex acquires the lock cfg.Acquisitions times. While holding it,
// it creates an occupancy file exclusively (a second holder at once fails
// to) and increments a counter through the lease's fenced write.
func childMutex(ctx context.Context, cfg childConfig, st Storage, s *metastore.Store, h *history) error {
	l, err := New(st, &Options{Lease: cfg.Lease, Wait: time.Minute, Holder: cfg.ID})
	if err != nil {
		return err
	}
	occ := filepath.Join(cfg.Dir, "occupied")
	for i := range cfg.Acquisitions {
		err := l.WithLock(ctx, cfg.Name, func(ctx context.Context, ls *Lease) error {
			f, err := os.OpenFile(occ, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				h.emit(event{Ev: "violation", Token: uint64(ls.Token()), Note: err.Error(), N: i})
				return nil
			}
			f.Close()
			defer os.Remove(occ)
			return fencedIncrement(ctx, s, ls, "count/mutex")
		})
		if err != nil {
			return fmt.Errorf("acquisition %d: %w", i, err)
		}
	}
	return nil
}

// The register the fencing workload writes.
const registerKey = "register/fenced"

type registerValue struct {
	Token uint64 `json:"tok"`
	ID    string `json:"id"`
}

// writeRegister reads the register and writes this holder's token over it
// with write (a fenced write or a plain CAS), and records the write and
// whether it was accepted (read back when the outcome was unknown).
func writeRegister(ctx context.Context, s *metastore.Store, tok uint64, h *history, write func(metastore.Mutation) error) error {
	cur, err := s.Get(ctx, registerKey)
	exp := metastore.ExpectValue(cur)
	var prev registerValue
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		exp = metastore.ExpectAbsent()
	case err != nil:
		return err
	default:
		json.Unmarshal(cur, &prev)
	}
	var id [8]byte
	crand.Read(id[:])
	val, _ := json.Marshal(registerValue{Token: tok, ID: hex.EncodeToString(id[:])})
	sent := time.Now()
	err = write(metastore.Mutation{Key: registerKey, Expect: exp, Value: val})
	ok := err == nil
	if errors.Is(err, metastore.ErrUnavailable) {
		if v, gerr := s.Get(ctx, registerKey); gerr == nil && string(v) == string(val) {
			ok = true
		}
	}
	note := ""
	switch {
	case errors.Is(err, ErrLost) && errors.Is(err, metastore.ErrConflict):
		note = "refused by the fence"
	case errors.Is(err, ErrLost):
		note = "refused by the lease"
	}
	h.emit(event{Ev: "write", Token: tok, Prev: prev.Token, At: sent, OK: ok, Note: note})
	return err
}

// work is the time a holder spends between deciding to write and sending
// the write: where a pause (SIGSTOP, a GC, a slow disk) hurts.
const work = 25 * time.Millisecond

// childFenced holds the lock in turns until cfg.Duration has passed and
// writes the register through the lease, fenced.
func childFenced(ctx context.Context, cfg childConfig, st *faultyStorage, h *history) error {
	l, err := New(st, &Options{Lease: cfg.Lease, Wait: time.Minute, ClockSkew: cfg.Skew, Holder: cfg.ID})
	if err != nil {
		return err
	}
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		ls, err := l.Acquire(ctx, cfg.Name)
		if err != nil {
			return err
		}
		tok := uint64(ls.Token())
		h.emit(event{Ev: "acq", Token: tok, At: time.Now()})
		for i := range 6 {
			if ls.Err() != nil {
				break
			}
			time.Sleep(work)
			write := func(m metastore.Mutation) error { return ls.Write(ctx, m) }
			if i%2 == 1 {
				// A write already past the lease's own check when the
				// process was paused: only the store's fence stops it.
				write = func(m metastore.Mutation) error {
					err := st.WriteFenced(ctx, ls.Fence(), m)
					if errors.Is(err, metastore.ErrConflict) {
						if cur, gerr := st.MetaStorage.Get(ctx, ls.Fence().Key); gerr == nil && string(cur) != string(ls.Fence().Value) {
							return fmt.Errorf("%w: %w", ErrLost, err)
						}
					}
					return err
				}
			}
			writeRegister(ctx, st.s, tok, h, write)
		}
		ls.Release(ctx)
		time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
	}
	return nil
}

// nonceLock is the peers' design, kept as the negative control: a lock
// record holding a random nonce and an expiry, taken with a conditional
// write and renewed with one conditioned on the nonce; the holder writes
// the resource unconditionally on the lock (the "fencing token" is a nonce
// that no resource can order). Its Order counts acquisitions for the
// checker only.
type nonceRecord struct {
	Nonce   string    `json:"nonce"`
	Expires time.Time `json:"expires"`
	Order   uint64    `json:"order"`
	Holder  string    `json:"holder"`
}

func childNonce(ctx context.Context, cfg childConfig, st *faultyStorage, h *history) error {
	key := "nonce/" + cfg.Name
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		var mine nonceRecord
		var cur []byte
		for {
			b, err := st.Get(ctx, key)
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				continue
			}
			var old nonceRecord
			if b != nil {
				json.Unmarshal(b, &old)
			}
			if b != nil && time.Now().Before(old.Expires.Add(cfg.Skew)) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			var n [8]byte
			crand.Read(n[:])
			mine = nonceRecord{Nonce: hex.EncodeToString(n[:]), Expires: time.Now().Add(cfg.Lease), Order: old.Order + 1, Holder: cfg.ID}
			nb, _ := json.Marshal(mine)
			if b == nil {
				err = st.Create(ctx, key, nb)
			} else {
				err = st.Swap(ctx, key, b, nb)
			}
			if err == nil {
				cur = nb
				break
			}
		}
		h.emit(event{Ev: "acq", Token: mine.Order, At: time.Now()})
		var mu sync.Mutex
		held := true
		stop := make(chan struct{})
		go func() { // renewals, conditioned on the nonce
			t := time.NewTicker(cfg.Lease / 3)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				mu.Lock()
				next := mine
				next.Expires = time.Now().Add(cfg.Lease)
				nb, _ := json.Marshal(next)
				if err := st.Swap(ctx, key, cur, nb); err == nil {
					cur = nb
				} else if errors.Is(err, metastore.ErrConflict) {
					held = false
				}
				mu.Unlock()
			}
		}()
		for range 6 {
			mu.Lock()
			ok := held
			mu.Unlock()
			if !ok {
				break
			}
			time.Sleep(work)
			writeRegister(ctx, st.s, mine.Order, h, func(m metastore.Mutation) error { return st.cas(ctx, m) })
		}
		close(stop)
		mu.Lock()
		st.Swap(ctx, key, cur, []byte(`{"nonce":"","order":`+strconv.FormatUint(mine.Order, 10)+`}`))
		mu.Unlock()
		time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
	}
	return nil
}

// faults decides, for each storage operation, to fail it before sending
// (nothing applied), to apply it and lose the response (outcome unknown),
// or to refuse it as paused: the faults a lock meets on a real network and
// during a migration's finalization.
type faults struct {
	on bool
	mu sync.Mutex
	r  *rand.Rand
}

func newFaults(on bool) *faults {
	return &faults{on: on, r: rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))}
}

func (f *faults) decide(write bool) (pre error, lose bool) {
	if !f.on {
		return nil, false
	}
	f.mu.Lock()
	p := f.r.Float64()
	f.mu.Unlock()
	switch {
	case !write && p < 0.03:
		return fmt.Errorf("%w: injected read failure", metastore.ErrUnavailable), false
	case !write:
		return nil, false
	case p < 0.04:
		return fmt.Errorf("%w: injected request drop", metastore.ErrUnavailable), false
	case p < 0.08:
		return nil, true
	case p < 0.11:
		return fmt.Errorf("%w: injected pause", metastore.ErrWritesPaused), false
	}
	return nil, false
}

func (f *faults) write(apply func() error) error {
	pre, lose := f.decide(true)
	if pre != nil {
		return pre
	}
	if err := apply(); err != nil {
		return err
	}
	if lose {
		return fmt.Errorf("%w: injected lost response", metastore.ErrUnavailable)
	}
	return nil
}

// faultyStorage is the metastore lock storage with faults.
type faultyStorage struct {
	*MetaStorage
	s *metastore.Store
	f *faults
}

func (fs *faultyStorage) Get(ctx context.Context, key string) ([]byte, error) {
	if err, _ := fs.f.decide(false); err != nil {
		return nil, err
	}
	return fs.MetaStorage.Get(ctx, key)
}

func (fs *faultyStorage) Create(ctx context.Context, key string, v []byte) error {
	return fs.f.write(func() error { return fs.MetaStorage.Create(ctx, key, v) })
}

func (fs *faultyStorage) Swap(ctx context.Context, key string, old, v []byte) error {
	return fs.f.write(func() error { return fs.MetaStorage.Swap(ctx, key, old, v) })
}

func (fs *faultyStorage) Fenced(ctx context.Context, fence Record, m Mutation) error {
	return fs.f.write(func() error { return fs.MetaStorage.Fenced(ctx, fence, m) })
}

func (fs *faultyStorage) WriteFenced(ctx context.Context, fence Record, m metastore.Mutation) error {
	return fs.f.write(func() error { return fs.MetaStorage.WriteFenced(ctx, fence, m) })
}

// cas is the nonce design's resource write: conditioned on the resource
// alone, not on the lock.
func (fs *faultyStorage) cas(ctx context.Context, m metastore.Mutation) error {
	return fs.f.write(func() error { return fs.s.CAS(ctx, m.Key, m.Expect, m.Value) })
}
