package reshape

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// Every name reaches DynamoDB literally, whatever it holds, and a real name
// that looks like a stand-in is not mistaken for one.
func TestAttrNamesAreLiteral(t *testing.T) {
	var n attrNames
	names := []string{"author.id", "tags[0]", "n0", "n1", "a]b[", "x.y[2].z", "#0", ":v"}
	cond := expression.AttributeExists(n.name(names[0]))
	for _, a := range names[1:] {
		cond = expression.And(cond, n.name(a).Equal(expression.Value("v")))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for alias, real := range n.resolve(e.Names()) {
		if !strings.Contains(*e.Condition(), alias) {
			t.Fatalf("alias %s of %q not in %s", alias, real, *e.Condition())
		}
		got[real] = true
	}
	for _, a := range names {
		if !got[a] {
			t.Fatalf("%q missing from the resolved names %v", a, n.resolve(e.Names()))
		}
	}
	if len(got) != len(names) {
		t.Fatalf("resolved %d names, want %d: %v", len(got), len(names), got)
	}
}
