package remotestore_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/metastore/storetest"
	"github.com/lakemeta/lake/server"
)

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store { return newRemote(t, nil).client })
}

// remote is a live node over a fresh bolt file and a client store over it.
type remote struct {
	client *metastore.Store // the remote driver, what the test exercises
	node   *metastore.Store // the node's own store, to check what landed
	srv    *server.Server
	url    string
}

func newRemote(t *testing.T, opts *server.Options) *remote {
	t.Helper()
	bd, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	nodeStore := metastore.New(bd)
	if opts == nil {
		opts = &server.Options{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(nodeStore, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	d, err := remotestore.New(ts.URL, &remotestore.Options{Token: opts.Token})
	if err != nil {
		t.Fatal(err)
	}
	client := metastore.New(d)
	t.Cleanup(func() {
		client.Close()
		ts.Close()
		nodeStore.Close()
	})
	return &remote{client: client, node: nodeStore, srv: srv, url: ts.URL}
}

// TestAwkwardKeys: keys that a path, a router or a proxy could mangle all
// reach the node as the same key, through every operation.
func TestAwkwardKeys(t *testing.T) {
	r := newRemote(t, nil)
	ctx := t.Context()
	keys := []string{"tbl/a b", "tbl/what?x=1&y", "tbl/100%", "tbl/%2F", "tbl/%zz", "tbl/ü/表/🦆", "a//b", "/lead", "trail/",
		".", "..", "...", "a/./b", "a/../b", "tbl/#frag", "tbl/+plus", "tbl/;semi", "tab\tkey", "new\nline", "\\back", "%", "~tilde", "tbl/'\"<>"}
	for _, k := range keys {
		v := []byte("v:" + k)
		if err := r.client.CAS(ctx, k, metastore.ExpectAbsent(), v); err != nil {
			t.Fatalf("create %q: %v", k, err)
		}
		if got, err := r.node.Get(ctx, k); err != nil || string(got) != string(v) {
			t.Fatalf("node holds %q under %q (%v)", got, k, err)
		}
		if got, err := r.client.Get(ctx, k); err != nil || string(got) != string(v) {
			t.Fatalf("get %q = %q, %v", k, got, err)
		}
		if err := r.client.CAS(ctx, k, metastore.ExpectValue(v), []byte("w")); err != nil {
			t.Fatalf("cas %q: %v", k, err)
		}
	}
	items, err := r.client.ListAll(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, it := range items {
		listed = append(listed, it.Key)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("listed %q\nwant %q", listed, want)
	}
	for _, k := range keys {
		if err := r.client.Delete(ctx, k, []byte("w")); err != nil {
			t.Fatalf("delete %q: %v", k, err)
		}
	}
	if items, _ := r.node.ListAll(ctx, ""); len(items) != 0 {
		t.Fatalf("%d keys left", len(items))
	}
}

// TestErrorsMapBack: the node's error codes come back as the metastore
// sentinels, also for checks only the node makes (the driver is called
// directly, past the client Store's own validation).
func TestErrorsMapBack(t *testing.T) {
	r := newRemote(t, nil)
	ctx := t.Context()
	d := r.client.Driver()
	_, err := d.Get(ctx, metastore.ControlPrefix+"x")
	wantErr(t, "reserved key at the node", err, metastore.ErrReservedKey)
	_, err = d.Get(ctx, "tbl/\x00")
	wantErr(t, "NUL key at the node", err, metastore.ErrInvalidKey)
	wantErr(t, "oversized value at the node", d.Put(ctx, "tbl/big", make([]byte, metastore.MaxValueBytes+1)), metastore.ErrInvalidValue)
	_, _, err = d.List(ctx, "tbl/", 0, nil)
	wantErr(t, "bad limit at the node", err, metastore.ErrInvalidArgument)
	_, _, err = d.List(ctx, "tbl/", 10, []byte("forged"))
	wantErr(t, "forged position", err, metastore.ErrInvalidCursor)
	err = d.GuardedMutate(ctx, metastore.Guard{Key: "a"}, metastore.Mutation{Key: "a", Value: []byte{}})
	wantErr(t, "guard is target at the node", err, metastore.ErrInvalidArgument)

	err = r.client.CAS(ctx, "tbl/none", metastore.ExpectValue([]byte("x")), []byte("y"))
	var ce *metastore.ConflictError
	if !errors.As(err, &ce) || ce.Key != "tbl/none" || !strings.HasPrefix(err.Error(), "lake: conflict") {
		t.Fatalf("conflict: %#v", err)
	}
	r.srv.Admission().Pause("finalizing")
	err = r.client.Put(ctx, "tbl/p", nil)
	wantErr(t, "paused", err, metastore.ErrWritesPaused)
	if !strings.Contains(err.Error(), "finalizing") {
		t.Fatalf("paused error lacks the reason: %v", err)
	}
	if _, err := r.client.Get(ctx, "tbl/p"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("read while paused: %v", err)
	}
	r.srv.Admission().Resume()
	if err := r.client.Put(ctx, "tbl/p", nil); err != nil {
		t.Fatal(err)
	}
	// The node's store closed under the client: unavailable, not a bug.
	r.node.Close()
	_, err = r.client.Get(ctx, "tbl/p")
	wantErr(t, "node store closed", err, metastore.ErrUnavailable)
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	if !strings.HasPrefix(err.Error(), "lake: ") {
		t.Fatalf("%s: %q does not start with \"lake: \"", what, err)
	}
}

func TestToken(t *testing.T) {
	r := newRemote(t, &server.Options{Token: "tok-123"})
	ctx := t.Context()
	if err := r.client.Put(ctx, "tbl/a", []byte("v")); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	for _, tok := range []string{"", "tok-124"} {
		d, err := remotestore.New(r.url, &remotestore.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		s := metastore.New(d)
		_, err = s.Get(ctx, "tbl/a")
		wantErr(t, fmt.Sprintf("token %q", tok), err, remotestore.ErrUnauthorized)
		if errors.Is(err, metastore.ErrNotFound) {
			t.Fatal("an unauthorized read looks like a missing key")
		}
		s.Close()
	}
}

func TestTransportErrors(t *testing.T) {
	ctx := t.Context()
	// Nothing listens: unavailable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d, _ := remotestore.OpenURL("http://"+addr, "")
	_, err = metastore.New(d).Get(ctx, "tbl/a")
	wantErr(t, "connection refused", err, metastore.ErrUnavailable)

	// Not a lake node: a proxy's 502 is unavailable; a plain 404 is not a
	// missing key.
	status := http.StatusBadGateway
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream down", status)
	}))
	defer other.Close()
	d, _ = remotestore.OpenURL(other.URL, "")
	s := metastore.New(d)
	_, err = s.Get(ctx, "tbl/a")
	wantErr(t, "proxy 502", err, metastore.ErrUnavailable)
	status = http.StatusNotFound
	_, err = s.Get(ctx, "tbl/a")
	if err == nil || errors.Is(err, metastore.ErrNotFound) || !strings.Contains(err.Error(), "not a lake node") {
		t.Fatalf("a foreign 404: %v", err)
	}
	// A body that does not match its ETag is not the node's value.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("ETag", `"not-the-hash"`)
		w.Write([]byte("v"))
	}))
	defer liar.Close()
	d, _ = remotestore.OpenURL(liar.URL, "")
	_, err = metastore.New(d).Get(ctx, "tbl/a")
	wantErr(t, "ETag mismatch", err, metastore.ErrUnavailable)
}

func TestOpenURL(t *testing.T) {
	for _, c := range []struct {
		raw, base string
	}{
		{"http://127.0.0.1:7070", "http://127.0.0.1:7070"},
		{"http://127.0.0.1:7070/", "http://127.0.0.1:7070"},
		{"https://lake.example:443/meta/", "https://lake.example:443/meta"},
		{"http://[::1]:7070", "http://[::1]:7070"},
	} {
		d, err := remotestore.OpenURL(c.raw, "")
		if err != nil || d.URL() != c.base || d.Name() != "remote" {
			t.Errorf("OpenURL(%q) = %v, %v", c.raw, d, err)
		}
	}
	for _, raw := range []string{"", "127.0.0.1:7070", "ftp://h", "http://", "http://u:p@h:1", "http://h:1?x=1", "http://h:1?", "http://h:1#f", "http://h :1"} {
		if _, err := remotestore.OpenURL(raw, ""); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("OpenURL(%q) = %v, want ErrInvalidArgument", raw, err)
		}
	}
	if _, err := remotestore.OpenURL("http://h:1", "a b"); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("token with a space: %v", err)
	}
}

func TestTokenFromEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("  from-file\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, c := range []struct {
		tok, file, want string
		ok              bool
	}{
		{"", "", "", true},
		{"from-env", "", "from-env", true},
		{"", file, "from-file", true},
		{"from-env", file, "", false},
		{"", empty, "", false},
		{"", filepath.Join(t.TempDir(), "missing"), "", false},
	} {
		t.Setenv(remotestore.TokenEnv, c.tok)
		t.Setenv(remotestore.TokenFileEnv, c.file)
		got, err := remotestore.TokenFromEnv()
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("LAKE_TOKEN=%q LAKE_TOKEN_FILE=%q: %q, %v", c.tok, c.file, got, err)
		}
		if err != nil && (!errors.Is(err, metastore.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "lake: ")) {
			t.Errorf("error %v", err)
		}
	}
}
