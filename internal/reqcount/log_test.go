package reqcount

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLog: each request is logged, in order, with its S3 path or the start
// of its DynamoDB body, and the body reaches the target whole; Take clears
// the log.
func TestLog(t *testing.T) {
	var got []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
	}))
	defer target.Close()
	p, err := Start(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	long := `{"TableName":"t","Key":` + strings.Repeat("x", 500) + `}`
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/", strings.NewReader(long))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	if _, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(p.URL + "/bucket/pre/h/x?x-id=GetObject"); err != nil {
		t.Fatal(err)
	}
	log := p.Log()
	if len(log) != 2 || log[0] != "GetItem "+long[:300] || log[1] != "GET /bucket/pre/h/x?x-id=GetObject" {
		t.Fatalf("log %q", log)
	}
	if len(got) != 2 || got[0] != long {
		t.Fatalf("the target got %d requests, the first body %d bytes of %d", len(got), len(got[0]), len(long))
	}
	p.Take()
	if l := p.Log(); len(l) != 0 {
		t.Fatalf("log after Take: %q", l)
	}
}
