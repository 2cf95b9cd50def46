package dynamofs_test

import (
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

// TestNamespaceRecordReadIsRegistration (issue 31): a process that read
// its namespace's record (a sync reads it for the lifecycle policy) commits
// without register's conditional put; one that did not read it still puts
// it. A foreign writer (the raw SDK) that deletes the record is not
// believed away for good: the next process finds no record and its first
// commit registers the namespace again.
func TestNamespaceRecordReadIsRegistration(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	raw := ddblocal.Client(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	var puts atomic.Int32
	faulty := faultapi.New(api, func(op, _ string) faultapi.Fault {
		if op == "PutItem" {
			puts.Add(1)
		}
		return faultapi.None
	})
	ctx := t.Context()
	// process opens the table as a new process would: its caches empty.
	process := func() *datastore.Store {
		d, err := dynamofs.Open(ctx, faulty, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s, err := datastore.Open(ctx, d, nil) // reads the layout, as lake does
		if err != nil {
			t.Fatal(err)
		}
		ns, err := s.Namespace("ns")
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	listed := func() bool {
		all, err := process().Namespaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(all, func(c datastore.NamespaceConfig) bool { return c.Name == "ns" })
	}
	if _, err := process().Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if !listed() {
		t.Fatal("a first commit did not register the namespace")
	}
	puts.Store(0)
	// A process that did not read the record registers it (one put).
	if _, err := process().Put(ctx, "data/m/1/a2", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if n := puts.Swap(0); n != 1 {
		t.Fatalf("a commit of a process that did not read the record made %d PutItems; want register's one", n)
	}
	// A sync's process: the policy read, then the commit.
	ns := process()
	if _, err := ns.Config(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	if n := puts.Swap(0); n != 0 {
		t.Fatalf("a commit after the record was read made %d PutItems; want none", n)
	}
	// The hostile peer deletes the record.
	k := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k#datastore/namespaces"},
		"sk": &types.AttributeValueMemberS{Value: "datastore/namespaces/ns"}}
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: k}); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Fatal("the namespace is still listed after its record was deleted")
	}
	ns = process()
	if c, err := ns.Config(ctx); err != nil || c.Lifecycle != (datastore.Lifecycle{}) {
		t.Fatalf("Config with the record deleted = %+v, %v; want the zero policy", c, err)
	}
	if _, err := ns.Put(ctx, "data/m/1/c", strings.NewReader("c"), nil); err != nil {
		t.Fatal(err)
	}
	if !listed() {
		t.Fatal("a sync after the record was deleted did not register the namespace again")
	}
}
