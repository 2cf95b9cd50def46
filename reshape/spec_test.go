package reshape

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

func exampleSpec(t *testing.T) *Spec {
	t.Helper()
	s, err := Load("../examples/reshape/saas-comments.json")
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}
	return s
}

func TestExampleSpecLoads(t *testing.T) {
	s := exampleSpec(t)
	if got := strings.Join(s.Derived(), ","); got != "GSI1PK,GSI1SK" {
		t.Errorf("derived = %s", got)
	}
	if got := strings.Join(s.Sources(), ","); got != "commentId,createdAt,memberId" {
		t.Errorf("sources = %s", got)
	}
}

// mutate returns the example spec's JSON with one replacement applied.
func mutate(t *testing.T, old, new string) []byte {
	t.Helper()
	b, err := os.ReadFile("../examples/reshape/saas-comments.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("example has no %q", old)
	}
	return []byte(strings.Replace(string(b), old, new, 1))
}

func TestSpecValidation(t *testing.T) {
	cases := []struct {
		name, old, new, wantErr string
	}{
		{"local index refused with the reason", `"type": "global"`, `"type": "local"`, "a local secondary index can only be created with the table, so on a live table a global secondary index is the only option"},
		{"unknown field", `"timestamp"`, `"timestmp"`, `unknown field "timestmp"`},
		{"unknown kind", `"add-index"`, `"rewrite"`, `kind: "rewrite" is unknown`},
		{"bad table name", `"table": "saas"`, `"table": "s"`, "is not a DynamoDB table name"},
		{"key without template", `"GSI1SK": "CMT#{createdAt}#{commentId}"`, `"other": "x"`, "no template for index key attribute GSI1SK"},
		{"unclosed brace", `MEMBER#{memberId}`, `MEMBER#{memberId`, "is not closed"},
		{"lone closing brace", `MEMBER#{memberId}`, `MEMBER#memberId}`, "a lone }"},
		{"empty reference", `MEMBER#{memberId}`, `MEMBER#{}`, "empty reference"},
		{"derived from derived", `CMT#{createdAt}#{commentId}`, `{GSI1PK}`, "is derived and also referenced"},
		{"binary key", `"partitionKey": {"attribute": "GSI1PK", "type": "S"}`, `"partitionKey": {"attribute": "GSI1PK", "type": "B"}`, "B is not supported"},
		{"number key from text", `"sortKey": {"attribute": "GSI1SK", "type": "S"}`, `"sortKey": {"attribute": "GSI1SK", "type": "N"}`, "must be derived from exactly one number attribute"},
		{"include without INCLUDE", `"projection": "ALL"`, `"projection": "ALL", "include": ["body"]`, "only with projection INCLUDE"},
		{"bad projection", `"projection": "ALL"`, `"projection": "SOME"`, "is not ALL, KEYS_ONLY or INCLUDE"},
		{"covers on derived", `"present": ["commentId"]`, `"present": ["commentId", "GSI1PK"]`, "covers.present: GSI1PK is derived"},
		{"absent derived", `"present": ["commentId"]`, `"present": ["commentId"], "absent": ["GSI1SK"]`, "a converted item would stop being covered"},
		{"trailing data", `"timestamp": "createdAt"
}`, `"timestamp": "createdAt"
} {}`, "trailing data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(mutate(t, c.old, c.new))
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", c.wantErr)
			}
			if !errors.Is(err, metastore.ErrInvalidArgument) {
				t.Errorf("error %v is not ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) || !strings.HasPrefix(err.Error(), "lake: ") {
				t.Errorf("error %q does not start with lake: or lacks %q", err, c.wantErr)
			}
		})
	}
}

func TestSpecListsEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`{"kind":"add-index","table":"t","index":{"name":"G","type":"local","partitionKey":{}},"derive":{}}`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"table:", "index.name:", "index.type:", "index.partitionKey.attribute: missing", "derive: missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestTemplate(t *testing.T) {
	item := av("memberId", "u44", "createdAt", "2026-04-01T09:00:00Z")
	item["n"] = &types.AttributeValueMemberN{Value: "42"}
	item["flag"] = &types.AttributeValueMemberBOOL{Value: true}
	cases := []struct {
		src, want, wantErr string
	}{
		{"MEMBER#{memberId}", "MEMBER#u44", ""},
		{"{createdAt}#{n}", "2026-04-01T09:00:00Z#42", ""},
		{"{{literal}}#{memberId}", "{literal}#u44", ""},
		{"constant", "constant", ""},
		{"X#{missing}", "", "attribute missing is missing"},
		{"X#{flag}", "", "attribute flag is a BOOL, not a string or number"},
	}
	for _, c := range cases {
		tp, err := parseTemplate(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := tp.render(item)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.src, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s = %q, %v; want %q", c.src, got, err, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	s := exampleSpec(t)
	comment := DemoComment("a91", "DOC#2026-04-01#x7", "c1", "u44", mustTime("2026-04-01T09:00:00Z"))
	noMember := with(comment)
	delete(noMember, "memberId")
	cases := []struct {
		name string
		item map[string]types.AttributeValue
		want State
	}{
		{"document", av("PK", "WS#a91", "SK", "DOC#2026-04-01#x7", "title", "t"), NotCovered},
		{"member", av("PK", "WS#a91", "SK", "MEMBER#u44", "memberId", "u44"), NotCovered},
		{"other partition", with(comment, "PK", "ORG#1"), NotCovered},
		{"old comment", comment, Missing},
		{"converted", with(comment, "GSI1PK", "MEMBER#u44", "GSI1SK", "CMT#2026-04-01T09:00:00Z#c1"), Converted},
		{"edited by an old writer", with(comment, "memberId", "u45", "GSI1PK", "MEMBER#u44", "GSI1SK", "CMT#2026-04-01T09:00:00Z#c1"), Stale},
		{"half converted", with(comment, "GSI1PK", "MEMBER#u44"), Stale},
		{"no member", noMember, NotDerivable},
		{"empty member is fine", with(comment, "memberId", ""), Missing},
	}
	for _, c := range cases {
		if got := s.Classify(c.item); got.State != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, got.State, got.Reason, c.want)
		}
	}
}

func TestDemoSpecIsTheExample(t *testing.T) {
	b, err := os.ReadFile("../examples/reshape/saas-comments.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(demoSpecJSON, "saas"); string(b) != want {
		t.Fatalf("examples/reshape/saas-comments.json differs from DemoSpec:\n%s\nwant\n%s", b, want)
	}
	if _, err := DemoSpec("saas"); err != nil {
		t.Fatal(err)
	}
}
