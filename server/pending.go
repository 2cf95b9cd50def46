package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Bounds on connections that have not authenticated (issue 26, row 8): a
// client that opens connections and sends its headers slowly, or never
// sends a token, costs the node memory until ReadHeaderTimeout; these keep
// that cost small and bounded whatever the number of such clients.
const (
	// maxHeaderBytes bounds a request's headers (431 beyond): a key travels
	// in the path (at most 1024 bytes, 3 KiB escaped), so 64 KiB is ample,
	// and it is what a header-dribbling connection can make the node hold.
	maxHeaderBytes = 64 << 10
	// DefaultMaxPendingConns bounds the connections that have not yet
	// carried an authorized request (all of them on a node without a
	// token, until their first request reaches the handler). A connection
	// beyond it is answered 503 and closed at once; a client that
	// authenticates frees its slot with its first request.
	DefaultMaxPendingConns = 128
)

// pendingConns counts the connections not yet authenticated.
type pendingConns struct {
	n   atomic.Int64
	max int64
}

// connKey carries the connection of a request in its context.
type connKey struct{}

// connContext is the http.Server's ConnContext: it lets the handler find
// the request's connection to mark it authenticated.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// admit counts c as pending, or reports false if the node holds as many
// pending connections as it allows.
func (p *pendingConns) admit(c *jsonErrorConn) bool {
	if p.n.Add(1) > p.max {
		p.n.Add(-1)
		return false
	}
	c.pending.Store(true)
	return true
}

// release stops counting c (it authenticated, or it closed); a second call
// changes nothing.
func (c *jsonErrorConn) release() {
	if c.pending.CompareAndSwap(true, false) {
		c.s.pending.n.Add(-1)
	}
}

// markAuthenticated frees the pending slot of r's connection: r got past
// authorization, so its client holds the token (or the node needs none).
func markAuthenticated(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(*jsonErrorConn); ok {
		c.release()
	}
}

// refuseBusy answers a connection over the pending cap with a 503 it can
// read, then closes it, without reading anything from it. Under TLS it only
// closes it: an answer would need a handshake, which a slow client stalls.
func refuseBusy(c net.Conn) {
	if _, ok := c.(*tls.Conn); ok {
		c.Close()
		return
	}
	const body = `{"code":"unavailable","message":"lake: unavailable: too many connections waiting to authenticate; retry"}` + "\n"
	c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	c.Close()
}
