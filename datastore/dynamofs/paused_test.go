package dynamofs_test

import (
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultproxy"
)

// TestPausedHolderAtEveryRequest (issue 28, item 1, on DynamoDB): the
// paused takeover of dstest, A's requests paused by a proxy between it and
// DynamoDB.
func TestPausedHolderAtEveryRequest(t *testing.T) {
	proxy, err := faultproxy.Start(ddblocal.Endpoint(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var p dstest.Pauser
	proxy.SetDecider(func(op string) faultproxy.Fault { p.Before(op); return faultproxy.None })
	cfgA := ddblocal.Config(t)
	cfgA.BaseEndpoint = &proxy.URL
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	open := func(api ddb.API) *datastore.Store {
		d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		return s
	}
	dstest.RunPausedTakeover(t, open(ddb.NewClient(cfgA, "")), open(ddb.NewClient(ddblocal.Config(t), "")), &p)
}
