// Package faultproxy is a fault-injecting HTTP proxy that sits on the wire
// between the AWS SDK and DynamoDB (Local): faults happen to real requests
// and real connections, below the SDK, where a production network fails.
//
// Each request draws one fault at the configured rates:
//
//	delay          forward after a pause (the request may outlive a deadline)
//	drop-request   close the connection without forwarding: nothing applied
//	drop-response  forward, then close the connection without answering: applied, unknown to the client
//	reset          close the connection with a TCP reset before forwarding
//	server-error   answer 500 InternalServerError without forwarding
//	throttle       answer 400 ThrottlingException without forwarding
//	tx-conflict    answer TransactionCanceledException{TransactionConflict…} to a TransactWriteItems, without forwarding
//
// It only listens on loopback and only forwards to the target it was given.
package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/lakemeta/lake/internal/amztarget"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Fault names a fault.
type Fault string

// The faults.
const (
	None         Fault = "none"
	Delay        Fault = "delay"
	DropRequest  Fault = "drop-request"
	DropResponse Fault = "drop-response"
	Reset        Fault = "reset"
	ServerError  Fault = "server-error"
	Throttle     Fault = "throttle"
	TxConflict   Fault = "tx-conflict"
)

// All lists every fault but None.
var All = []Fault{Delay, DropRequest, DropResponse, Reset, ServerError, Throttle, TxConflict}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	URL string // the proxy's base URL, to use as the DynamoDB endpoint

	srv    *http.Server
	ln     net.Listener
	target *url.URL
	rp     *httputil.ReverseProxy

	mu       sync.Mutex
	rates    map[Fault]float64
	rng      *rand.Rand
	delay    time.Duration
	injected map[Fault]int
	requests int
	decide   func(op string) Fault
}

// Start starts a proxy on a free loopback port forwarding to target.
func Start(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: bad target %q", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln, target: u, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		rates: map[Fault]float64{}, injected: map[Fault]int{}, delay: 50 * time.Millisecond}
	p.rp = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host }}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// SetRates sets the probability of each fault per request (their sum at
// most 1); nil turns faults off.
func (p *Proxy) SetRates(rates map[Fault]float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rates = map[Fault]float64{}
	for f, r := range rates {
		p.rates[f] = r
	}
}

// SetDecider replaces the random draw with a function of the operation
// (the X-Amz-Target suffix, e.g. "TransactWriteItems"); nil restores it.
func (p *Proxy) SetDecider(f func(op string) Fault) {
	p.mu.Lock()
	p.decide = f
	p.mu.Unlock()
}

// Injected returns the number of faults injected by kind, and the number
// of requests seen.
func (p *Proxy) Injected() (map[Fault]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Fault]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out, p.requests
}

func (p *Proxy) draw(op string) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	f := None
	if p.decide != nil {
		f = p.decide(op)
	} else {
		x := p.rng.Float64()
		for _, k := range All {
			if x < p.rates[k] {
				f = k
				break
			}
			x -= p.rates[k]
		}
	}
	if f == TxConflict && op != "TransactWriteItems" {
		f = ServerError
	}
	if f != None {
		p.injected[f]++
	}
	return f
}

// ServeHTTP applies the drawn fault to one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	_, op, _ := amztarget.Op(r.Header)
	switch p.draw(op) {
	case Delay:
		time.Sleep(p.delay)
		p.rp.ServeHTTP(w, r)
	case DropRequest:
		hangUp(w, false)
	case Reset:
		hangUp(w, true)
	case DropResponse:
		rec := &discard{header: http.Header{}}
		p.rp.ServeHTTP(rec, r)
		hangUp(w, false)
	case ServerError:
		apiError(w, 500, "InternalServerError", "injected internal server error", nil)
	case Throttle:
		apiError(w, 400, "ThrottlingException", "injected throttling", nil)
	case TxConflict:
		var in struct{ TransactItems []json.RawMessage }
		json.Unmarshal(body, &in)
		reasons := make([]map[string]string, max(len(in.TransactItems), 1))
		for i := range reasons {
			reasons[i] = map[string]string{"Code": "None"}
		}
		reasons[0]["Code"] = "TransactionConflict"
		apiError(w, 400, "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict] (injected)", reasons)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// hangUp closes the client's connection without a response; with reset,
// as a TCP RST.
func hangUp(w http.ResponseWriter, reset bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		tc.SetLinger(0)
	}
	conn.Close()
}

func apiError(w http.ResponseWriter, status int, code, msg string, reasons []map[string]string) {
	body := map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": msg}
	if reasons != nil {
		body["CancellationReasons"] = reasons
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// discard is a ResponseWriter that drops the response.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
