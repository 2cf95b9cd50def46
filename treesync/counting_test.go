package treesync_test

import (
	"maps"
	stdsync "sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/internal/s3local"
)

// countingDynamoStore opens a datastore on a fresh DynamoDB Local table
// through a client wrapper that counts every request by operation, as the
// wire sees them; sent returns the counts so far.
func countingDynamoStore(t *testing.T) (s *datastore.Store, sent func() map[string]int) {
	t.Helper()
	var mu stdsync.Mutex
	ops := map[string]int{}
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	counted := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		mu.Lock()
		ops[op]++
		mu.Unlock()
		return faultapi.None
	})
	d, err := dynamofs.Open(t.Context(), counted, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s = datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(ops)
	}
}

// newS3Store opens a new datastore (layout models-v2) under prefix of a
// fresh bucket of the test's S3 server, and returns its driver too (its
// Requests count what it sent).
func newS3Store(t *testing.T, prefix string) (*datastore.Store, *s3fs.Driver) {
	t.Helper()
	return openS3Store(t, s3local.Client(t), s3local.Bucket(t), prefix)
}

// openS3Store opens the datastore under prefix of bucket through api (a
// test's wrapper of the server's client), and returns its driver too.
func openS3Store(t *testing.T, api s3fs.API, bucket, prefix string) (*datastore.Store, *s3fs.Driver) {
	t.Helper()
	d, err := s3fs.Open(t.Context(), api, s3fs.Options{Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	s, err := datastore.Open(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, d
}
