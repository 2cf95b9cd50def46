package server

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/lakemeta/lake/nodeapi"
)

// coreErrorHeaders is how net/http ends the status line of the errors it
// answers itself, before any handler runs (a malformed request line or
// URI, a bad Content-Length, an unsupported Transfer-Encoding, headers too
// large, a bad Host): one Write of status line, these headers and a
// plain-text body, then the connection closes. A handler's response never
// looks like this: net/http writes a handler's headers sorted by name, so
// Connection always precedes Content-Type.
const coreErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// jsonErrorListener wraps the node's listener so that the errors net/http
// answers itself are the JSON error of docs/node.md too, counted in
// lake_http_requests_total (op "unknown") and logged at debug like any
// other request. With TLS it terminates TLS itself, beneath the rewrite, so
// that the rewrite sees plain HTTP (the node then speaks HTTP/1.1 only).
type jsonErrorListener struct {
	net.Listener
	s *Server
}

func (s *Server) wrapListener(ln net.Listener, cfg *tls.Config) net.Listener {
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return jsonErrorListener{ln, s}
}

// Accept wraps each connection, counted as pending until it authenticates;
// one over the pending cap is refused here (pending.go).
func (l jsonErrorListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		jc := &jsonErrorConn{Conn: c, s: l.s}
		if l.s.pending.admit(jc) {
			return jc, nil
		}
		l.s.metrics.observe("unknown", "unavailable", 0)
		refuseBusy(c)
	}
}

type jsonErrorConn struct {
	net.Conn
	s *Server
	// pending is true while the connection counts as not authenticated.
	pending atomic.Bool
}

// Close releases the connection's pending slot, if it still holds one.
func (c *jsonErrorConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// Write passes everything through except net/http's own error answers,
// which it rewrites.
func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if out, ok := c.s.rewriteCoreError(p, c.RemoteAddr()); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes the connection when the one beneath can (TCP,
// TLS): net/http uses it to let a client read an error answer before the
// connection closes, instead of a reset.
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// rewriteCoreError turns one of net/http's plain-text error answers into
// the same status with a JSON nodeapi.Error body.
func (s *Server) rewriteCoreError(p []byte, remote net.Addr) ([]byte, bool) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return nil, false
	}
	eol := bytes.Index(p, []byte("\r\n"))
	if eol < 0 || !bytes.HasPrefix(p[eol:], []byte(coreErrorHeaders)) {
		return nil, false
	}
	statusLine := string(p[len("HTTP/1.1 "):eol])
	status, err := strconv.Atoi(strings.SplitN(statusLine, " ", 2)[0])
	if err != nil || status < 400 {
		return nil, false
	}
	detail := string(p[eol+len(coreErrorHeaders):])
	code, what := nodeapi.CodeInvalidArgument, "invalid argument"
	if status == 431 {
		code, what = nodeapi.CodeTooLarge, "invalid value"
	}
	body, _ := json.Marshal(nodeapi.Error{Code: code,
		Message: "lake: " + what + ": malformed HTTP request, refused before it reached the node's API: " + detail})
	body = append(body, '\n')
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + statusLine + "\r\nContent-Type: " + nodeapi.JSONMIMEType +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n\r\n")
	out.Write(body)
	s.metrics.observe("unknown", code, 0)
	s.log.Debug("request", "method", "", "path", "", "op", "unknown", "status", status, "outcome", code, "detail", detail, "remote", remote)
	return out.Bytes(), true
}
