package remotefs

import (
	"context"
	"net/http"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/nodeclient"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

func (d *Driver) record(ctx context.Context, req nodeapi.DataRecordRequest) (nodeapi.DataRecordResponse, error) {
	var r nodeapi.DataRecordResponse
	err := d.call(ctx, http.MethodPost, nodeapi.DataRecord, req, &r)
	return r, err
}

func expectReq(req nodeapi.DataRecordRequest, expect metastore.Expect) nodeapi.DataRecordRequest {
	if expect.Absent() {
		req.ExpectAbsent = true
	} else {
		req.Expect = expect.Value()
	}
	return req
}

// GetRecord implements datastore.Records.
func (d *Driver) GetRecord(ctx context.Context, key string) ([]byte, error) {
	r, err := d.record(ctx, nodeapi.DataRecordRequest{Op: nodeapi.DataRecordGet, Key: key})
	if err != nil {
		return nil, err
	}
	if r.Value == nil {
		return []byte{}, nil
	}
	return r.Value, nil
}

// CASRecord implements datastore.Records.
func (d *Driver) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	_, err := d.record(ctx, expectReq(nodeapi.DataRecordRequest{Op: nodeapi.DataRecordCAS, Key: key, Value: value}, expect))
	return err
}

// DeleteRecord implements datastore.Records.
func (d *Driver) DeleteRecord(ctx context.Context, key string, expected []byte) error {
	_, err := d.record(ctx, nodeapi.DataRecordRequest{Op: nodeapi.DataRecordDelete, Key: key, Expect: expected})
	return err
}

// ListRecords implements datastore.Records.
func (d *Driver) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	r, err := d.record(ctx, nodeapi.DataRecordRequest{Op: nodeapi.DataRecordList, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	return nodeclient.Items(r.Items), nil
}

// FencedRecord implements datastore.Records.
func (d *Driver) FencedRecord(ctx context.Context, fence datastore.Fence, key string, expect metastore.Expect, value []byte) error {
	_, err := d.record(ctx, expectReq(nodeapi.DataRecordRequest{Op: nodeapi.DataRecordFenced, Key: key, Value: value, Fence: &fence}, expect))
	return err
}
