// Package reqcount is a counting HTTP proxy for DynamoDB (Local) and S3
// (versitygw): it forwards every request unchanged and counts it by
// operation, so that what a lake process costs is counted from outside,
// on the wire, whatever the process caches or meters itself.
//
// A DynamoDB request is named by its X-Amz-Target operation (GetItem,
// Query, …). An S3 request is named by its method and kind: GET, HEAD,
// PUT, DELETE and POST of an object, LIST (a GET of a bucket with
// list-type, prefix or delimiter), and the bucket's other calls by method.
//
// The Host header is kept as the client sent it, so that S3 signatures
// (which cover the host) still verify at the target.
package reqcount

import (
	"bytes"
	"fmt"
	"github.com/lakemeta/lake/internal/amztarget"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Proxy is a running counting proxy.
type Proxy struct {
	// URL is the proxy's base URL, to use as the endpoint.
	URL string

	srv *http.Server
	mu  sync.Mutex
	ops map[string]int
	log []string
	// done is the longest chain among the requests answered so far (since
	// the last Take), longest the longest among all of them.
	done, longest int
	hold          time.Duration
}

// Hold makes the proxy hold each request for d before forwarding it, so
// that requests a client sends at once overlap here whatever the machine's
// scheduling, and Sequence counts the client's order, not its timing.
func (p *Proxy) Hold(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = d
}

// Sequence returns the round trips in sequence since the last Take: the
// longest chain of requests each sent after the one before it had been
// answered. A client that waits for each answer before its next request
// has a chain as long as its requests; one that sends k at once, k times
// shorter. It is what the requests cost in time at one round trip each.
func (p *Proxy) Sequence() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.longest
}

// Start starts a proxy on a free loopback port forwarding to target.
func Start(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("lake: reqcount: bad target %q", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lake: reqcount: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ops: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // signed by the client: keep it
	}}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := buffer(r)
		if err != nil {
			http.Error(w, "lake: reqcount: reading the request: "+err.Error(), http.StatusBadGateway)
			return
		}
		line := describe(r, body)
		p.mu.Lock()
		p.ops[Op(r)]++
		p.log = append(p.log, line)
		depth, hold := p.done+1, p.hold // one more than the longest chain answered before it came
		p.longest = max(p.longest, depth)
		p.mu.Unlock()
		time.Sleep(hold)
		rp.ServeHTTP(w, r)
		p.mu.Lock()
		p.done = max(p.done, depth)
		p.mu.Unlock()
	})}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// Op names the operation of request r.
func Op(r *http.Request) string {
	if _, op, _ := amztarget.Op(r.Header); op != "" {
		return op
	}
	// S3, path style: /BUCKET or /BUCKET/KEY.
	path := strings.TrimPrefix(r.URL.Path, "/")
	q := r.URL.Query()
	if !strings.Contains(path, "/") || strings.HasSuffix(path, "/") && r.Method == http.MethodGet {
		if r.Method == http.MethodGet && (q.Has("list-type") || q.Has("prefix") || q.Has("delimiter")) {
			return "LIST"
		}
		if r.Method == http.MethodPost && q.Has("delete") {
			return "DELETE-MANY"
		}
		return r.Method + "-bucket"
	}
	return r.Method
}

// Counts is requests by operation.
type Counts map[string]int

// Total is the number of requests.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the counts, "13 (DescribeTable 1, GetItem 4, …)".
func (c Counts) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return fmt.Sprintf("%d (%s)", c.Total(), strings.Join(parts, ", "))
}

// Take returns the counts since the last Take and starts again from zero.
func (p *Proxy) Take() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Counts(p.ops)
	p.ops = map[string]int{}
	p.log = nil
	p.done, p.longest = 0, 0
	return out
}

// Log returns one line for each request since the last Take, in the order
// they came: the operation, the S3 path and query, or the start of the
// DynamoDB request's body (to tell what each request was for).
func (p *Proxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// buffer reads r's whole body and returns it, so that it is forwarded from
// memory: the HTTP/1 server closes an inbound body once the response
// begins, so a body streamed to the target could lose its final read (EOF)
// to a quick answer, and the transport would then drop the target's
// connection in the middle of that answer (the client saw "unexpected EOF").
func buffer(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body, nil
}

// describe is the log line of request r, whose body is body: the operation
// and the S3 path and query, or the first 300 bytes of a DynamoDB body.
func describe(r *http.Request, body []byte) string {
	line := Op(r)
	if r.Header.Get(amztarget.Header) == "" {
		return line + " " + r.URL.Path + "?" + r.URL.RawQuery
	}
	if len(body) == 0 {
		return line
	}
	return line + " " + string(body[:min(len(body), 300)])
}
