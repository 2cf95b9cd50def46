package reshape

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// attrNames hands the expression builder a stand-in for every attribute
// name and puts the real names back into the built expression's names map.
//
// Attribute names in a spec or an item are names, not document paths:
// `author.id` and `tags[0]` are one top-level attribute each. The builder's
// Name reads `a.b` as a path and `a[0]` as a list element, and even
// NameNoDotSplit still reads brackets, so a condition on such an attribute
// would test another one (a path that never exists), fail every time, and
// leave the item unconverted. The builder aliases every name as #N in the
// expression text, so a stand-in of its own in place of each name, swapped
// back in ExpressionAttributeNames after Build, gives DynamoDB the literal
// name whatever characters it holds.
type attrNames struct {
	real  []string       // stand-in i ("n"+i) → real name
	index map[string]int // real name → i
}

// name returns the builder's operand for attribute attr, taken literally.
func (a *attrNames) name(attr string) expression.NameBuilder {
	return expression.Name(a.stand(attr))
}

// key returns the key condition's operand for key attribute attr.
func (a *attrNames) key(attr string) expression.KeyBuilder {
	return expression.Key(a.stand(attr))
}

func (a *attrNames) stand(attr string) string {
	if a.index == nil {
		a.index = map[string]int{}
	}
	i, ok := a.index[attr]
	if !ok {
		i = len(a.real)
		a.real = append(a.real, attr)
		a.index[attr] = i
	}
	return "n" + strconv.Itoa(i)
}

// resolve returns the built expression's names map with each stand-in
// replaced by the real name. Every name of the expression MUST have come
// from a.name or a.key, so that no stand-in is mistaken for a real name.
func (a *attrNames) resolve(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for alias, stand := range m {
		out[alias] = stand
		if i, err := strconv.Atoi(stand[1:]); err == nil && stand[0] == 'n' && i < len(a.real) {
			out[alias] = a.real[i]
		}
	}
	return out
}
