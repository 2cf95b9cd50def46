package dynamofs_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/metastore"
)

// BenchmarkSyncSteps measures the datastore's sync steps on DynamoDB in
// requests by operation, beside the same benchmark of datastore/s3fs
// (docs/s3.md quotes both):
//
//	eval "$(scripts/dynamodb-local start)"
//	go test -run '^$' -bench SyncSteps -benchtime 20x ./datastore/dynamofs/
func BenchmarkSyncSteps(b *testing.B) {
	d := newDriverTB(b)
	s := datastore.New(d)
	ctx := b.Context()
	const part = "bench/1"
	for i := range 200 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/%s/h%03d", part, i%50), strings.NewReader("x"), nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Records().CASRecord(ctx, "lock/rec/ns/bench", metastore.ExpectAbsent(), []byte(`{"token":1}`)); err != nil {
		b.Fatal(err)
	}
	fence := datastore.Fence{Key: "lock/rec/ns/bench", Token: []byte(`{"token":1}`)}
	var paths []string
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("data/%s/h%03d", part, i))
	}
	step := func(name string, setup func(i int) any, op func(i int, x any) error) {
		b.Run(name, func(b *testing.B) {
			var total dynamofs.Stats
			for i := range b.N {
				var x any
				if setup != nil {
					x = setup(i)
				}
				before := d.Stats()
				if err := op(i, x); err != nil {
					b.Fatal(err)
				}
				delta := d.Stats().Sub(before)
				if total.Requests == nil {
					total.Requests = map[string]int64{}
				}
				for k, v := range delta.Requests {
					total.Requests[k] += v
				}
				total.ItemsRead += delta.ItemsRead
			}
			var ops []string
			for k := range total.Requests {
				ops = append(ops, k)
			}
			sort.Strings(ops)
			for _, k := range ops {
				b.ReportMetric(float64(total.Requests[k])/float64(b.N), k+"/op")
			}
			b.ReportMetric(float64(total.ItemsRead)/float64(b.N), "items/op")
		})
	}
	step("pull-nothing-changed", func(int) any {
		h, _ := s.Head(ctx, part)
		return h.Seq
	}, func(_ int, x any) error { _, _, err := s.Changes(ctx, part, x.(uint64), 1000); return err })
	step("pull-10-changes", func(int) any {
		h, _ := s.Head(ctx, part)
		for i := range 10 {
			s.Put(ctx, fmt.Sprintf("data/%s/p%d", part, i), strings.NewReader("y"), nil)
		}
		return h.Seq
	}, func(_ int, x any) error { _, _, err := s.Changes(ctx, part, x.(uint64), 1000); return err })
	step("stat-10-known-paths", nil, func(int, any) error { _, err := s.StatMany(ctx, paths); return err })
	step("get-1-small-file", nil, func(int, any) error { _, _, err := s.Get(ctx, paths[0]); return err })
	step("upload-1-small-file", nil, func(i int, _ any) error {
		_, err := s.Upload(ctx, fmt.Sprintf("data/%s/u%d", part, i%10), strings.NewReader("z"), nil)
		return err
	})
	step("commit-1-file-fenced", func(i int) any {
		st, _ := s.Upload(ctx, fmt.Sprintf("data/%s/c%d", part, i%10), strings.NewReader("z"), nil)
		return st
	}, func(_ int, x any) error {
		st := x.(datastore.Staged)
		_, err := s.Commit(ctx, &fence, []datastore.Entry{{Put: &st}})
		return err
	})
	step("commit-10-files-fenced", func(int) any {
		var es []datastore.Entry
		for j := range 10 {
			st, _ := s.Upload(ctx, fmt.Sprintf("data/%s/c%d", part, j), strings.NewReader("z"), nil)
			es = append(es, datastore.Entry{Put: &st})
		}
		return es
	}, func(_ int, x any) error { _, err := s.Commit(ctx, &fence, x.([]datastore.Entry)); return err })
}
