package s3fs_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// BenchmarkSyncSteps measures what each step of a sync costs on S3, in
// requests by kind per operation (the figures docs/s3.md quotes):
//
//	eval "$(scripts/s3-local start)"
//	go test -run '^$' -bench SyncSteps -benchtime 20x ./datastore/s3fs/
//
// Each step runs on a partition with a history of 200 commits, so a cost
// that grew with history would show.
func BenchmarkSyncSteps(b *testing.B) {
	d := newDriver(b)
	// The fenced commits below check the fence as a holder more than a
	// second after its acquisition does, with a read of the lock record;
	// commit-1-file-after-acquire, as a sync's commit right after its
	// acquisition (ownwrite.go).
	d.SetOwnWriteAge(0)
	s := datastore.New(d)
	s.SetLayout(d.FreshLayout()) // a new datastore's (models-v5: the index in the heads, a commit visible by its head)
	ctx := b.Context()
	const part = "bench/1"
	for i := range 200 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/h%03d", part, i%50), strings.NewReader("x"), nil); err != nil {
			b.Fatal(err)
		}
	}
	l, err := lock.New(dslock.New(datastore.New(d)), nil)
	if err != nil {
		b.Fatal(err)
	}
	ls, err := l.Acquire(ctx, "ns/bench") // the Locker has now seen the record
	if err != nil {
		b.Fatal(err)
	}
	ls.Release(ctx)
	var lease *lock.Lease
	b.Run("acquire", func(b *testing.B) {
		measure(b, d, func(int) error {
			if lease != nil {
				lease.Release(ctx)
			}
			lease, err = l.Acquire(ctx, "ns/bench")
			return err
		})
	})
	fence := *dslock.Fence(lease)
	b.Run("fence", func(b *testing.B) {
		measure(b, d, func(int) error { return d.AppendFence(ctx, fence, []string{part}) })
	})
	b.Run("pull-nothing-changed", func(b *testing.B) {
		h, _ := s.Head(ctx, part)
		measure(b, d, func(int) error { _, _, err := s.Changes(ctx, part, h.Seq, 1000); return err })
	})
	b.Run("pull-10-changes", func(b *testing.B) {
		measure(b, d, func(int) error {
			b.StopTimer()
			before := d.Requests()
			h, _ := s.Head(ctx, part)
			for i := range 10 {
				s.Put(ctx, fmt.Sprintf("data/%s/p%d", part, i), strings.NewReader("y"), nil)
			}
			undo(d, before) // only the pull is measured
			b.StartTimer()
			_, _, err := s.Changes(ctx, part, h.Seq, 1000)
			return err
		})
	})
	var paths []string
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("data/%s/h%03d", part, i))
	}
	b.Run("stat-10-known-paths", func(b *testing.B) {
		measure(b, d, func(int) error { _, err := s.StatMany(ctx, paths); return err })
	})
	b.Run("get-1-small-file", func(b *testing.B) {
		measure(b, d, func(int) error { _, _, err := s.Get(ctx, paths[0]); return err })
	})
	var staged []datastore.Staged
	b.Run("upload-1-small-file", func(b *testing.B) {
		staged = staged[:0]
		measure(b, d, func(i int) error {
			st, err := s.Upload(ctx, fmt.Sprintf("data/%s/u%d", part, i%10), strings.NewReader("z"), nil)
			staged = append(staged, st)
			return err
		})
	})
	// commitOne measures a fenced commit of one small file; with acquired,
	// the holder's own write of the record a moment before is its check:
	// the record is rewritten (the same bytes) before each commit, outside
	// the count.
	commitOne := func(b *testing.B, acquired bool) {
		if acquired {
			d.SetOwnWriteAge(time.Hour)
			defer d.SetOwnWriteAge(0)
		}
		measure(b, d, func(i int) error {
			b.StopTimer()
			before := d.Requests()
			if acquired {
				if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectValue(fence.Token), fence.Token); err != nil {
					return err
				}
			}
			st, err := s.Upload(ctx, fmt.Sprintf("data/%s/c%d", part, i%10), strings.NewReader("z"), nil)
			if err != nil {
				return err
			}
			undo(d, before)
			b.StartTimer()
			_, err = s.Commit(ctx, &fence, []datastore.Entry{{Put: &st}})
			return err
		})
	}
	b.Run("commit-1-file-fenced", func(b *testing.B) { commitOne(b, false) })
	b.Run("commit-1-file-after-acquire", func(b *testing.B) { commitOne(b, true) })
	b.Run("commit-10-files-fenced", func(b *testing.B) {
		measure(b, d, func(i int) error {
			b.StopTimer()
			before := d.Requests()
			var es []datastore.Entry
			for j := range 10 {
				st, err := s.Upload(ctx, fmt.Sprintf("data/%s/c%d", part, j), strings.NewReader("z"), nil)
				if err != nil {
					return err
				}
				es = append(es, datastore.Entry{Put: &st})
			}
			undo(d, before)
			b.StartTimer()
			_, err := s.Commit(ctx, &fence, es)
			return err
		})
	})
	b.Run("renew", func(b *testing.B) {
		// A renewal is the lock package's fenced write of the expiry
		// record; measured on a record of its own.
		st := dslock.New(datastore.New(d))
		key := "exp/ns/bench-renew"
		st.Create(ctx, key, []byte("0"))
		cur, _ := st.Get(ctx, key)
		measure(b, d, func(i int) error {
			next := []byte(fmt.Sprint(i, "-", len(cur)))
			err := st.Fenced(ctx, lease.Fence(), lock.Mutation{Key: key, Old: cur, Value: next})
			cur = next
			return err
		})
	})
	b.Run("release", func(b *testing.B) {
		if lease != nil {
			lease.Release(ctx)
		}
		measure(b, d, func(int) error {
			b.StopTimer()
			before := d.Requests()
			var err error
			if lease, err = l.Acquire(ctx, "ns/bench"); err != nil {
				return err
			}
			undo(d, before)
			b.StartTimer()
			return lease.Release(ctx)
		})
	})
}

// undo is a marker that the requests since before are setup, not measured:
// measure subtracts them (see setup).
func undo(d *s3fs.Driver, before s3fs.Counts) {
	now := d.Requests()
	setup.Put += now.Put - before.Put
	setup.Get += now.Get - before.Get
	setup.Head += now.Head - before.Head
	setup.List += now.List - before.List
	setup.Delete += now.Delete - before.Delete
}

// setup accumulates the requests of setup work inside measured loops.
var setup s3fs.Counts

// measure runs op b.N times and reports the requests it sent per op.
func measure(b *testing.B, d *s3fs.Driver, op func(i int) error) {
	b.Helper()
	setup = s3fs.Counts{}
	before := d.Requests()
	b.ResetTimer()
	for i := range b.N {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := d.Requests()
	n := float64(b.N)
	b.ReportMetric(float64(after.Put-before.Put-setup.Put)/n, "PUT/op")
	b.ReportMetric(float64(after.Get-before.Get-setup.Get)/n, "GET/op")
	b.ReportMetric(float64(after.Head-before.Head-setup.Head)/n, "HEAD/op")
	b.ReportMetric(float64(after.List-before.List-setup.List)/n, "LIST/op")
	b.ReportMetric(float64(after.Delete-before.Delete-setup.Delete)/n, "DELETE/op")
}
