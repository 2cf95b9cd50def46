package dynamofs_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
)

// TestLayoutProvedByTheCommit (issue 31): a Store opened with a remembered
// layout commits without reading the layout record: the commit's
// transaction checks it. When a hostile peer (the raw SDK) has changed the
// record, or deleted it, the commit is refused whole with ErrStaleLayout and
// writes nothing; with the record as remembered it applies and the layout
// is verified.
func TestLayoutProvedByTheCommit(t *testing.T) {
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	var gets atomic.Int32
	faulty := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		if op == "GetItem" {
			gets.Add(1)
		}
		return faultapi.None
	})
	ctx := t.Context()
	open := func(remembered *datastore.Layout) *datastore.Store {
		d, err := dynamofs.Open(ctx, faulty, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s, err := datastore.Open(ctx, d, &datastore.OpenOptions{Remembered: remembered})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	models := datastore.LayoutModels
	first := open(nil) // records models
	if _, err := first.Put(ctx, "data/a/b/c/d/1/raw", strings.NewReader("one"), nil); err != nil {
		t.Fatal(err)
	}
	rec := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k#" + datastore.LayoutKey},
		"sk": &types.AttributeValueMemberS{Value: datastore.LayoutKey}}
	setRecord := func(v string) {
		t.Helper()
		var err error
		if v == "" {
			_, err = raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: rec})
		} else {
			it := map[string]types.AttributeValue{"v": &types.AttributeValueMemberB{Value: []byte(v)}}
			for k, a := range rec {
				it[k] = a
			}
			_, err = raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, record string }{{"another layout", "type-id"}, {"none", ""}} {
		t.Run(c.name, func(t *testing.T) {
			setRecord(c.record)
			s := open(&models)
			gets.Store(0)
			_, err := s.Put(ctx, "data/a/b/c/d/1/raw", strings.NewReader("stale"), nil)
			if !errors.Is(err, datastore.ErrStaleLayout) || !strings.HasPrefix(err.Error(), "lake: ") || s.LayoutVerified() {
				t.Fatalf("a commit with a stale remembered layout: %v (verified %v), want ErrStaleLayout", err, s.LayoutVerified())
			}
			if _, got, err := first.Get(ctx, "data/a/b/c/d/1/raw"); err != nil || string(got) != "one" {
				t.Fatalf("after the refused commit the file reads %q, %v; want it untouched", got, err)
			}
			if n := gets.Load(); n != 0 {
				t.Fatalf("the refused commit read %d items with GetItem; want the check in its transaction", n)
			}
		})
	}
	setRecord("models")
	s := open(&models)
	gets.Store(0)
	if _, err := s.Put(ctx, "data/a/b/c/d/1/raw", strings.NewReader("two"), nil); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 0 || !s.LayoutVerified() {
		t.Fatalf("a commit with the layout as remembered: %d GetItems, verified %v; want none, verified", n, s.LayoutVerified())
	}
	if _, got, err := first.Get(ctx, "data/a/b/c/d/1/raw"); err != nil || string(got) != "two" {
		t.Fatalf("the file reads %q, %v; want two", got, err)
	}
}
