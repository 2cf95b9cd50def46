package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// serveData opens the datastore the node serves beside the metastore: on a
// bolt file, its own buckets in the very file the node holds, under the same
// guard and poison (one process holds a bolt file, so this is how several
// processes share it; the buckets are made by the first datastore write, so
// a node that only serves reads leaves the file as it found it); on
// DynamoDB, TABLE_files if `lake data init` made it (else none, with a
// warning); through another node, none.
func serveData(ctx context.Context, url string, store *metastore.Store, logger *slog.Logger) (*datastore.Store, error) {
	if bd, ok := store.Driver().(*boltstore.Driver); ok {
		d, err := boltfs.New(bd.File())
		if err != nil {
			return nil, err
		}
		// The node records the datastore's layout if the file has none
		// yet (datastore.Open), so that every client reads the same one.
		return datastore.Open(ctx, d, nil)
	}
	if !strings.HasPrefix(url, "dynamodb://") {
		return nil, nil
	}
	data, err := dsurl.Open(ctx, url, nil)
	if err != nil {
		logger.Warn("serving no datastore (run `lake data init` to create it)", "err", err)
		return nil, nil
	}
	return data, nil
}
