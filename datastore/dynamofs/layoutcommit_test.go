package dynamofs_test

import (
	"errors"
	"slices"
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
	maxCommit := 0 // the driver's own
	open := func(remembered *datastore.Layout) *datastore.Store {
		d, err := dynamofs.Open(ctx, faulty, dynamofs.Options{Table: table, MaxCommit: maxCommit})
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
	// staged: a commit of more entries than one transaction takes
	// (MaxCommit 2 here), staged under a commit record (whole.go): the
	// check rides in its first write, the registration of its partitions.
	staged := func(s *datastore.Store, content string) error {
		var entries []datastore.Entry
		for _, p := range []string{"data/a/b/c/d/1/raw", "data/a/b/c/d/2/raw", "data/e/f/1/raw", "data/e/f/2/raw", "data/e/f/3/raw"} {
			st, err := s.Upload(ctx, p, strings.NewReader(content), nil)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, datastore.Entry{Put: &st})
		}
		_, err := s.Commit(ctx, nil, entries)
		return err
	}
	for _, c := range []struct{ name, record string }{{"another layout", "type-id"}, {"none", ""}} {
		for _, big := range []bool{false, true} {
			name := c.name
			if big {
				name += ", staged"
			}
			t.Run(name, func(t *testing.T) {
				setRecord(c.record)
				if big {
					maxCommit = 2
					defer func() { maxCommit = 0 }()
				}
				s := open(&models)
				gets.Store(0)
				var err error
				if big {
					err = staged(s, "stale")
				} else {
					_, err = s.Put(ctx, "data/a/b/c/d/1/raw", strings.NewReader("stale"), nil)
				}
				if !errors.Is(err, datastore.ErrStaleLayout) || !strings.HasPrefix(err.Error(), "lake: ") || s.LayoutVerified() {
					t.Fatalf("a commit with a stale remembered layout: %v (verified %v), want ErrStaleLayout", err, s.LayoutVerified())
				}
				if _, got, err := first.Get(ctx, "data/a/b/c/d/1/raw"); err != nil || string(got) != "one" {
					t.Fatalf("after the refused commit the file reads %q, %v; want it untouched", got, err)
				}
				if n := gets.Load(); n != 0 {
					t.Fatalf("the refused commit read %d items with GetItem; want the check in its transaction", n)
				}
				if parts, err := first.Partitions(ctx); err != nil || slices.Contains(parts, "e/f") {
					t.Fatalf("after the refused commit the partitions are %q (%v); want e/f not registered", parts, err)
				}
			})
		}
	}
	setRecord("models")
	maxCommit = 2
	s := open(&models)
	gets.Store(0)
	if err := staged(s, "staged"); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 0 || !s.LayoutVerified() {
		t.Fatalf("a staged commit with the layout as remembered: %d GetItems, verified %v; want none, verified", n, s.LayoutVerified())
	}
	if _, got, err := first.Get(ctx, "data/e/f/3/raw"); err != nil || string(got) != "staged" {
		t.Fatalf("the staged file reads %q, %v; want staged", got, err)
	}
	maxCommit = 0
	s = open(&models)
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
