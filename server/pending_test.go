package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPendingConnectionsCapped (issue 26, row 8): connections that dribble
// their headers and never authenticate are bounded; one over the cap gets a
// clean 503, and an authenticated connection frees its slot.
func TestPendingConnectionsCapped(t *testing.T) {
	n := newNode(t, &Options{Token: "tok", MaxPendingConns: 3})
	n.store.Put(t.Context(), "tbl/a", []byte("v"))
	addr := strings.TrimPrefix(n.url, "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	// One authenticated keep-alive connection first: it must not count.
	auth := dial()
	br := bufio.NewReader(auth)
	get := func(c net.Conn, br *bufio.Reader) int {
		io.WriteString(c, "GET /v1/kv/tbl/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := get(auth, br); st != 200 {
		t.Fatalf("authenticated GET: %d", st)
	}
	var slow []net.Conn
	for range 3 {
		c := dial()
		io.WriteString(c, "GET /v1/kv/tbl/a HTTP/1.1\r\nHost: x\r\n") // never finished
		slow = append(slow, c)
	}
	waitPending(t, n.srv, 3)
	over := dial()
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("over the cap: status %d, want 503", resp.StatusCode)
	}
	// The authenticated connection still works while the cap is full.
	if st := get(auth, br); st != 200 {
		t.Fatalf("authenticated GET with the cap full: %d", st)
	}
	// A slow connection that closes frees its slot; one that finally
	// authenticates frees its slot too.
	slow[0].Close()
	waitPending(t, n.srv, 2)
	io.WriteString(slow[1], "Authorization: Bearer tok\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(slow[1]), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("late authentication: %v, %v", resp, err)
	}
	waitPending(t, n.srv, 1)
}

func waitPending(t *testing.T, s *Server, want int64) {
	t.Helper()
	for range 200 {
		if s.pending.n.Load() == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pending connections = %d, want %d", s.pending.n.Load(), want)
}
