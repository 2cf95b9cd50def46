package catalog

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestFoldTakesThePullsRead (issue 31, FoldOptions.Pulled): after
// something besides this process's commits moved the index (another
// process's commit: in the seed's loop, the lifecycle's drop), a sync's
// pull reads the changed partitions from the cursor the fold also holds;
// the fold takes that read, moved past the sync's commit, instead of
// reading again, and writes the rows a read would. A commit another
// process lands after the pull, in another partition, is the next fold's
// (never lost); one in the commit's own partition makes the fold read; a
// read from another cursor is not taken.
func TestFoldTakesThePullsRead(t *testing.T) {
	for _, b := range []string{"dynamodb", "s3"} {
		t.Run(b, func(t *testing.T) {
			ctx := t.Context()
			var c *dynamodb.Client
			var table, bucket string
			switch b {
			case "dynamodb":
				c, table = datastoreTable(t)
			case "s3":
				bucket = s3local.Bucket(t)
			}
			open := func() *datastore.Store { // a process of its own
				var d datastore.Driver
				switch b {
				case "dynamodb":
					dd, err := dynamofs.Open(ctx, c, dynamofs.Options{Table: table})
					if err != nil {
						t.Fatal(err)
					}
					d = dd
				case "s3":
					sd, err := s3fs.Open(ctx, s3local.Client(t), s3fs.Options{Bucket: bucket, Prefix: "pulled"})
					if err != nil {
						t.Fatal(err)
					}
					d = sd
				}
				ds, err := datastore.Open(ctx, d, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ds.Close() })
				ns, err := ds.Namespace("cur")
				if err != nil {
					t.Fatal(err)
				}
				return ns
			}
			ns := open()
			f := newFoldFixture(t, ns.Root())
			other := open()
			r := newFoldRun(t, ns, f.fence)
			put, fold, pull := r.put, r.fold, r.pull
			mine, theirs, later := pickModels(b)
			// A first fold, no cursor recorded yet: the pull's read from
			// the start, moved past the commit; the record written.
			p := pull()
			own := put(ns, mine)
			fold(FoldOptions{Committed: own, Pulled: p}, true, mine)
			if f.record() != r.cursor {
				t.Fatalf("the cursor's record %q; want the fold's %q", f.record(), r.cursor)
			}

			// Another process commits; the pull reads it; then this
			// process's commit: the fold takes the pull's read.
			put(other, theirs)
			p = pull()
			own = put(ns, mine)
			fold(FoldOptions{Committed: own, Pulled: p}, true, mine, theirs)

			// The same without the pull's read: the fold reads.
			put(other, theirs)
			pull()
			own = put(ns, mine)
			fold(FoldOptions{Committed: own}, false, mine, theirs)

			// Another process commits after the pull, elsewhere: this
			// fold leaves it, the next one folds it.
			p = pull()
			put(other, later)
			own = put(ns, mine)
			fold(FoldOptions{Committed: own, Pulled: p}, true, mine)
			fold(FoldOptions{}, false, later)

			// In the commit's own partition: the fold reads.
			p = pull()
			put(other, mine)
			own = put(ns, mine)
			fold(FoldOptions{Committed: own, Pulled: p}, false, mine)

			// A read from another cursor is not taken (another
			// process's commit first, so that the pull's answer is not
			// the fold's cursor itself).
			put(other, theirs)
			p = pull()
			p.From += "x"
			own = put(ns, mine)
			fold(FoldOptions{Committed: own, Pulled: p}, false, mine, theirs)
		})
	}
}

// pickModels names three models in partitions of their own; on DynamoDB
// in three shards (a commit on a commit's own shard makes its move
// unprovable there, as one in its partition does on S3).
func pickModels(backend string) (mine, theirs, later string) {
	var got []string
	for i := 0; len(got) < 3; i++ {
		m := fmt.Sprintf("m/%d", i)
		ok := true
		for _, g := range got {
			if backend == "dynamodb" && dynamofs.ShardOf(m) == dynamofs.ShardOf(g) {
				ok = false
			}
		}
		if ok {
			got = append(got, m)
		}
	}
	return got[0], got[1], got[2]
}
