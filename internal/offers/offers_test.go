package offers

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestOldOffersDoNotPileUp: offers too old to be taken are dropped by a
// later offer, at most once every age; fresh ones are kept. The values
// hold a slice, so a sweep that compared them by value would panic.
func TestOldOffersDoNotPileUp(t *testing.T) {
	s := New[[]int](time.Second)
	old := time.Now().Add(-2 * time.Second)
	for i := range 1000 {
		s.putAt(fmt.Sprintf("m/%d", i), []int{i}, old)
	}
	if n := s.Len(); n != 1000 {
		t.Fatalf("%d offers before the sweep; want 1000", n)
	}
	s.Put("m/new", []int{1})
	s.Put("m/newer", []int{2}) // within age of the sweep: no second sweep needed
	if n := s.Len(); n != 2 {
		t.Fatalf("%d offers kept; want the 2 fresh ones", n)
	}
	if v, ok := s.Take("m/new"); !ok || len(v) != 1 || v[0] != 1 {
		t.Fatalf("Take(m/new) = %v, %v", v, ok)
	}
	if _, ok := s.Get("m/new"); ok {
		t.Fatal("a taken offer stays")
	}
	if _, ok := s.Get("m/newer"); !ok {
		t.Fatal("Get of a fresh offer finds nothing")
	}
	if _, ok := s.Get("m/newer"); !ok {
		t.Fatal("Get removed the offer")
	}
	s.Drop("m/newer")
	if _, ok := s.Get("m/newer"); ok {
		t.Fatal("a dropped offer stays")
	}
}

// TestTooOldIsNotTaken: an offer past its age is neither got nor taken,
// even before a sweep removes it.
func TestTooOldIsNotTaken(t *testing.T) {
	s := New[string](time.Second)
	s.swept.Store(time.Now().UnixNano()) // no sweep on this put
	s.putAt("k", "v", time.Now().Add(-2*time.Second))
	if _, ok := s.Get("k"); ok {
		t.Fatal("Get returned an offer past its age")
	}
	if _, ok := s.Take("k"); ok {
		t.Fatal("Take returned an offer past its age")
	}
}

// TestShelfConcurrent: offers put, got, taken and swept from many
// goroutines at once (run with -race).
func TestShelfConcurrent(t *testing.T) {
	s := New[[]byte](time.Millisecond)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := fmt.Sprintf("%d/%d", g, i%7)
				s.Put(k, []byte{byte(i)})
				if v, ok := s.Get(k); ok && len(v) != 1 {
					t.Errorf("Get(%s) = %v", k, v)
				}
				if i%3 == 0 {
					s.Take(k)
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Millisecond)
	s.Put("last", nil) // sweeps everything older than a millisecond
	if n := s.Len(); n != 1 {
		t.Fatalf("%d offers after the last sweep; want 1", n)
	}
}
