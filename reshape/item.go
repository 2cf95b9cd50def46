package reshape

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// State is where one item stands in a reshape.
type State int

// The states of an item. Covered items are NotDerivable, Missing, Stale or
// Converted.
const (
	// NotCovered: the spec does not select the item; it is left alone.
	NotCovered State = iota
	// NotDerivable: covered, but an attribute a template reads is missing
	// or not a string or number, so the new attributes cannot be derived.
	NotDerivable
	// Missing: covered and derivable, and none of the new attributes is
	// set yet. The index omits it.
	Missing
	// Stale: covered and derivable, and the new attributes are set but some
	// differ from what the item's current attributes derive (an old writer
	// changed a source after the conversion), or only some are set.
	Stale
	// Converted: every new attribute holds what the item derives.
	Converted
	// Foreign: covered, and it holds a derived attribute the reshape did
	// not write: a value of another type than the one derived, or, while
	// the spec's ownership of its attributes is still being checked (its
	// index did not exist before; see Apply), any value other than the
	// derived one. The item's value is the user's: it is never
	// overwritten, and plan refuses the spec unless Spec.TakeOver names the
	// attribute.
	Foreign
)

var stateNames = [...]string{"not-covered", "not-derivable", "missing", "stale", "converted", "foreign"}

// String names the state as reports print it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Verdict is the classification of one item.
type Verdict struct {
	State State
	// Want holds the derived attributes (states Missing, Stale, Converted).
	Want map[string]types.AttributeValue
	// Reason says why an item is NotDerivable or Foreign.
	Reason string
}

// maxItemBytes is DynamoDB's item size limit: an item that the derived
// attributes would push past it cannot be converted (UpdateItem refuses it).
const maxItemBytes = 400 * 1024

// Limits DynamoDB puts on index key values.
const (
	maxPartitionKeyBytes = 2048
	maxSortKeyBytes      = 1024
)

// Covered reports whether the spec selects item.
func (s *Spec) Covered(item map[string]types.AttributeValue) bool {
	for a, prefix := range s.Covers.KeyPrefixes {
		v, ok := item[a].(*types.AttributeValueMemberS)
		if !ok || !strings.HasPrefix(v.Value, prefix) {
			return false
		}
	}
	for _, a := range s.Covers.Present {
		if _, ok := item[a]; !ok {
			return false
		}
	}
	for _, a := range s.Covers.Absent {
		if _, ok := item[a]; ok {
			return false
		}
	}
	return true
}

// deriveValues returns the attributes the spec derives for item, or why it cannot.
// It does not check coverage.
func (s *Spec) deriveValues(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(s.derived))
	for _, name := range s.derived {
		v, err := s.templates[name].render(item)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		switch s.keyType(name) {
		case "N":
			if !numberRE.MatchString(v) {
				return nil, fmt.Errorf("%s: %q is not a number", name, v)
			}
			out[name] = &types.AttributeValueMemberN{Value: v}
			continue
		case "S":
			if v == "" {
				return nil, fmt.Errorf("%s: renders an empty string, which an index key cannot hold", name)
			}
		}
		if limit := s.keyLimit(name); limit > 0 && len(v) > limit {
			return nil, fmt.Errorf("%s: %d bytes, over the %d an index key may hold", name, len(v), limit)
		}
		out[name] = &types.AttributeValueMemberS{Value: v}
	}
	return out, nil
}

func (s *Spec) keyLimit(name string) int {
	switch {
	case s.Index == nil:
		return 0
	case s.Index.PartitionKey.Attribute == name:
		return maxPartitionKeyBytes
	case s.Index.SortKey != nil && s.Index.SortKey.Attribute == name:
		return maxSortKeyBytes
	}
	return 0
}

// Classify says where item stands, once the spec owns its derived
// attributes (a derived value that differs from the derivation but has its
// type is Stale: a source changed after the conversion).
func (s *Spec) Classify(item map[string]types.AttributeValue) Verdict {
	return s.classify(item, false)
}

// classify says where item stands. checking says the spec's ownership of
// the derived attributes is not established yet: any derived value that
// differs from the derivation was written by someone else (Foreign), not
// left Stale by an earlier conversion.
func (s *Spec) classify(item map[string]types.AttributeValue, checking bool) Verdict {
	if !s.Covered(item) {
		return Verdict{State: NotCovered}
	}
	want, err := s.deriveValues(item)
	if err != nil {
		return Verdict{State: NotDerivable, Reason: err.Error()}
	}
	present, equal := 0, 0
	for _, name := range s.derived {
		got, ok := item[name]
		if !ok {
			continue
		}
		present++
		w := want[name]
		if sameScalar(got, w) {
			equal++
			continue
		}
		if s.takesOver(name) {
			continue
		}
		if typeName(got) != typeName(w) {
			return Verdict{State: Foreign, Want: want, Reason: fmt.Sprintf("%s holds a value of type %s that this reshape did not write (it derives type %s): the attribute is the item's own; derive another, or name it in takeOver", name, typeName(got), typeName(w))}
		}
		if checking {
			return Verdict{State: Foreign, Want: want, Reason: fmt.Sprintf("%s already holds %q, written before this reshape began (it derives %q): the attribute is the item's own; derive another, or name it in takeOver", name, scalarText(got), scalarText(w))}
		}
	}
	if equal < len(want) {
		after := maps.Clone(item)
		maps.Copy(after, want)
		if n := itemSize(after); n > maxItemBytes {
			return Verdict{State: NotDerivable, Reason: fmt.Sprintf("with the derived attributes the item would be about %d bytes, over DynamoDB's 400 KB item limit", n)}
		}
	}
	switch {
	case equal == len(want):
		return Verdict{State: Converted, Want: want}
	case present == 0:
		return Verdict{State: Missing, Want: want}
	default:
		return Verdict{State: Stale, Want: want}
	}
}

// takesOver says the spec takes attribute name over from the items that
// already hold it (Spec.TakeOver).
func (s *Spec) takesOver(name string) bool { return slices.Contains(s.TakeOver, name) }

// sameScalar compares two string or number attribute values.
func sameScalar(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && a.Value == b.Value
	}
	return false
}

// KeyString renders an item's primary key for reports and logs, attributes
// in name order: PK=WS#a91 SK=DOC#2026-04-01#x7#CMT#0001.
func KeyString(key map[string]types.AttributeValue) string {
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	for i, n := range names {
		if i > 0 {
			sb.WriteByte(' ')
		}
		v, err := scalar(key, n)
		if err != nil {
			v = "<" + typeName(key[n]) + ">"
		}
		sb.WriteString(n + "=" + v)
	}
	return sb.String()
}

// itemSize estimates an item's size as DynamoDB bills it: attribute names
// plus values (strings and binaries by length, numbers at about one byte per
// two digits, containers by their contents plus a few bytes).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += len(s)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueSize(e) + 1
		}
		return n
	default:
		return 1
	}
}

func quote(s string) string { return strconv.Quote(s) }

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }
