// Package storeurl opens a metastore.Store from a store URL, the one string
// by which users name a store on the command line and in LAKE_STORE.
//
// # Schemes
//
//	bolt://PATH          the embedded bbolt file at PATH (bolt://./lake.db, bolt:///var/lib/lake.db)
//	dynamodb://TABLE     Amazon DynamoDB, legacy table TABLE and companion TABLE_prefix_v2
//	http(s)://HOST:PORT  a lake serve node (token from LAKE_TOKEN or the file LAKE_TOKEN_FILE)
//
// A DynamoDB URL takes the table from LAKE_DYNAMODB_TABLE when TABLE is
// empty ("dynamodb://"), and these query parameters:
//
//	layout=auto|v1|v2    auto (default) follows the migration state; v1 or v2 force a layout
//	endpoint=URL         the DynamoDB endpoint (default: AWS_ENDPOINT_URL_DYNAMODB, or AWS's)
//	region=NAME          the AWS region (default: AWS_REGION or the profile's)
//
// Credentials, profiles and the rest come from the standard AWS
// configuration (environment, shared files).
//
// An unknown scheme, or a URL without one, is refused with an error that
// lists the supported schemes.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/nodeapi"
)

// Default is the store URL used when none is given.
const Default = "bolt://./lake.db"

// Options configure Open.
type Options struct {
	// Create creates what the URL names if it does not exist yet (a bolt
	// file, DynamoDB tables); without it a missing store is an error.
	Create bool
	// Init, with Create, also makes an existing file that is not a store (a
	// zero-byte file, another program's bbolt file) a bolt store: `lake
	// init` alone sets it.
	Init bool
	// ReadOnly opens a bolt file for reading only (a shared lock beside other
	// readers; the file is never written). Other stores ignore it.
	ReadOnly bool
}

// Open opens the store named by raw. opts may be nil.
func Open(ctx context.Context, raw string, opts *Options) (*metastore.Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("%w: store URL %q has no scheme; supported: %s", metastore.ErrInvalidArgument, nodeapi.RedactURL(raw), supported)
	}
	switch scheme {
	case "bolt":
		path, err := boltPath(rest)
		if err != nil {
			return nil, err
		}
		d, err := boltstore.Open(path, &boltstore.Options{Create: opts.Create, Init: opts.Init, ReadOnly: opts.ReadOnly})
		if err != nil {
			return nil, err
		}
		return metastore.New(d), nil
	case "http", "https":
		token, err := remotestore.TokenFromEnv() // LAKE_TOKEN, or the file named by LAKE_TOKEN_FILE
		if err != nil {
			return nil, err
		}
		d, err := remotestore.OpenURL(raw, token)
		if err != nil {
			return nil, err
		}
		return metastore.New(d), nil
	case "dynamodb":
		api, dopts, err := dynamoTarget(ctx, rest)
		if err != nil {
			return nil, err
		}
		if opts.Create {
			if err := dynamostore.Create(ctx, api, dopts); err != nil {
				return nil, err
			}
		}
		d, err := dynamostore.Open(ctx, api, dopts)
		if err != nil {
			return nil, err
		}
		return metastore.New(d), nil
	case "s3":
		// S3 writes one object at a time: the metastore's atomic
		// multi-key writes have nothing to stand on.
		return nil, fmt.Errorf("%w: %s holds only the datastore and its locks (lake data, lake lock); S3 has no atomic multi-object write for the metastore; supported: %s", metastore.ErrInvalidArgument, nodeapi.RedactURL(raw), supported)
	default:
		return nil, fmt.Errorf("%w: store URL scheme %q is not supported; supported: %s", metastore.ErrInvalidArgument, scheme, supported)
	}
}

const supported = "bolt://PATH, dynamodb://TABLE, http(s)://HOST:PORT"

// DynamoTarget is a parsed dynamodb:// URL.
type DynamoTarget struct {
	Table    string
	Layout   dynamostore.Layout
	Endpoint string
	Region   string
}

// ParseDynamo parses the part of a dynamodb:// URL after the scheme.
// Unknown parameters are refused, not ignored.
func ParseDynamo(rest string) (DynamoTarget, error) {
	bad := func(format string, args ...any) (DynamoTarget, error) {
		return DynamoTarget{}, fmt.Errorf("%w: dynamodb URL: "+format, append([]any{metastore.ErrInvalidArgument}, args...)...)
	}
	table, query, _ := strings.Cut(rest, "?")
	if strings.Contains(table, "/") {
		return bad("%q: a table name has no %q", table, "/")
	}
	if table == "" {
		table = os.Getenv("LAKE_DYNAMODB_TABLE")
	}
	if table == "" {
		return bad("no table: write dynamodb://TABLE or set LAKE_DYNAMODB_TABLE")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("bad query %q: %v", query, err)
	}
	t := DynamoTarget{Table: table, Layout: dynamostore.LayoutAuto}
	for k, v := range q {
		if len(v) != 1 {
			return bad("parameter %q given %d times", k, len(v))
		}
		switch k {
		case "layout":
			t.Layout = dynamostore.Layout(v[0])
			if t.Layout != dynamostore.LayoutAuto && t.Layout != dynamostore.LayoutV1 && t.Layout != dynamostore.LayoutV2 {
				return bad("layout %q: want auto, v1 or v2", v[0])
			}
		case "endpoint":
			u, err := url.Parse(v[0])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad("endpoint %q is not an http(s) URL", nodeapi.RedactURL(v[0]))
			}
			if p := u.Port(); p != "" {
				if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
					return bad("endpoint %q: port %s is outside 1..65535", nodeapi.RedactURL(v[0]), p)
				}
			}
			t.Endpoint = v[0]
		case "region":
			if v[0] == "" {
				return bad("empty region")
			}
			t.Region = v[0]
		default:
			return bad("unknown parameter %q (known: layout, endpoint, region)", k)
		}
	}
	return t, nil
}

// DynamoAPI returns a DynamoDB client and store options for a dynamodb://
// URL, for tools (benchmarks, migration) that manage tables themselves.
func DynamoAPI(ctx context.Context, raw string) (ddb.API, dynamostore.Options, error) {
	rest, ok := strings.CutPrefix(raw, "dynamodb://")
	if !ok {
		return nil, dynamostore.Options{}, fmt.Errorf("%w: %q is not a dynamodb:// store URL", metastore.ErrInvalidArgument, raw)
	}
	return dynamoTarget(ctx, rest)
}

func dynamoTarget(ctx context.Context, rest string) (ddb.API, dynamostore.Options, error) {
	t, err := ParseDynamo(rest)
	if err != nil {
		return nil, dynamostore.Options{}, err
	}
	cfg, err := ddb.LoadConfig(ctx, t.Region, config.WithLogger(sdkLogger))
	if errors.Is(err, ddb.ErrNoRegion) {
		return nil, dynamostore.Options{}, fmt.Errorf("%w: no AWS region: set AWS_REGION or add ?region= to the store URL", metastore.ErrInvalidArgument)
	}
	if err != nil {
		return nil, dynamostore.Options{}, err
	}
	c := ddb.NewClient(cfg, t.Endpoint)
	// The migrator reads the v1 table's stream on the same endpoint.
	return c, dynamostore.Options{Table: t.Table, Layout: t.Layout, Streams: dynamostore.StreamsClientOf(c)}, nil
}

// sdkLogger routes the AWS SDK's own log lines (such as its warning when
// it falls back to IMDSv1 while looking for credentials) into lake's logger,
// slog.Default, at debug: an error is reported once, as lake's one
// "lake: " line, never preceded by the SDK's differently shaped ones.
var sdkLogger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
	slog.Debug("aws sdk: "+fmt.Sprintf(format, v...), "classification", string(c))
})

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
