package nodeapi

import (
	"time"

	"github.com/lakemeta/lake/datastore"
)

// DataPrefix starts the datastore's endpoints: DataPrefix + one of the
// Data* operations below. Every operation but the chunks is a POST of a
// JSON request answered with JSON (or 204); a chunk is PUT and GET as raw
// bytes at DataChunk?version=V&i=N. Each maps one to one onto a method of
// datastore.Driver, which the node runs on its own datastore.
const (
	DataPrefix            = "/v1/data/"
	DataInfo              = "info"
	DataUpload            = "upload"
	DataChunk             = "chunk"
	DataCommit            = "commit"
	DataStat              = "stat"
	DataList              = "list"
	DataHead              = "head"
	DataChanges           = "changes"
	DataPartitions        = "partitions"
	DataChangedPartitions = "changed-partitions"
	DataReclaim           = "reclaim"
	DataRecord            = "record"
)

// DataChunkStarted is the chunk PUT's parameter that names when its upload
// intent began (RFC 3339 with nanoseconds, as the DataUpload request's
// Started): a node whose backend keys intents by their start time (DynamoDB,
// S3) stores a chunk only under a live intent, and refuses a PUT without it.
const DataChunkStarted = "started"

// DataMaxCommit bounds the entries of one commit through a node, so that a
// commit body (each entry's metadata up to 64 KiB) stays bounded.
const DataMaxCommit = 100

// DataMaxWholeCommit bounds the entries of one commit through a node whose
// datastore commits whole (issue 30: a commit of any size is atomic there,
// so a client sends it in one request rather than DataMaxCommit at a time).
const DataMaxWholeCommit = 10000

// DataBodyLimit bounds a JSON request body of the datastore endpoints.
const DataBodyLimit = 16 << 20

// DataInfoResponse answers DataInfo.
type DataInfoResponse struct {
	Backend   string `json:"backend"`
	MaxCommit int    `json:"max_commit"`
	// Whole says the node's datastore commits whole: one commit request
	// takes up to DataMaxWholeCommit entries, atomically.
	Whole bool `json:"whole,omitempty"`
}

// DataCommitRequest is the body of DataCommit.
type DataCommitRequest struct {
	Fence   *datastore.Fence  `json:"fence,omitempty"`
	Entries []datastore.Entry `json:"entries"`
	Now     time.Time         `json:"now"`
}

// DataInfos answers DataCommit and DataStat, and DataChanges (with UpTo).
type DataInfos struct {
	Infos []datastore.Info `json:"infos"`
	UpTo  uint64           `json:"up_to,omitempty"`
}

// DataRequest is the body of DataStat, DataList, DataHead, DataChanges,
// DataPartitions and DataChangedPartitions: the arguments of the driver
// method, those it takes.
type DataRequest struct {
	Paths     []string `json:"paths,omitempty"`
	Prefix    string   `json:"prefix,omitempty"`
	Limit     int      `json:"limit,omitempty"`
	Pos       []byte   `json:"pos,omitempty"`
	Partition string   `json:"partition,omitempty"`
	After     uint64   `json:"after,omitempty"`
}

// DataListResponse answers DataList.
type DataListResponse struct {
	Files []datastore.Info `json:"files"`
	Next  []byte           `json:"next,omitempty"`
}

// DataHeadsResponse answers DataHead (one head), DataPartitions (names)
// and DataChangedPartitions (heads and the next cursor).
type DataHeadsResponse struct {
	Heads      []datastore.Head `json:"heads,omitempty"`
	Partitions []string         `json:"partitions,omitempty"`
	Next       []byte           `json:"next,omitempty"`
}

// DataReclaimRequest is the body of DataReclaim.
// Durations are in nanoseconds.
type DataReclaimRequest struct {
	Now         time.Time `json:"now"`
	Grace       int64     `json:"grace_ns"`
	UploadGrace int64     `json:"upload_grace_ns"`
	Horizon     int64     `json:"horizon_ns"`
}

// DataRecordRequest is the body of DataRecord: Op is get, cas, delete,
// list or fenced, on the datastore's lock records. Expect is the expected
// value; ExpectAbsent expects no record.
type DataRecordRequest struct {
	Op           string           `json:"op"`
	Key          string           `json:"key,omitempty"`
	Prefix       string           `json:"prefix,omitempty"`
	ExpectAbsent bool             `json:"expect_absent,omitempty"`
	Expect       []byte           `json:"expect,omitempty"`
	Value        []byte           `json:"value,omitempty"`
	Fence        *datastore.Fence `json:"fence,omitempty"`
}

// DataRecordResponse answers DataRecord: the value of get, the items of
// list.
type DataRecordResponse struct {
	Value []byte `json:"value,omitempty"`
	Items []Item `json:"items,omitempty"`
}
