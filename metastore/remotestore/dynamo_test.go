package remotestore_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/metastore/storetest"
	"github.com/lakemeta/lake/server"
)

// TestConformanceOverDynamoDB: the remote store passes the suite against a
// live node backed by DynamoDB (layout v2, on DynamoDB Local).
func TestConformanceOverDynamoDB(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store {
		api := ddb.NewClient(ddblocal.Config(t), "")
		opts := ddblocal.Tables(t, api, dynamostore.Options{Layout: dynamostore.LayoutV2})
		d, err := dynamostore.Open(context.Background(), api, opts)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(metastore.New(d), &server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		rd, err := remotestore.New(ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		client := metastore.New(rd)
		t.Cleanup(func() { client.Close(); ts.Close() })
		return client
	})
}
