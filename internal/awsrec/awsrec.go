// Package awsrec is a recording HTTP proxy for DynamoDB (Local) and S3
// (an S3-compatible server, path-style): it forwards every request to its
// target unchanged and records what IAM would authorize for it, as
// (action, resource ARN, keys), so that a role's generated policy can be
// checked against what the role's commands actually send, from outside the
// process, below the SDK.
//
// It only listens on loopback and only forwards to the target it was
// given.
package awsrec

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"github.com/lakemeta/lake/internal/amztarget"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Request is one authorization IAM makes for a request: one action on one
// resource. A TransactWriteItems of three items is three Requests (IAM
// authorizes each item's own action); a BatchGetItem over two tables is
// two.
type Request struct {
	// Action is the IAM action, e.g. "dynamodb:GetItem", "s3:PutObject".
	Action string
	// Resource is the ARN the action is authorized on.
	Resource string
	// LeadingKeys are the partition key values a DynamoDB item action
	// names (dynamodb:LeadingKeys); empty for table-level actions and
	// Scan.
	LeadingKeys []string
	// Prefix is a ListBucket's prefix (s3:prefix); HasPrefix says one was
	// sent.
	Prefix    string
	HasPrefix bool
}

// String renders the request for reports: action resource [keys].
func (r Request) String() string {
	s := r.Action + " " + r.Resource
	if len(r.LeadingKeys) > 0 {
		s += " keys=" + strings.Join(r.LeadingKeys, ",")
	}
	if r.HasPrefix {
		s += " prefix=" + r.Prefix
	}
	return s
}

// Options configure a Proxy.
type Options struct {
	// Target is the real endpoint's base URL.
	Target string
	// Service is "dynamodb" or "s3".
	Service string
	// Partition, Region and Account name the ARNs recorded (default aws,
	// us-east-1, 123456789012): DynamoDB Local's own ARNs (region
	// "ddblocal", account 000000000000) are rewritten to them.
	Partition, Region, Account string
	// HashKey returns a DynamoDB table's partition key attribute (and, for
	// index, the index's), so that item keys can be recorded as
	// dynamodb:LeadingKeys. Required for Service "dynamodb".
	HashKey func(table, index string) (string, error)
	// FallbackHashKeys name the partition key of an item request on a
	// table HashKey cannot describe (one that does not exist yet), in
	// order of preference.
	FallbackHashKeys []string
}

// Proxy is a running recording proxy.
type Proxy struct {
	// URL is the proxy's base URL, to use as the service's endpoint.
	URL string

	opts Options
	srv  *http.Server
	rp   *httputil.ReverseProxy

	mu        sync.Mutex
	reqs      []Request
	errs      []error
	iterators map[string]string // shard iterator → stream ARN
}

// Start listens on a free loopback port.
func Start(opts Options) (*Proxy, error) {
	target, err := url.Parse(opts.Target)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("lake: awsrec: target %q is not a URL", opts.Target)
	}
	if opts.Service != "dynamodb" && opts.Service != "s3" {
		return nil, fmt.Errorf("lake: awsrec: service %q: want dynamodb or s3", opts.Service)
	}
	if opts.Service == "dynamodb" && opts.HashKey == nil {
		return nil, fmt.Errorf("lake: awsrec: a dynamodb proxy needs HashKey")
	}
	if opts.Partition == "" {
		opts.Partition = "aws"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = "123456789012"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), opts: opts, iterators: map[string]string{}}
	p.rp = httputil.NewSingleHostReverseProxy(target)
	p.rp.ModifyResponse = p.response
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// Requests returns what was recorded so far, and clears it.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.reqs
	p.reqs = nil
	return out
}

// Errors returns the requests the proxy could not interpret (each is
// still forwarded): a check against a policy MUST fail on them, since
// their authorization is unknown.
func (p *Proxy) Errors() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}

func (p *Proxy) record(rs ...Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, rs...)
}

func (p *Proxy) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var rs []Request
	if p.opts.Service == "dynamodb" {
		rs, err = p.dynamo(r.Header, body)
	} else {
		rs, err = p.s3(r, body)
	}
	if err != nil {
		p.fail(err)
	} else {
		p.record(rs...)
	}
	if len(rs) == 1 && (rs[0].Action == "dynamodb:GetShardIterator" || rs[0].Action == "dynamodb:GetRecords") {
		// The response's iterators read this stream.
		r = r.WithContext(context.WithValue(r.Context(), streamKey{}, rs[0].Resource))
	}
	p.rp.ServeHTTP(w, r)
}

type streamKey struct{}

// response learns which stream a shard iterator reads, so that GetRecords
// (which names only the iterator) is recorded on its stream.
func (p *Proxy) response(resp *http.Response) error {
	if p.opts.Service != "dynamodb" || resp.StatusCode != http.StatusOK {
		return nil
	}
	if _, op, _ := amztarget.Op(resp.Request.Header); op != "GetShardIterator" && op != "GetRecords" {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var out struct {
		ShardIterator, NextShardIterator string
	}
	stream, _ := resp.Request.Context().Value(streamKey{}).(string)
	if json.Unmarshal(body, &out) != nil || stream == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, it := range []string{out.ShardIterator, out.NextShardIterator} {
		if it != "" {
			p.iterators[it] = stream
		}
	}
	return nil
}

var localARN = regexp.MustCompile(`^arn:aws:dynamodb:[^:]*:[0-9]*:`)

// arn returns a DynamoDB ARN for table (and "/index/NAME" or
// "/stream/LABEL" suffixes).
func (p *Proxy) arn(resource string) string {
	return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", p.opts.Partition, p.opts.Region, p.opts.Account, resource)
}

// streamARN rewrites a stream ARN of the server's to the recorded region
// and account.
func (p *Proxy) streamARN(a string) string {
	return localARN.ReplaceAllString(a, fmt.Sprintf("arn:%s:dynamodb:%s:%s:", p.opts.Partition, p.opts.Region, p.opts.Account))
}

type av = map[string]json.RawMessage

// keyValue renders the value of attribute attr of a DynamoDB JSON item.
func keyValue(item map[string]av, attr string) (string, error) {
	v, ok := item[attr]
	if !ok {
		return "", fmt.Errorf("no attribute %s", attr)
	}
	for _, t := range []string{"S", "N"} {
		if raw, ok := v[t]; ok {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", err
			}
			return s, nil
		}
	}
	if raw, ok := v["B"]; ok {
		return string(raw), nil
	}
	return "", fmt.Errorf("attribute %s is not a scalar", attr)
}

func (p *Proxy) itemReq(action, table string, item map[string]av) (Request, error) {
	h, err := p.opts.HashKey(table, "")
	if err != nil {
		// A table that does not exist (yet): IAM authorizes the request
		// before the table is looked up, so it is recorded all the same,
		// its partition key taken from a key of one attribute or the
		// first of FallbackHashKeys it holds.
		h = ""
		for _, a := range p.opts.FallbackHashKeys {
			if _, ok := item[a]; ok {
				h = a
				break
			}
		}
		if len(item) == 1 {
			for a := range item {
				h = a
			}
		}
		if h == "" {
			return Request{}, fmt.Errorf("lake: awsrec: %s on %s: %v", action, table, err)
		}
	}
	k, err := keyValue(item, h)
	if err != nil {
		return Request{}, fmt.Errorf("%s on %s: %v", action, table, err)
	}
	return Request{Action: action, Resource: p.arn(table), LeadingKeys: []string{k}}, nil
}

// dynamo interprets one DynamoDB (or DynamoDB Streams) JSON request.
func (p *Proxy) dynamo(h http.Header, body []byte) ([]Request, error) {
	svc, op, ok := amztarget.Op(h)
	if !ok {
		return nil, fmt.Errorf("lake: awsrec: request without X-Amz-Target")
	}
	var in struct {
		TableName, IndexName      string
		Key, Item                 map[string]av
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues map[string]av
		RequestItems              map[string]json.RawMessage
		TransactItems             []map[string]struct {
			TableName string
			Key, Item map[string]av
		}
		StreamArn, ShardIterator string
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("lake: awsrec: %s.%s: %v", svc, op, err)
		}
	}
	if strings.HasPrefix(svc, "DynamoDBStreams") {
		switch op {
		case "ListStreams":
			return []Request{{Action: "dynamodb:ListStreams", Resource: "*"}}, nil
		case "DescribeStream", "GetShardIterator":
			return []Request{{Action: "dynamodb:" + op, Resource: p.streamARN(in.StreamArn)}}, nil
		case "GetRecords":
			p.mu.Lock()
			s, ok := p.iterators[in.ShardIterator]
			p.mu.Unlock()
			if !ok {
				return nil, fmt.Errorf("lake: awsrec: GetRecords with an iterator the proxy did not see issued")
			}
			return []Request{{Action: "dynamodb:GetRecords", Resource: s}}, nil
		}
		return nil, fmt.Errorf("lake: awsrec: unknown streams operation %s", op)
	}
	switch op {
	case "GetItem", "DeleteItem", "UpdateItem":
		r, err := p.itemReq("dynamodb:"+op, in.TableName, in.Key)
		return []Request{r}, err
	case "PutItem":
		r, err := p.itemReq("dynamodb:PutItem", in.TableName, in.Item)
		return []Request{r}, err
	case "Query":
		return p.query(in.TableName, in.IndexName, in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	case "Scan":
		res := in.TableName
		if in.IndexName != "" {
			res += "/index/" + in.IndexName
		}
		return []Request{{Action: "dynamodb:Scan", Resource: p.arn(res)}}, nil
	case "DescribeTable", "CreateTable", "UpdateTable", "DeleteTable", "UpdateTimeToLive", "DescribeTimeToLive",
		"DescribeContinuousBackups", "TagResource", "ListTagsOfResource":
		return []Request{{Action: "dynamodb:" + op, Resource: p.arn(in.TableName)}}, nil
	case "ListTables", "DescribeLimits", "DescribeEndpoints":
		return []Request{{Action: "dynamodb:" + op, Resource: "*"}}, nil
	case "BatchGetItem", "BatchWriteItem":
		return p.batch(op, in.RequestItems)
	case "TransactWriteItems", "TransactGetItems":
		var out []Request
		for _, ti := range in.TransactItems {
			for kind, it := range ti {
				action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind]
				if action == "" {
					return nil, fmt.Errorf("lake: awsrec: %s item kind %s", op, kind)
				}
				k := it.Key
				if kind == "Put" {
					k = it.Item
				}
				r, err := p.itemReq("dynamodb:"+action, it.TableName, k)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("lake: awsrec: unknown DynamoDB operation %s", op)
}

func (p *Proxy) batch(op string, items map[string]json.RawMessage) ([]Request, error) {
	tables := make([]string, 0, len(items))
	for t := range items {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	var out []Request
	for _, t := range tables {
		h, err := p.opts.HashKey(t, "")
		if err != nil {
			return nil, err
		}
		var keys []map[string]av
		if op == "BatchGetItem" {
			var g struct{ Keys []map[string]av }
			if err := json.Unmarshal(items[t], &g); err != nil {
				return nil, err
			}
			keys = g.Keys
		} else {
			var ws []struct {
				PutRequest    *struct{ Item map[string]av }
				DeleteRequest *struct{ Key map[string]av }
			}
			if err := json.Unmarshal(items[t], &ws); err != nil {
				return nil, err
			}
			for _, w := range ws {
				if w.PutRequest != nil {
					keys = append(keys, w.PutRequest.Item)
				} else if w.DeleteRequest != nil {
					keys = append(keys, w.DeleteRequest.Key)
				}
			}
		}
		r := Request{Action: "dynamodb:" + op, Resource: p.arn(t)}
		seen := map[string]bool{}
		for _, k := range keys {
			v, err := keyValue(k, h)
			if err != nil {
				return nil, fmt.Errorf("lake: awsrec: %s on %s: %v", op, t, err)
			}
			if !seen[v] {
				seen[v] = true
				r.LeadingKeys = append(r.LeadingKeys, v)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// query records a Query with the partition key value its key condition
// binds (`#n = :v`, with the names and values resolved).
func (p *Proxy) query(table, index, cond string, names map[string]string, values map[string]av) ([]Request, error) {
	h, err := p.opts.HashKey(table, index)
	if err != nil {
		return nil, err
	}
	res := table
	if index != "" {
		res += "/index/" + index
	}
	for _, clause := range regexp.MustCompile(`(?i)\s+AND\s+`).Split(cond, -1) {
		l, r, ok := strings.Cut(strings.Trim(clause, " ()"), "=")
		if !ok || strings.ContainsAny(r, "<>") || strings.HasSuffix(l, "<") || strings.HasSuffix(l, ">") {
			continue
		}
		name := strings.TrimSpace(l)
		if n, ok := names[name]; ok {
			name = n
		}
		if name != h {
			continue
		}
		v, ok := values[strings.TrimSpace(r)]
		if !ok {
			break
		}
		k, err := keyValue(map[string]av{h: v}, h)
		if err != nil {
			return nil, err
		}
		return []Request{{Action: "dynamodb:Query", Resource: p.arn(res), LeadingKeys: []string{k}}}, nil
	}
	return nil, fmt.Errorf("lake: awsrec: Query on %s: no partition key in %q", res, cond)
}

// s3 interprets one path-style S3 request.
func (p *Proxy) s3(r *http.Request, body []byte) ([]Request, error) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	if bucket == "" {
		return []Request{{Action: "s3:ListAllMyBuckets", Resource: "*"}}, nil
	}
	bucketARN := "arn:" + p.opts.Partition + ":s3:::" + bucket
	q := r.URL.Query()
	if key == "" {
		switch {
		case r.Method == http.MethodGet && (q.Has("list-type") || len(q) == 0 || q.Has("prefix")):
			req := Request{Action: "s3:ListBucket", Resource: bucketARN}
			if q.Has("prefix") {
				req.Prefix, req.HasPrefix = q.Get("prefix"), true
			}
			return []Request{req}, nil
		case r.Method == http.MethodHead:
			return []Request{{Action: "s3:ListBucket", Resource: bucketARN}}, nil
		case r.Method == http.MethodPut && len(q) == 0:
			return []Request{{Action: "s3:CreateBucket", Resource: bucketARN}}, nil
		case r.Method == http.MethodDelete && len(q) == 0:
			return []Request{{Action: "s3:DeleteBucket", Resource: bucketARN}}, nil
		case r.Method == http.MethodPost && q.Has("delete"):
			var d struct {
				Object []struct{ Key string }
			}
			if err := xml.Unmarshal(body, &d); err != nil {
				return nil, fmt.Errorf("lake: awsrec: DeleteObjects body: %v", err)
			}
			var out []Request
			for _, o := range d.Object {
				out = append(out, Request{Action: "s3:DeleteObject", Resource: bucketARN + "/" + o.Key})
			}
			return out, nil
		case r.Method == http.MethodGet && q.Has("versioning"):
			return []Request{{Action: "s3:GetBucketVersioning", Resource: bucketARN}}, nil
		}
		return nil, fmt.Errorf("lake: awsrec: unknown bucket request %s %s", r.Method, r.URL.RequestURI())
	}
	objARN := bucketARN + "/" + key
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return []Request{{Action: "s3:GetObject", Resource: objARN}}, nil
	case http.MethodPut:
		out := []Request{{Action: "s3:PutObject", Resource: objARN}}
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			src, _ = url.PathUnescape(strings.TrimPrefix(src, "/"))
			out = append(out, Request{Action: "s3:GetObject", Resource: "arn:" + p.opts.Partition + ":s3:::" + src})
		}
		return out, nil
	case http.MethodDelete:
		return []Request{{Action: "s3:DeleteObject", Resource: objARN}}, nil
	}
	return nil, fmt.Errorf("lake: awsrec: unknown object request %s %s", r.Method, r.URL.RequestURI())
}
