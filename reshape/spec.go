package reshape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// KindAddIndex is the kind of a spec that adds a global secondary index and
// backfills the attributes it is keyed on. KindRewriteKey (rewrite_spec.go)
// is the other kind: a key rewrite, with its own section Rewrite.
const KindAddIndex = "add-index"

// Spec is a reshape spec: what to add to which live table and how each item
// gets it. It is read from JSON by Parse or Load; see docs/reshape.md.
type Spec struct {
	// Kind says what the reshape does: "add-index" or "rewrite-key".
	Kind string `json:"kind"`
	// Table is the live DynamoDB table to reshape.
	Table string `json:"table"`
	// Index is the index to add (kind add-index).
	Index *IndexSpec `json:"index,omitempty"`
	// Rewrite is the new key shape (kind rewrite-key).
	Rewrite *RewriteSpec `json:"rewrite,omitempty"`
	// Covers selects the items the reshape concerns; the others are left
	// alone. An empty Covers selects every item.
	Covers Covers `json:"covers"`
	// Derive maps each new attribute to the template that derives it from
	// the item's existing attributes, e.g. "GSI1PK": "MEMBER#{memberId}".
	// Every key attribute of the index MUST be derived.
	Derive map[string]string `json:"derive,omitempty"`
	// Timestamp optionally names the attribute that tells an item's age
	// (an RFC 3339 time or date string, or a number of Unix seconds), for
	// verify's obsolescence cutoff.
	Timestamp string `json:"timestamp,omitempty"`
	// TakeOver names derived attributes that items may already hold with
	// values of their own, which the reshape is explicitly allowed to
	// overwrite. Without it a derived attribute must be the spec's alone:
	// no other index may key on it, and an item holding another value in it
	// is Foreign (reported, never overwritten).
	TakeOver []string `json:"takeOver,omitempty"`

	templates map[string]template
	derived   []string // Derive's keys, sorted
	sources   []string // every attribute a template references, sorted
}

// IndexSpec is the global secondary index to add.
type IndexSpec struct {
	Name string `json:"name"`
	// Type is "global" (the default). "local" is refused: see Validate.
	Type         string    `json:"type,omitempty"`
	PartitionKey KeyAttr   `json:"partitionKey"`
	SortKey      *KeyAttr  `json:"sortKey,omitempty"`
	Projection   string    `json:"projection,omitempty"` // ALL (default), KEYS_ONLY or INCLUDE
	Include      []string  `json:"include,omitempty"`    // with INCLUDE: the non-key attributes projected
	Provisioned  *Capacity `json:"provisioned,omitempty"`
}

// KeyAttr is one key attribute of the index.
type KeyAttr struct {
	Attribute string `json:"attribute"`
	// Type is S (the default) or N; a template renders text, so B is refused.
	Type string `json:"type,omitempty"`
}

// Capacity is the provisioned throughput of an index on a PROVISIONED table
// (unset: the table's own).
type Capacity struct {
	Read  int64 `json:"read"`
	Write int64 `json:"write"`
}

// Covers selects items: every key prefix matches (the attribute is a string
// starting with the prefix) and every Present attribute exists and every
// Absent one does not.
type Covers struct {
	KeyPrefixes map[string]string `json:"keyPrefixes,omitempty"`
	Present     []string          `json:"present,omitempty"`
	Absent      []string          `json:"absent,omitempty"`
}

// Load reads and validates the spec file at path.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: reshape spec: %v", metastore.ErrInvalidArgument, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// Parse decodes a JSON spec (unknown fields are errors, not ignored) and
// validates it. Every problem found is reported in one error that matches
// metastore.ErrInvalidArgument.
func Parse(b []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: reshape spec: %v", metastore.ErrInvalidArgument, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: reshape spec: trailing data after the JSON object", metastore.ErrInvalidArgument)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LSIRefusal is why a local secondary index is refused.
const LSIRefusal = "a local secondary index can only be created with the table, so on a live table a global secondary index is the only option"

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
	numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
)

// Validate checks the spec on its own (without the table) and prepares its
// templates. Every problem is listed in the one error returned.
func (s *Spec) Validate() error {
	if s.Kind == KindRewriteKey {
		return s.validateRewrite()
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	switch s.Kind {
	case KindAddIndex:
		if s.Rewrite != nil {
			bad("rewrite: only with kind %q", KindRewriteKey)
		}
	case "":
		bad("kind: missing; the known kinds are %q and %q", KindAddIndex, KindRewriteKey)
	default:
		bad("kind: %q is unknown; the known kinds are %q and %q", s.Kind, KindAddIndex, KindRewriteKey)
	}
	if !nameRE.MatchString(s.Table) {
		bad("table: %q is not a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -)", s.Table)
	}
	keyAttrs := map[string]string{} // index key attribute → type
	if s.Index == nil {
		bad("index: missing")
	} else {
		ix := s.Index
		if !nameRE.MatchString(ix.Name) {
			bad("index.name: %q is not a DynamoDB index name (3 to 255 of A-Z a-z 0-9 _ . -)", ix.Name)
		}
		switch strings.ToLower(ix.Type) {
		case "", "global", "gsi":
			ix.Type = "global"
		case "local", "lsi":
			bad("index.type: %q is refused: %s", ix.Type, LSIRefusal)
		default:
			bad("index.type: %q is unknown; use \"global\"", ix.Type)
		}
		checkKey := func(field string, k *KeyAttr) {
			if k.Attribute == "" {
				bad("%s.attribute: missing", field)
				return
			}
			switch k.Type {
			case "":
				k.Type = "S"
			case "S", "N":
			case "B":
				bad("%s.type: B is not supported: a template derives text (use S)", field)
			default:
				bad("%s.type: %q is not S or N", field, k.Type)
			}
			keyAttrs[k.Attribute] = k.Type
		}
		checkKey("index.partitionKey", &ix.PartitionKey)
		if ix.SortKey != nil {
			checkKey("index.sortKey", ix.SortKey)
			if ix.SortKey.Attribute != "" && ix.SortKey.Attribute == ix.PartitionKey.Attribute {
				bad("index.sortKey: %q is also the partition key", ix.SortKey.Attribute)
			}
		}
		switch strings.ToUpper(ix.Projection) {
		case "", "ALL":
			ix.Projection = "ALL"
			if len(ix.Include) > 0 {
				bad("index.include: only with projection INCLUDE")
			}
		case "KEYS_ONLY":
			ix.Projection = "KEYS_ONLY"
			if len(ix.Include) > 0 {
				bad("index.include: only with projection INCLUDE")
			}
		case "INCLUDE":
			ix.Projection = "INCLUDE"
			if len(ix.Include) == 0 || len(ix.Include) > 100 {
				bad("index.include: projection INCLUDE needs 1 to 100 attributes, got %d", len(ix.Include))
			}
		default:
			bad("index.projection: %q is not ALL, KEYS_ONLY or INCLUDE", ix.Projection)
		}
		if c := ix.Provisioned; c != nil && (c.Read < 1 || c.Write < 1) {
			bad("index.provisioned: read and write must be at least 1")
		}
	}

	s.templates = map[string]template{}
	s.derived = s.derived[:0]
	srcSet := map[string]bool{}
	if len(s.Derive) == 0 {
		bad("derive: missing; say how each new attribute is derived, e.g. {\"GSI1PK\": \"MEMBER#{memberId}\"}")
	}
	for name, src := range s.Derive {
		if name == "" {
			bad("derive: an empty attribute name")
			continue
		}
		t, err := parseTemplate(src)
		if err != nil {
			bad("derive.%s: %v", name, err)
			continue
		}
		s.templates[name] = t
		s.derived = append(s.derived, name)
		for _, r := range t.Refs() {
			srcSet[r] = true
		}
		if typ, ok := keyAttrs[name]; ok && typ == "N" && !t.single() {
			bad("derive.%s: an N key attribute must be derived from exactly one number attribute, like \"{seq}\"", name)
		}
	}
	sort.Strings(s.derived)
	s.sources = s.sources[:0]
	for r := range srcSet {
		s.sources = append(s.sources, r)
	}
	sort.Strings(s.sources)
	for _, d := range s.derived {
		if srcSet[d] {
			bad("derive.%s: is derived and also referenced by a template; derive every attribute from existing ones only", d)
		}
	}
	for a := range keyAttrs {
		if _, ok := s.Derive[a]; !ok {
			bad("derive: no template for index key attribute %s: old items would never enter the index", a)
		}
	}
	for a := range s.Covers.KeyPrefixes {
		if _, ok := s.Derive[a]; ok {
			bad("covers.keyPrefixes: %s is derived; covers must select on existing attributes", a)
		}
	}
	for _, a := range s.Covers.Present {
		if _, ok := s.Derive[a]; ok {
			bad("covers.present: %s is derived; covers must select on existing attributes", a)
		}
	}
	for _, a := range s.Covers.Absent {
		if _, ok := s.Derive[a]; ok {
			bad("covers.absent: %s is derived: a converted item would stop being covered", a)
		}
		if slices.Contains(s.Covers.Present, a) {
			bad("covers: %s is both present and absent: nothing is covered", a)
		}
	}
	if s.Timestamp != "" {
		if _, ok := s.Derive[s.Timestamp]; ok {
			bad("timestamp: %s is derived", s.Timestamp)
		}
	}
	for _, a := range s.TakeOver {
		if _, ok := s.Derive[a]; !ok {
			bad("takeOver: %s is not a derived attribute", a)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: reshape spec: %s", metastore.ErrInvalidArgument, strings.Join(errs, "; "))
	}
	return nil
}

// Derived returns the names of the attributes the spec derives, sorted.
func (s *Spec) Derived() []string { return slices.Clone(s.derived) }

// Sources returns the names of the attributes the templates read, sorted.
func (s *Spec) Sources() []string { return slices.Clone(s.sources) }

// keyType returns the index key type of a derived attribute, "" when it is
// not an index key.
func (s *Spec) keyType(name string) string {
	if s.Index == nil {
		return ""
	}
	if s.Index.PartitionKey.Attribute == name {
		return s.Index.PartitionKey.Type
	}
	if s.Index.SortKey != nil && s.Index.SortKey.Attribute == name {
		return s.Index.SortKey.Type
	}
	return ""
}
