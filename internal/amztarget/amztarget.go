// Package amztarget reads the operation a DynamoDB (or DynamoDB Streams)
// JSON request names in its X-Amz-Target header, for the test proxies that
// count, record or fault requests on the wire.
package amztarget

import (
	"net/http"
	"strings"
)

// Header is the header that names a JSON-protocol request's operation, as
// SERVICE_VERSION.Operation (DynamoDB_20120810.GetItem).
const Header = "X-Amz-Target"

// Op returns the service and the operation h names; ok is false when h has
// no X-Amz-Target (an S3 request, or not an AWS JSON request) or one
// without a service part.
func Op(h http.Header) (service, op string, ok bool) {
	t := h.Get(Header)
	if t == "" {
		return "", "", false
	}
	i := strings.LastIndexByte(t, '.')
	if i < 0 {
		return "", t, false
	}
	return t[:i], t[i+1:], true
}
