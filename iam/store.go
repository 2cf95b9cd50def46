package iam

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/storeurl"
)

// ForStore fills p from a store URL: the table, or the bucket and prefix,
// and, for a dynamodb:// store whose state p does not name, the migration
// state read from the store itself (a strongly consistent read; nothing is
// written). The region comes from p, else the URL's ?region=, else the AWS
// configuration; the account from p, else AWS_ACCOUNT_ID, else the
// configured credentials' account.
func ForStore(ctx context.Context, storeURL string, p Params) (Params, error) {
	scheme, rest, _ := strings.Cut(storeURL, "://")
	switch scheme {
	case "dynamodb":
		t, err := storeurl.ParseDynamo(rest)
		if err != nil {
			return p, err
		}
		p.Table = t.Table
		if p.Region == "" {
			p.Region = t.Region
		}
	case "s3":
		b, pre, err := s3fs.ParseURL(rest)
		if err != nil {
			return p, err
		}
		p.Bucket, p.Prefix = b, strings.TrimSuffix(pre, "/")
	case "":
		if p.ReshapeTable == "" {
			return p, fmt.Errorf("%w: iam policy: --store names no store", metastore.ErrInvalidArgument)
		}
	default:
		return p, fmt.Errorf("%w: iam policy: a %s:// store runs on no AWS service; a policy is for dynamodb:// or s3://", metastore.ErrInvalidArgument, scheme)
	}
	if p.Region == "" || p.Account == "" {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err == nil {
			if p.Region == "" {
				p.Region = cfg.Region
			}
			if p.Account == "" {
				p.Account = os.Getenv("AWS_ACCOUNT_ID")
			}
			if p.Account == "" && cfg.Credentials != nil {
				if c, err := cfg.Credentials.Retrieve(ctx); err == nil {
					p.Account = c.AccountID
				}
			}
		}
	}
	if scheme == "dynamodb" && p.State == "" {
		st, err := readState(ctx, storeURL)
		if err != nil {
			return p, err
		}
		p.State = st
	}
	return p, nil
}

// readState reads the migration state of a dynamodb:// store.
func readState(ctx context.Context, storeURL string) (string, error) {
	s, err := storeurl.Open(ctx, storeURL, nil)
	if err != nil {
		return "", fmt.Errorf("%w (or name the state with --state)", err)
	}
	defer s.Close()
	d, ok := s.Driver().(*dynamostore.Driver)
	if !ok {
		return "", errors.New("lake: iam policy: the store is not a DynamoDB store")
	}
	m, err := d.Primitives().ReadMigration(ctx)
	if err != nil {
		return "", err
	}
	if m.Standalone {
		return StateStandalone, nil
	}
	return string(m.State), nil
}
