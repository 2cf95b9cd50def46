// Package dsurl opens a datastore from a store URL, the same URL that names
// the metastore:
//
//	bolt://PATH       buckets of their own in the bbolt file at PATH (made by `lake init`, `lake data init` or the first write)
//	dynamodb://TABLE  the DynamoDB table TABLE_files (created by `lake data init`)
//	s3://BUCKET/PREFIX  objects under PREFIX/ in the S3 bucket BUCKET (created by `lake data init`)
//	http(s)://HOST    the datastore a node (`lake serve`) serves (token from LAKE_TOKEN or LAKE_TOKEN_FILE)
//
// A dynamodb:// URL takes the same parameters as the metastore's (endpoint,
// region; layout is the metastore's and ignored here). An s3:// URL takes
// the standard AWS variables; AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL)
// names a local server, addressed path-style.
package dsurl

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/remotefs"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/nodeapi"
	"github.com/lakemeta/lake/storeurl"
)

// Options configure Open.
type Options struct {
	// Create creates what the URL names if it does not exist (the bolt file
	// and the datastore's buckets in it, the DynamoDB table, the S3 bucket):
	// `lake data init`. Without it a missing or zero-byte bolt file is an
	// error naming `lake init`.
	Create bool
	// ReadOnly opens a bolt file for reading only (a shared lock; the file
	// keeps every byte), for the commands that only read. Other stores
	// ignore it.
	ReadOnly bool
	// Remembered is passed to datastore.Open (OpenOptions.Remembered): the
	// datastore's layout as the caller read it before, so that Open sends
	// no request. Ignored with Create.
	Remembered *datastore.Layout
}

// Open opens the datastore named by raw. opts may be nil.
func Open(ctx context.Context, raw string, opts *Options) (*datastore.Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("%w: store URL %q has no scheme; the datastore supports bolt://PATH and dynamodb://TABLE", metastore.ErrInvalidArgument, nodeapi.RedactURL(raw))
	}
	switch scheme {
	case "bolt":
		if rest == "" || strings.ContainsAny(rest, "?#") {
			return nil, fmt.Errorf("%w: bolt URL %q: want bolt://PATH", metastore.ErrInvalidArgument, raw)
		}
		d, err := boltfs.Open(rest, &boltfs.Options{Create: opts.Create, ReadOnly: opts.ReadOnly && !opts.Create})
		if err != nil {
			return nil, err
		}
		return open(ctx, d, opts)
	case "dynamodb":
		api, o, err := storeurl.DynamoAPI(ctx, raw)
		if err != nil {
			return nil, err
		}
		table := o.Table + dynamofs.TableSuffix
		if opts.Create {
			if err := dynamofs.Create(ctx, api, table); err != nil {
				return nil, err
			}
		}
		d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: table})
		if err != nil {
			return nil, err
		}
		return open(ctx, d, opts)
	case "s3":
		d, err := openS3(ctx, rest, opts.Create)
		if err != nil {
			return nil, err
		}
		return open(ctx, d, opts)
	case "http", "https":
		token, err := remotestore.TokenFromEnv()
		if err != nil {
			return nil, err
		}
		d, err := remotefs.Open(ctx, raw, &remotefs.Options{Token: token})
		if err != nil {
			return nil, err
		}
		return open(ctx, d, opts)
	default:
		return nil, fmt.Errorf("%w: the datastore does not support %s://; use bolt://PATH, dynamodb://TABLE, s3://BUCKET/PREFIX or http(s)://HOST:PORT", metastore.ErrInvalidArgument, scheme)
	}
}

// open returns the Store over d with the datastore's layout (datastore.Open:
// one record read), closing d if that fails.
func open(ctx context.Context, d datastore.Driver, opts *Options) (*datastore.Store, error) {
	oo := &datastore.OpenOptions{ReadOnly: opts.ReadOnly && !opts.Create}
	if !opts.Create {
		oo.Remembered = opts.Remembered
	}
	s, err := datastore.Open(ctx, d, oo)
	if err != nil {
		d.Close()
		return nil, err
	}
	return s, nil
}
