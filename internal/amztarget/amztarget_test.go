package amztarget

import (
	"net/http"
	"testing"
)

func TestOp(t *testing.T) {
	for _, c := range []struct {
		target, service, op string
		ok                  bool
	}{
		{"DynamoDB_20120810.GetItem", "DynamoDB_20120810", "GetItem", true},
		{"DynamoDBStreams_20120810.GetRecords", "DynamoDBStreams_20120810", "GetRecords", true},
		{"GetItem", "", "GetItem", false},
		{"", "", "", false},
	} {
		h := http.Header{}
		if c.target != "" {
			h.Set(Header, c.target)
		}
		s, op, ok := Op(h)
		if s != c.service || op != c.op || ok != c.ok {
			t.Errorf("Op(%q) = %q, %q, %v; want %q, %q, %v", c.target, s, op, ok, c.service, c.op, c.ok)
		}
	}
}
