package datastore

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// checkedRecords validates keys and prefixes once, for every driver.
type checkedRecords struct{ d Records }

// RecordPrefixOK reports whether prefix names at least two whole segments,
// as ListRecords requires.
func RecordPrefixOK(prefix string) bool {
	first, rest, ok := strings.Cut(prefix, "/")
	if !ok || first == "" {
		return false
	}
	second, _, ok := strings.Cut(rest, "/")
	return ok && second != ""
}

func (c checkedRecords) GetRecord(ctx context.Context, key string) ([]byte, error) {
	if err := metastore.ValidateKey(key); err != nil {
		return nil, err
	}
	return c.d.GetRecord(ctx, key)
}

func (c checkedRecords) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	if err := metastore.ValidateKey(key); err != nil {
		return err
	}
	if err := metastore.ValidateValue(value); err != nil {
		return err
	}
	if err := checkLayoutWrite(key, expect.Absent(), value); err != nil { // layout.go
		return err
	}
	return c.d.CASRecord(ctx, key, expect, nonNil(value))
}

func (c checkedRecords) DeleteRecord(ctx context.Context, key string, expected []byte) error {
	if err := metastore.ValidateKey(key); err != nil {
		return err
	}
	if err := checkLayoutWrite(key, false, nil); err != nil {
		return err
	}
	return c.d.DeleteRecord(ctx, key, nonNil(expected))
}

func (c checkedRecords) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	if !RecordPrefixOK(prefix) {
		return nil, fmt.Errorf("%w: record prefix %q does not name two whole segments (like %q)", metastore.ErrInvalidArgument, prefix, "rec/NS/")
	}
	return c.d.ListRecords(ctx, prefix)
}

func (c checkedRecords) FencedRecord(ctx context.Context, fence Fence, key string, expect metastore.Expect, value []byte) error {
	for _, k := range []string{fence.Key, key} {
		if err := metastore.ValidateKey(k); err != nil {
			return err
		}
	}
	if fence.Key == key {
		return fmt.Errorf("%w: fence and target are the same record %q", metastore.ErrInvalidArgument, key)
	}
	if err := metastore.ValidateValue(value); err != nil {
		return err
	}
	if err := checkLayoutWrite(key, false, nil); err != nil {
		return err
	}
	return c.d.FencedRecord(ctx, fence, key, expect, nonNil(value))
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
