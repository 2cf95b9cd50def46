package reshape

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
)

func TestRewriteSpecExampleMatches(t *testing.T) {
	b, err := os.ReadFile("../examples/reshape/saas-comments-by-member.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf(rewriteSpecJSON, "saas"); got != string(b) {
		t.Fatalf("examples/reshape/saas-comments-by-member.json and rewriteSpecJSON differ:\n%s\n---\n%s", b, got)
	}
	s, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindRewriteKey || s.Rewrite.Marker != DefaultMarker {
		t.Fatalf("parsed %+v", s)
	}
}

func TestRewriteSpecRefusals(t *testing.T) {
	const ok = `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"}},"rewrite":{"key":{"PK":"MEMBER#{memberId}","SK":"{SK}"}}}`
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("valid spec refused: %v", err)
	}
	for _, tc := range []struct{ name, spec, want string }{
		{"no rewrite", `{"kind":"rewrite-key","table":"saas"}`, "rewrite: missing"},
		{"constant key", `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"}},"rewrite":{"key":{"PK":"MEMBER#","SK":"X"}}}`, "reference no attribute"},
		{"new key covered", `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"}},"rewrite":{"key":{"PK":"WS#{memberId}","SK":"{SK}"}}}`, "must fall outside covers"},
		{"new key may be covered", `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"}},"rewrite":{"key":{"PK":"W{memberId}","SK":"{SK}"}}}`, "must fall outside covers"},
		{"no covers", `{"kind":"rewrite-key","table":"saas","rewrite":{"key":{"PK":"M#{memberId}"}}}`, "must fall outside covers"},
		{"with derive", `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"}},"derive":{"A":"{b}"},"rewrite":{"key":{"PK":"M#{m}"}}}`, "derive: not with kind"},
		{"marker in covers", `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"},"absent":["lakeRewrittenFrom"]},"rewrite":{"key":{"PK":"M#{m}"}}}`, "names the marker"},
		{"bad template", `{"kind":"rewrite-key","table":"saas","covers":{"keyPrefixes":{"PK":"WS#"}},"rewrite":{"key":{"PK":"M#{m"}}}`, "not closed"},
		{"rewrite on add-index", `{"kind":"add-index","table":"saas","index":{"name":"GSI1","partitionKey":{"attribute":"G"}},"derive":{"G":"{m}"},"rewrite":{"key":{"PK":"M#{m}"}}}`, "rewrite: only with kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.spec))
			if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidArgument containing %q", err, tc.want)
			}
		})
	}
}
