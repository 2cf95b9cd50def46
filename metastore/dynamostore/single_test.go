package dynamostore_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// onRetry is a plan that gives the first attempt of each logical PutItem the
// fault first and, just before its second attempt, runs between (another
// writer's turn). Other calls pass.
func onRetry(first faultapi.Fault, between func()) faultapi.Plan {
	var mu sync.Mutex
	attempts := map[string]int{}
	return func(op, token string) faultapi.Fault {
		if op != "PutItem" || token == "" {
			return faultapi.None
		}
		mu.Lock()
		attempts[token]++
		n := attempts[token]
		mu.Unlock()
		switch n {
		case 1:
			return first
		case 2:
			if between != nil {
				between()
			}
		}
		return faultapi.None
	}
}

// TestSingleItemWrites: where one item changes (v1, v2), Put and CAS are
// one conditional PutItem at one write unit, and each retry decision holds:
// a first-attempt condition failure is a conflict; after a lost response the
// store recognises its own applied write, reports another writer's value
// (which may have overwritten it) as an unknown outcome, never a conflict,
// and a retried write never applies a second time.
func TestSingleItemWrites(t *testing.T) {
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV1, dynamostore.LayoutV2} {
		t.Run(string(layout), func(t *testing.T) {
			api := faultapi.New(client(t), nil)
			opts := newTables(t, api, layout)
			opts.Retryer = fastRetries
			d := openDriver(t, api, opts)
			s := metastore.New(d)
			// other writes beside s, through the same tables without faults.
			other := metastore.New(openDriver(t, client(t), opts))
			ctx := t.Context()
			mustGet := func(key, want string) {
				t.Helper()
				got, err := s.Get(ctx, key)
				if err != nil || string(got) != want {
					t.Fatalf("%s = %q, %v; want %q", key, got, err, want)
				}
			}

			t.Run("one PutItem at one write unit", func(t *testing.T) {
				if err := s.Put(ctx, "tbl/cost", []byte("0")); err != nil { // registers the family
					t.Fatal(err)
				}
				before := d.Stats()
				if err := s.Put(ctx, "tbl/cost", []byte("1")); err != nil {
					t.Fatal(err)
				}
				if err := s.CAS(ctx, "tbl/cost", metastore.ExpectValue([]byte("1")), []byte("2")); err != nil {
					t.Fatal(err)
				}
				if err := s.CAS(ctx, "tbl/cost2", metastore.ExpectAbsent(), []byte("x")); err != nil {
					t.Fatal(err)
				}
				st := d.Stats().Sub(before)
				if st.Requests["PutItem"] != 3 || st.Requests["TransactWriteItems"] != 0 || st.WriteCapacity != 3 {
					t.Fatalf("3 small writes cost %v requests and %v write units; want 3 PutItem, 3 units", st.Requests, st.WriteCapacity)
				}
			})

			t.Run("first-attempt condition failure is a conflict", func(t *testing.T) {
				if err := s.CAS(ctx, "tbl/cost", metastore.ExpectValue([]byte("nope")), []byte("3")); !errors.Is(err, metastore.ErrConflict) {
					t.Fatalf("CAS on a wrong value: %v, want ErrConflict", err)
				}
				// A refusal that surely applied nothing (throttling) does not
				// make the next attempt's failed condition ambiguous.
				api.SetPlan(onRetry(faultapi.Throttle, nil))
				defer api.SetPlan(nil)
				if err := s.CAS(ctx, "tbl/cost", metastore.ExpectAbsent(), []byte("3")); !errors.Is(err, metastore.ErrConflict) {
					t.Fatalf("create over an existing key after throttling: %v, want ErrConflict", err)
				}
			})

			t.Run("own write applied", func(t *testing.T) {
				api.SetPlan(onRetry(faultapi.DropResponse, nil))
				defer api.SetPlan(nil)
				if err := s.CAS(ctx, "tbl/own", metastore.ExpectAbsent(), []byte("1")); err != nil {
					t.Fatalf("create with its response lost: %v", err)
				}
				if err := s.CAS(ctx, "tbl/own", metastore.ExpectValue([]byte("1")), []byte("2")); err != nil {
					t.Fatalf("swap with its response lost: %v", err)
				}
				if err := s.Put(ctx, "tbl/own", []byte("3")); err != nil {
					t.Fatalf("put with its response lost: %v", err)
				}
				mustGet("tbl/own", "3")
			})

			t.Run("someone else's value after a lost response", func(t *testing.T) {
				if err := s.Put(ctx, "tbl/race", []byte("0")); err != nil {
					t.Fatal(err)
				}
				n := 0
				api.SetPlan(onRetry(faultapi.DropResponse, func() {
					n++
					if err := other.Put(ctx, "tbl/race", []byte{'o', byte('0' + n)}); err != nil {
						t.Error(err)
					}
				}))
				defer api.SetPlan(nil)
				err := s.CAS(ctx, "tbl/race", metastore.ExpectValue([]byte("0")), []byte("1"))
				if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
					t.Fatalf("CAS applied then overwritten: %v, want ErrUnavailable", err)
				}
				mustGet("tbl/race", "o1")
				// The Put applied, another writer overwrote it: its retry must
				// not write again (the other writer's value would vanish).
				err = s.Put(ctx, "tbl/race", []byte("mine"))
				if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
					t.Fatalf("Put applied then overwritten: %v, want ErrUnavailable", err)
				}
				mustGet("tbl/race", "o2")
			})

			t.Run("unknown when the request was lost", func(t *testing.T) {
				if err := s.Put(ctx, "tbl/lost", []byte("0")); err != nil {
					t.Fatal(err)
				}
				api.SetPlan(onRetry(faultapi.DropRequest, nil))
				defer api.SetPlan(nil)
				// A lost request looks like a lost response: the retry may
				// only confirm, finds no token, and reports the outcome
				// unknown (here: not applied), for a CAS as for a Put.
				err := s.CAS(ctx, "tbl/lost", metastore.ExpectValue([]byte("0")), []byte("1"))
				if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
					t.Fatalf("CAS after a lost request: %v, want ErrUnavailable", err)
				}
				err = s.Put(ctx, "tbl/lost", []byte("2"))
				if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
					t.Fatalf("Put after a lost request: %v, want ErrUnavailable", err)
				}
				mustGet("tbl/lost", "0")
			})

			t.Run("a retried CAS never applies twice", func(t *testing.T) {
				if err := s.Put(ctx, "tbl/aba", []byte("A")); err != nil {
					t.Fatal(err)
				}
				// Our A→B applies and its response is lost; another writer
				// moves it B→A before our retry. Retrying under A would apply
				// A→B a second time.
				api.SetPlan(onRetry(faultapi.DropResponse, func() {
					if err := other.CAS(ctx, "tbl/aba", metastore.ExpectValue([]byte("B")), []byte("A")); err != nil {
						t.Error(err)
					}
				}))
				defer api.SetPlan(nil)
				err := s.CAS(ctx, "tbl/aba", metastore.ExpectValue([]byte("A")), []byte("B"))
				if !errors.Is(err, metastore.ErrUnavailable) {
					t.Fatalf("CAS A→B applied, then B→A by another writer: %v, want ErrUnavailable", err)
				}
				mustGet("tbl/aba", "A")
			})
		})
	}
}
