// Package storeurl opens a metastore.Store from a store URL, the one string
// by which users name a store on the command line and in LAKE_STORE.
//
// # Schemes
//
//	bolt://PATH          the embedded bbolt file at PATH (bolt://./lake.db, bolt:///var/lib/lake.db)
//
// An unknown scheme, or a URL without one, is refused with an error that
// lists the supported schemes.
package storeurl

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/backend/boltstore"
	"github.com/lakemeta/lake/metastore"
)

// Default is the store URL used when none is given.
const Default = "bolt://./lake.db"

// Options configure Open.
type Options struct {
	// Create creates what the URL names if it does not exist yet (a bolt
	// file, DynamoDB tables); without it a missing store is an error.
	Create bool
}

// Open opens the store named by raw. opts may be nil.
func Open(ctx context.Context, raw string, opts *Options) (*metastore.Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("%w: store URL %q has no scheme; supported: %s", metastore.ErrInvalidArgument, raw, supported)
	}
	switch scheme {
	case "bolt":
		path, err := boltPath(rest)
		if err != nil {
			return nil, err
		}
		d, err := boltstore.Open(path, &boltstore.Options{Create: opts.Create})
		if err != nil {
			return nil, err
		}
		return metastore.New(d), nil
	default:
		return nil, fmt.Errorf("%w: store URL scheme %q is not supported; supported: %s", metastore.ErrInvalidArgument, scheme, supported)
	}
}

const supported = "bolt://PATH"

// boltPath returns the file path of a bolt URL's remainder. Query strings
// and fragments are not part of a bolt URL and are refused rather than
// silently becoming part of a file name.
func boltPath(rest string) (string, error) {
	if rest == "" {
		return "", fmt.Errorf("%w: bolt URL has no file path (example: %s)", metastore.ErrInvalidArgument, Default)
	}
	if strings.ContainsAny(rest, "?#") {
		return "", fmt.Errorf("%w: bolt URL %q has a query or fragment; a bolt URL is bolt://PATH", metastore.ErrInvalidArgument, "bolt://"+rest)
	}
	return rest, nil
}
