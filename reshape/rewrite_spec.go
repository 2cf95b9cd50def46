package reshape

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// KindRewriteKey is the kind of a spec that rewrites the primary key of the
// items it covers: DynamoDB cannot change an item's key in place, so each
// item is copied to its new key, read through both keys while both shapes
// are live, and its old item deleted last (finalize), or the copies deleted
// (rollback). See rewrite.go.
const KindRewriteKey = "rewrite-key"

// DefaultMarker is RewriteSpec.Marker's default.
const DefaultMarker = "lakeRewrittenFrom"

// RewriteSpec is the new key shape of a rewrite-key spec.
type RewriteSpec struct {
	// Key maps each key attribute of the table to the template that
	// derives its new value from the item's attributes, e.g.
	// {"PK": "MEMBER#{memberId}", "SK": "CMT#{createdAt}#{commentId}"}.
	// Every key attribute of the table MUST have one (checked against the
	// table when the rewrite is opened).
	Key map[string]string `json:"key"`
	// Marker is the attribute every copy carries while the rewrite is
	// live: a map holding the old item's key. It tells a copy from an old
	// item, and finds an orphan (a copy whose old item is gone). Finalize
	// removes it from each copy as it deletes the old item.
	Marker string `json:"marker,omitempty"`
}

// validateRewrite checks a rewrite-key spec and prepares its templates.
//
// The new keys MUST fall outside Covers, provably from the templates: a
// key attribute with a covers prefix whose template starts with a literal
// that can never begin with that prefix. Otherwise a copy (or, after
// finalize, a moved item) would be covered again and rewritten twice.
// Whether two items could map to one new key depends on the data, not the
// template alone: plan reports such collisions before anything is written,
// and apply never overwrites an item it did not copy.
func (s *Spec) validateRewrite() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !nameRE.MatchString(s.Table) {
		bad("table: %q is not a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -)", s.Table)
	}
	if s.Index != nil {
		bad("index: not with kind %q (a key rewrite adds no index)", KindRewriteKey)
	}
	if len(s.Derive) > 0 {
		bad("derive: not with kind %q; the new key is rewrite.key", KindRewriteKey)
	}
	if s.Timestamp != "" {
		bad("timestamp: not with kind %q", KindRewriteKey)
	}
	s.templates = map[string]template{}
	s.derived, s.sources = nil, nil
	rw := s.Rewrite
	if rw == nil {
		bad("rewrite: missing; say the new key, e.g. {\"key\": {\"PK\": \"MEMBER#{memberId}\", \"SK\": \"CMT#{createdAt}#{commentId}\"}}")
		return joinSpecErrors(errs)
	}
	if rw.Marker == "" {
		rw.Marker = DefaultMarker
	}
	if len(rw.Key) == 0 || len(rw.Key) > 2 {
		bad("rewrite.key: want a template for each key attribute of the table (1 or 2), got %d", len(rw.Key))
	}
	refs := map[string]bool{}
	for name, src := range rw.Key {
		t, err := parseTemplate(src)
		if err != nil {
			bad("rewrite.key.%s: %v", name, err)
			continue
		}
		s.templates[name] = t
		s.derived = append(s.derived, name)
		for _, r := range t.Refs() {
			refs[r] = true
		}
	}
	sort.Strings(s.derived)
	for r := range refs {
		s.sources = append(s.sources, r)
	}
	sort.Strings(s.sources)
	if len(rw.Key) > 0 && len(refs) == 0 {
		bad("rewrite.key: the templates reference no attribute: every item would map to one new key")
	}
	if refs[rw.Marker] {
		bad("rewrite.key: references the marker %s", rw.Marker)
	}
	if _, ok := rw.Key[rw.Marker]; ok {
		bad("rewrite.marker: %s is a key attribute", rw.Marker)
	}
	for _, a := range append(append([]string{}, s.Covers.Present...), s.Covers.Absent...) {
		if a == rw.Marker {
			bad("covers: names the marker %s, which the rewrite manages", a)
		}
	}
	disjoint := false
	for a, prefix := range s.Covers.KeyPrefixes {
		t, ok := s.templates[a]
		if !ok {
			continue
		}
		lit := t.literalPrefix()
		if lit != "" && prefix != "" && !strings.HasPrefix(lit, prefix) && !strings.HasPrefix(prefix, lit) {
			disjoint = true
		}
	}
	if len(rw.Key) > 0 && !disjoint {
		bad("rewrite.key: the new keys must fall outside covers, or a copy would be rewritten again: give a key attribute a covers.keyPrefixes entry and a template starting with a literal that cannot begin with it (covers PK \"WS#\", new PK \"MEMBER#{memberId}\")")
	}
	return joinSpecErrors(errs)
}

func joinSpecErrors(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: reshape spec: %s", metastore.ErrInvalidArgument, strings.Join(errs, "; "))
}

// literalPrefix returns the literal text before the template's first
// reference.
func (t template) literalPrefix() string {
	if len(t.parts) == 0 || t.parts[0].ref != "" {
		return ""
	}
	return t.parts[0].lit
}

// rewriteSpecJSON is examples/reshape/saas-comments-by-member.json with the
// table left open; a test keeps the two equal.
const rewriteSpecJSON = `{
  "kind": "rewrite-key",
  "table": %q,
  "covers": {
    "keyPrefixes": {"PK": "WS#", "SK": "DOC#"},
    "present": ["commentId"]
  },
  "rewrite": {
    "key": {
      "PK": "MEMBER#{memberId}",
      "SK": "CMT#{createdAt}#{commentId}"
    },
    "marker": "lakeRewrittenFrom"
  }
}
`

// DemoRewriteSpec returns the demo's key rewrite (the shipped example
// saas-comments-by-member.json) for table: every comment moves to the
// partition of its member, newest last, so that "every comment a member
// wrote" is a Query on the base table.
func DemoRewriteSpec(table string) (*Spec, error) {
	return Parse(fmt.Appendf(nil, rewriteSpecJSON, table))
}
