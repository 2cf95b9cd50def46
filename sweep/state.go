package sweep

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// State is the durable position of a sweep: its segment count and one cursor
// per segment.
type State struct {
	Segments int      `json:"segments"`
	Cursors  []Cursor `json:"cursors"`
}

func (s State) validate() error {
	if s.Segments < 1 || s.Segments > MaxSegments || len(s.Cursors) != s.Segments {
		return fmt.Errorf("lake: sweep: recorded state is damaged: %d segments, %d cursors", s.Segments, len(s.Cursors))
	}
	return nil
}

// Done says every segment reached the end.
func (s State) Done() bool {
	for _, c := range s.Cursors {
		if !c.Done {
			return false
		}
	}
	return len(s.Cursors) > 0
}

// Cursor is one segment's position: after the item whose key is Key (nil:
// from the start), or Done at the end.
type Cursor struct {
	Key  map[string]types.AttributeValue
	Done bool
}

type cursorJSON struct {
	Key  map[string]map[string]string `json:"key,omitempty"`
	Done bool                         `json:"done,omitempty"`
}

// MarshalJSON encodes the cursor; key attributes are strings, numbers or
// binaries (the only types DynamoDB allows in a key).
func (c Cursor) MarshalJSON() ([]byte, error) {
	j := cursorJSON{Done: c.Done}
	if len(c.Key) > 0 {
		j.Key = make(map[string]map[string]string, len(c.Key))
		for name, v := range c.Key {
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				j.Key[name] = map[string]string{"S": v.Value}
			case *types.AttributeValueMemberN:
				j.Key[name] = map[string]string{"N": v.Value}
			case *types.AttributeValueMemberB:
				j.Key[name] = map[string]string{"B": base64.StdEncoding.EncodeToString(v.Value)}
			default:
				return nil, fmt.Errorf("lake: sweep: key attribute %q has type %T, not S, N or B", name, v)
			}
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (c *Cursor) UnmarshalJSON(b []byte) error {
	var j cursorJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("lake: sweep: bad cursor: %w", err)
	}
	*c = Cursor{Done: j.Done}
	if len(j.Key) == 0 {
		return nil
	}
	c.Key = make(map[string]types.AttributeValue, len(j.Key))
	for name, tv := range j.Key {
		if len(tv) != 1 {
			return fmt.Errorf("lake: sweep: bad cursor: attribute %q", name)
		}
		for t, v := range tv {
			switch t {
			case "S":
				c.Key[name] = &types.AttributeValueMemberS{Value: v}
			case "N":
				c.Key[name] = &types.AttributeValueMemberN{Value: v}
			case "B":
				raw, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return fmt.Errorf("lake: sweep: bad cursor: attribute %q: %w", name, err)
				}
				c.Key[name] = &types.AttributeValueMemberB{Value: raw}
			default:
				return fmt.Errorf("lake: sweep: bad cursor: attribute %q has type %q", name, t)
			}
		}
	}
	return nil
}
