package reshape

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// template derives one attribute's value from an item's attributes: literal
// text with references in braces, such as "MEMBER#{memberId}". "{{" and "}}"
// stand for literal braces.
type template struct {
	src   string
	parts []part
}

type part struct {
	lit string // literal text, when ref is empty
	ref string // an attribute name
}

// parseTemplate parses src; an unbalanced brace or an empty reference is an
// error.
func parseTemplate(src string) (template, error) {
	t := template{src: src}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexAny(src[i+1:], "{}")
			if end < 0 || src[i+1+end] != '}' {
				return template{}, fmt.Errorf("template %q: the brace at byte %d is not closed (write {{ for a literal brace)", src, i)
			}
			name := src[i+1 : i+1+end]
			if strings.TrimSpace(name) == "" {
				return template{}, fmt.Errorf("template %q: empty reference {} at byte %d", src, i)
			}
			flush()
			t.parts = append(t.parts, part{ref: name})
			i += end + 1
		case c == '}':
			return template{}, fmt.Errorf("template %q: a lone } at byte %d (write }} for a literal brace)", src, i)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

// String returns the template as written.
func (t template) String() string { return t.src }

// Refs returns the attribute names the template references, in order, each
// once.
func (t template) Refs() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range t.parts {
		if p.ref != "" && !seen[p.ref] {
			seen[p.ref] = true
			out = append(out, p.ref)
		}
	}
	return out
}

// single says the template is exactly one reference, so that it may derive a
// number.
func (t template) single() bool { return len(t.parts) == 1 && t.parts[0].ref != "" }

// render derives the value from item. A referenced attribute that is missing
// or is neither a string nor a number makes the item not derivable; the
// error says which attribute and why.
func (t template) render(item map[string]types.AttributeValue) (string, error) {
	var sb strings.Builder
	for _, p := range t.parts {
		if p.ref == "" {
			sb.WriteString(p.lit)
			continue
		}
		s, err := scalar(item, p.ref)
		if err != nil {
			return "", err
		}
		sb.WriteString(s)
	}
	return sb.String(), nil
}

// scalar returns a string or number attribute as text.
func scalar(item map[string]types.AttributeValue, name string) (string, error) {
	switch v := item[name].(type) {
	case nil:
		return "", fmt.Errorf("attribute %s is missing", name)
	case *types.AttributeValueMemberS:
		return v.Value, nil
	case *types.AttributeValueMemberN:
		return v.Value, nil
	default:
		return "", fmt.Errorf("attribute %s is a %s, not a string or number", name, typeName(v))
	}
}

func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberM:
		return "M"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	default:
		return fmt.Sprintf("%T", v)
	}
}
