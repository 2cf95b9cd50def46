package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// streamBuffer is the write buffer of a streamed response: what the node
// holds per response beyond the items it already has, whatever their size.
const streamBuffer = 32 << 10

// itemStream writes a JSON object whose "items" member is written item by
// item, each value base64-encoded straight into the connection's buffer: a
// response is never built whole in memory (a list page of 1 MiB would be
// 1.4 MB of base64 more, the catalog much more).
type itemStream struct {
	bw  *bufio.Writer
	n   int
	err error
}

// startItems answers 200 and writes head, which must be a JSON object's
// opening up to and including `"items":[`.
func (s *Server) startItems(rq *request, head string) *itemStream {
	h := rq.w.Header()
	h.Set("Content-Type", nodeapi.JSONMIMEType)
	h.Set("X-Content-Type-Options", "nosniff")
	rq.status, rq.outcome = http.StatusOK, "ok"
	rq.w.WriteHeader(http.StatusOK)
	st := &itemStream{bw: bufio.NewWriterSize(rq.w, streamBuffer)}
	st.raw(head)
	return st
}

func (st *itemStream) raw(s string) {
	if st.err == nil {
		_, st.err = st.bw.WriteString(s)
	}
}

// item writes one {"key":…,"value":…} of the array.
func (st *itemStream) item(it metastore.Item) {
	if st.n > 0 {
		st.raw(",")
	}
	st.n++
	k, _ := json.Marshal(it.Key) // a string always encodes
	st.raw(`{"key":` + string(k) + `,"value":"`)
	if st.err == nil {
		enc := base64.NewEncoder(base64.StdEncoding, st.bw)
		if _, st.err = enc.Write(it.Value); st.err == nil {
			st.err = enc.Close()
		}
	}
	st.raw(`"}`)
}

// end closes the array, writes tail (the rest of the object, starting
// with "]") and flushes. A write error means the client went away; the
// status is already sent, so there is nothing else to tell it.
func (st *itemStream) end(tail string) error {
	st.raw(tail)
	if st.err == nil {
		st.err = st.bw.Flush()
	}
	return st.err
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonMember returns `,"name":value` with value JSON-encoded.
func jsonMember(name string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(strconv.Quote(err.Error()))
	}
	return "," + jsonString(name) + ":" + string(b)
}
