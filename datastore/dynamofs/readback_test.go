package dynamofs_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// faultyDriver opens a driver on a fresh table through a fault-injecting
// client, with fast retries, and returns it with a raw client of the table
// (the hostile peer).
func faultyDriver(t *testing.T) (*dynamofs.Driver, *faultapi.API, *dynamodb.Client, string) {
	t.Helper()
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	api := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), nil)
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table,
		Retryer: ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 6, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})})
	if err != nil {
		t.Fatal(err)
	}
	return d, api, raw, table
}

// dropEveryOtherPut loses the response of PutItem calls 1, 3, 5, … after
// forwarding them (each write's first attempt, when its retry succeeds), by
// count rather than by the write's token, so that it also bites on a
// driver that stamps none.
func dropEveryOtherPut() faultapi.Plan {
	var mu sync.Mutex
	n := 0
	return func(op, _ string) faultapi.Fault {
		if op != "PutItem" {
			return faultapi.None
		}
		mu.Lock()
		defer mu.Unlock()
		if n++; n%2 == 1 {
			return faultapi.DropResponse
		}
		return faultapi.None
	}
}

// rawRecord writes a lock record as a client lake did not write would: no
// write token.
func rawRecord(t *testing.T, raw *dynamodb.Client, table, dir, key, value string) {
	t.Helper()
	_, err := raw.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k#" + dir}, "sk": &types.AttributeValueMemberS{Value: key},
		"v": &types.AttributeValueMemberB{Value: []byte(value)}}})
	if err != nil {
		t.Fatalf("raw PutItem: %v", err)
	}
}

// TestCASRecordLostResponseIsOwnWrite (issue 29): the response to a record
// write is lost after the write applied. The retry reads back the write's
// token and succeeds: a create and a swap are each applied once, and never
// reported as a conflict with themselves.
func TestCASRecordLostResponseIsOwnWrite(t *testing.T) {
	d, api, _, _ := faultyDriver(t)
	ctx := t.Context()
	api.SetPlan(dropEveryOtherPut())
	if err := d.CASRecord(ctx, "rec/ns/a", metastore.ExpectAbsent(), []byte("one")); err != nil {
		t.Fatalf("create after a lost response = %v, want nil (its own write)", err)
	}
	if err := d.CASRecord(ctx, "rec/ns/a", metastore.ExpectValue([]byte("one")), []byte("two")); err != nil {
		t.Fatalf("swap after a lost response = %v, want nil (its own write)", err)
	}
	api.SetPlan(nil)
	if v, err := d.GetRecord(ctx, "rec/ns/a"); err != nil || string(v) != "two" {
		t.Fatalf("record = %q, %v; want two", v, err)
	}
	if n := api.Injected()[faultapi.DropResponse]; n != 2 {
		t.Fatalf("%d responses dropped, want 2: the test did not test", n)
	}
}

// TestCASRecordForeignRecord (issue 29, hostile peer): a record a client
// lake did not write is in place. A create on it is a conflict; a create
// whose first response was lost and whose record a foreign writer replaced
// before the retry is unknown (ErrUnavailable), never a conflict and never
// applied over the foreign record.
func TestCASRecordForeignRecord(t *testing.T) {
	d, api, raw, table := faultyDriver(t)
	ctx := t.Context()
	rawRecord(t, raw, table, "rec/ns", "rec/ns/a", "foreign")
	err := d.CASRecord(ctx, "rec/ns/a", metastore.ExpectAbsent(), []byte("mine"))
	if !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("create over a foreign record = %v, want a conflict", err)
	}

	// The write lands, its response is lost, and a foreign writer replaces
	// the record before the retry.
	var once sync.Once
	first := true
	api.SetPlan(func(op, token string) faultapi.Fault {
		if op != "PutItem" {
			return faultapi.None
		}
		if first {
			first = false
			return faultapi.DropResponse
		}
		once.Do(func() { rawRecord(t, raw, table, "rec/ns", "rec/ns/b", "foreign") })
		return faultapi.None
	})
	err = d.CASRecord(ctx, "rec/ns/b", metastore.ExpectAbsent(), []byte("mine"))
	if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("create replaced after a lost response = %v, want unknown (ErrUnavailable), not a conflict", err)
	}
	api.SetPlan(nil)
	if v, err := d.GetRecord(ctx, "rec/ns/b"); err != nil || string(v) != "foreign" {
		t.Fatalf("record = %q, %v; the retry must not write over the foreign record", v, err)
	}
}

// TestLockLostAcquireResponse (issue 29): the response to every lock
// write's first attempt is lost. Each acquisition still returns at once
// (not after a lease: the holder recognises its own record), and the
// fencing tokens go 1, 2, 3, … with none skipped.
func TestLockLostAcquireResponse(t *testing.T) {
	d, api, _, _ := faultyDriver(t)
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	api.SetPlan(dropEveryOtherPut())
	l, err := lock.New(dslock.New(s), &lock.Options{Lease: 4 * time.Second, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var last lock.Token
	for i := range 4 {
		start := time.Now()
		ls, err := l.Acquire(t.Context(), "ns/sync")
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("acquire %d took %v: the holder waited for its own record", i, took)
		}
		if tok := ls.Token(); i > 0 && tok != last+1 {
			t.Fatalf("acquire %d: token %v after %v, want the next one (none skipped)", i, tok, last)
		} else {
			last = tok
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if n := api.Injected()[faultapi.DropResponse]; n < 4 {
		t.Fatalf("%d responses dropped: the test did not test", n)
	}
}
