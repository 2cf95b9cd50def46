package syncload

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestMeterCountsCarriedCommits: a commit that carries the catalog fold
// (datastore.CommitFollower) writes the fold's entries and its cursor's
// record too (DynamoDB in its transaction, S3 after it), and the meter
// counts them among the items the commit wrote (a record write as
// CASRecord counts one); so does a drop carrying
// the removal of a catalog row (datastore.CommitRider). Before, a carried
// commit's entries were counted by no Commit of the meter: the harness's
// items written per sync left out every carried row.
func TestMeterCountsCarriedCommits(t *testing.T) {
	t.Run("s3", func(t *testing.T) {
		prefix := fmt.Sprintf("metercarried/%d", time.Now().UnixNano())
		d, err := s3fs.Open(t.Context(), s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		meterCountsCarried(t, d)
	})
	t.Run("dynamodb", func(t *testing.T) {
		table := ddblocal.TableName(t)
		ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
		d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		meterCountsCarried(t, d)
	})
}

// meterCountsCarried is TestMeterCountsCarriedCommits over d.
func meterCountsCarried(t *testing.T, d datastore.Driver) {
	ctx := t.Context()
	m := newMeter(d, DefaultConfig(), "default", nil)
	s := datastore.New(m)
	fence := &datastore.Fence{Key: "lock/rec/default/sync", Token: []byte(`{"token":5}`)}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Put(ctx, "default/m/1", strings.NewReader("row 0"), nil); err != nil {
		t.Fatal(err)
	}
	written := func() int64 {
		m.root().mu.Lock()
		defer m.root().mu.Unlock()
		return m.root().c.ItemsWritten
	}

	row, err := cat.Upload(ctx, "default/m/1", strings.NewReader("row 1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &datastore.RecordWrite{Key: "datastore/catalog/default", Expect: metastore.ExpectAbsent(), Value: []byte("cursor")}
	fctx, f := s.WithCommitFollower(ctx, func([]datastore.Info, func(string) ([]datastore.Head, string, bool)) *datastore.CommitRider {
		return cat.FollowingCommit(ctx, fence, []datastore.Entry{{Put: &row}}, rec)
	})
	file, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := written()
	if _, err := s.Commit(fctx, fence, []datastore.Entry{{Put: &file}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Carried(); !ok {
		t.Fatal("the fold was not carried")
	}
	if got := written() - before; !rec.Written() || got != 3 {
		t.Fatalf("a commit of one file carrying one row and the cursor's record (written %v) counted %d items written, want 3", rec.Written(), got)
	}

	// A drop carrying the row's removal: the model's file and definition,
	// and the row.
	if _, err := s.Put(ctx, "data/m/2/model.yaml", strings.NewReader("type: m\n"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, fence, []datastore.Entry{{Delete: "data/m/2/model.yaml"}}); err != nil {
		t.Fatal(err)
	}
	rider := cat.CommitRider(fence, []string{"default/m/1"})
	if rider == nil {
		t.Fatal("no rider")
	}
	before = written()
	st, dropped, err := s.DropPartitionIfDeleted(datastore.WithCommitRider(ctx, rider), fence, "m/2", "data/m/2/model.yaml")
	if err != nil || !dropped {
		t.Fatalf("drop: %v, %v", dropped, err)
	}
	if _, ok := rider.Carried(); !ok {
		t.Fatal("the row's removal was not carried")
	}
	if got, want := written()-before, int64(st.Files+st.Tombstones+1); got != want {
		t.Fatalf("a drop of %d entries carrying a row's removal counted %d items written, want %d", st.Files+st.Tombstones, got, want)
	}
}
