package nodeclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// TestErrorOf checks the decoding of every kind of answer both node
// drivers meet: the node's JSON errors back to their sentinels with
// "lake: " once, and a foreign answer (a proxy's page) by its status.
func TestErrorOf(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   error
		substr string
	}{
		{"not found", 404, `{"code":"not_found","message":"lake: not found: key \"a\""}`, metastore.ErrNotFound, `lake: not found: key "a"`},
		{"message without prefix", 400, `{"code":"invalid_key","message":"invalid key: empty"}`, metastore.ErrInvalidKey, "lake: invalid key: empty"},
		{"unauthorized", 401, `{"code":"unauthorized","message":"lake: unauthorized: this node needs a token"}`, ErrUnauthorized, "lake: unauthorized"},
		{"too large", 413, `{"code":"too_large","message":"lake: too large"}`, metastore.ErrInvalidValue, "too large"},
		{"paused", 503, `{"code":"writes_paused","message":"lake: writes paused"}`, metastore.ErrWritesPaused, "paused"},
		{"unknown code", 500, `{"code":"from_the_future","message":"lake: new"}`, nil, "code from_the_future"},
		{"proxy 502", 502, `<html>bad gateway</html>`, metastore.ErrUnavailable, "502"},
		{"proxy 429", 429, ``, metastore.ErrUnavailable, "429"},
		{"proxy 404", 404, `<html>nope</html>`, nil, "not a lake node's answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer ts.Close()
			cl, err := New(ts.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			err = cl.Call(context.Background(), http.MethodGet, cl.URL("/v1/x", nil), "x", nil, nil, 1<<20)
			if err == nil {
				t.Fatal("no error")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v does not match %v", err, c.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "lake: ") || strings.Count(msg, "lake: ") != 1 {
				t.Errorf("error %q does not start with one \"lake: \"", msg)
			}
			if !strings.Contains(msg, c.substr) {
				t.Errorf("error %q does not say %q", msg, c.substr)
			}
		})
	}
}

// TestConflictNamesKey: a conflict is a *metastore.ConflictError with the
// node's key and reason, for errors.As on the client.
func TestConflictNamesKey(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(409)
		w.Write([]byte(`{"code":"conflict","message":"lake: conflict","key":"k1","reason":"fence"}`))
	}))
	defer ts.Close()
	cl, _ := New(ts.URL, nil)
	err := cl.Call(context.Background(), http.MethodPost, cl.URL("/v1/x", nil), "x", struct{}{}, nil, 1<<20)
	var ce *metastore.ConflictError
	if !errors.As(err, &ce) || ce.Key != "k1" || ce.Reason != "fence" || !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("got %#v (%v), want a conflict on k1 for fence", err, err)
	}
}

// TestTokenAndTransport: the token travels as a bearer header; a refused
// connection is ErrUnavailable and says how to start a node; a JSON answer
// larger than its bound is an error, not an unbounded read.
func TestTokenAndTransport(t *testing.T) {
	var got string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get(nodeapi.AuthorizationHeader)
		w.Write([]byte(`{"items":[` + strings.Repeat(`{"key":"k"},`, 100) + `{"key":"k"}]}`))
	}))
	cl, err := New(ts.URL+"/prefix/", &Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Base() != ts.URL+"/prefix" {
		t.Errorf("base %q", cl.Base())
	}
	var page nodeapi.ListResponse
	if err := cl.Call(context.Background(), http.MethodGet, cl.URL(nodeapi.ListPath, nil), "list", nil, &page, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer s3cret" || len(Items(page.Items)) != 101 || Items(page.Items)[0].Value == nil {
		t.Errorf("header %q, %d items", got, len(page.Items))
	}
	if err := cl.Call(context.Background(), http.MethodGet, cl.URL(nodeapi.ListPath, nil), "list", nil, &page, 100); !errors.Is(err, metastore.ErrUnavailable) {
		t.Errorf("an answer past its bound: %v", err)
	}
	ts.Close()
	err = cl.Call(context.Background(), http.MethodGet, cl.URL(nodeapi.ListPath, nil), "list", nil, &page, 1<<20)
	if !errors.Is(err, metastore.ErrUnavailable) || !strings.Contains(err.Error(), "lake serve") {
		t.Errorf("a refused connection: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cl.Call(ctx, http.MethodGet, cl.URL(nodeapi.ListPath, nil), "list", nil, nil, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled call: %v", err)
	}
	for _, bad := range []string{"ftp://h:1", "http://u:p@h:1", "http://h:1?x=1", "http://h:1#f", "http://h:99999", "http://"} {
		if _, err := New(bad, nil); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("New(%q): %v", bad, err)
		}
	}
}
