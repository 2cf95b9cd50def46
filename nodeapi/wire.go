package nodeapi

import (
	"time"

	"github.com/lakemeta/lake/datastore"
)

// APIPrefix starts every path of the API proper: the paths a node with a
// token guards, and whose query parameters it checks. HealthPath,
// ReadyPath and MetricsPath are outside it.
const APIPrefix = "/v1/"

// Headers of the API, and the scheme of its token. Every /v1/ request to a
// node with a token carries AuthorizationHeader: BearerScheme + " " +
// TOKEN. A conditional write of a value carries IfMatchHeader (the ETag of
// the expected value) or IfNoneMatchHeader "*" (expects no value); a value
// comes back with ETagHeader.
const (
	AuthorizationHeader = "Authorization"
	BearerScheme        = "Bearer"
	IfMatchHeader       = "If-Match"
	IfNoneMatchHeader   = "If-None-Match"
	ETagHeader          = "ETag"
)

// Query parameters of ListPath (a page of the store's List) and of
// CatalogPath (a paged read of the node's catalog copy).
const (
	ListPrefixParam   = "prefix"
	ListLimitParam    = "limit"
	ListCursorParam   = "cursor"
	CatalogAfterParam = "after"
	CatalogLimitParam = "limit"
)

// Query parameters of the datastore's endpoints. DataNamespaceParam names
// the namespace of a request (a request without it is the root's, the
// default namespace; records are the root's in every namespace, so a
// DataRecord request never carries it). A chunk is DataChunk with
// DataChunkVersion (the file version) and DataChunkIndex (the chunk's
// number from 0), and, on a PUT, DataChunkStarted.
const (
	DataNamespaceParam = "namespace"
	DataChunkVersion   = "version"
	DataChunkIndex     = "i"
)

// DataDrop is the operation of datastore.Driver.DropPartition.
const DataDrop = "drop"

// DataDropRequest is the body of DataDrop. Now is the client's clock, as a
// commit's is (the dropped versions are replaced at it); zero means the
// node's.
type DataDropRequest struct {
	Fence     *datastore.Fence `json:"fence,omitempty"`
	Partition string           `json:"partition"`
	Now       time.Time        `json:"now"`
}

// The operations of a DataRecordRequest (its Op), on the datastore's lock
// records: one per method of datastore.Records.
const (
	DataRecordGet    = "get"
	DataRecordCAS    = "cas"
	DataRecordDelete = "delete"
	DataRecordList   = "list"
	DataRecordFenced = "fenced"
)

// DataCheck is the operation of datastore.Checker (lake data check): the
// node runs the check on its own driver, in the request's namespace, and
// answers the datastore.CheckReport. A repair is a write: it needs the
// namespace lock's fence (the node refuses a repair without one, since it
// would run unfenced) and passes the node's write admission.
const DataCheck = "check"

// DataCheckRequest is the body of DataCheck: datastore.CheckOptions on the
// wire. Fence is given with Repair and only then. Now is the client's
// clock, as a commit's is (quarantined objects are named by it); zero
// means the node's.
type DataCheckRequest struct {
	Repair bool             `json:"repair,omitempty"`
	Chunks bool             `json:"chunks,omitempty"`
	Fence  *datastore.Fence `json:"fence,omitempty"`
	Now    time.Time        `json:"now"`
}
