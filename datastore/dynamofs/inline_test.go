package dynamofs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// TestInlineHostilePeer (issue 31, hostile peer): a small file lake wrote is
// in its path item for any client to read (a raw GetItem shows the content
// in `inl`, chunks 0, and there is no chunk item); a foreign writer's inline
// content that is too large, of the wrong type, not what its SHA-256 says,
// or beside chunks reads as a damaged file naming the path, never a panic,
// while other paths read on; a well-formed foreign inline file reads.
func TestInlineHostilePeer(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	paths := []string{"data/t/i/ok", "data/t/i/large", "data/t/i/type", "data/t/i/liar", "data/t/i/both", "data/t/i/foreign"}
	for _, p := range paths {
		if _, err := s.Put(ctx, p, strings.NewReader("hello"), nil); err != nil {
			t.Fatal(err)
		}
	}
	k := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "f#t/i"}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	got, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: k("data/t/i/ok"), ConsistentRead: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	inl, _ := got.Item["inl"].(*types.AttributeValueMemberB)
	chunks, _ := got.Item["chunks"].(*types.AttributeValueMemberN)
	if inl == nil || string(inl.Value) != "hello" || chunks == nil || chunks.Value != "0" {
		t.Fatalf("raw GetItem of a 5-byte file = %v; want inl \"hello\" and chunks 0", got.Item)
	}
	ver := got.Item["ver"].(*types.AttributeValueMemberS).Value
	q, err := raw.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: new("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "c#" + ver}}})
	if err != nil || len(q.Items) != 0 {
		t.Fatalf("chunk items of an inline file: %v, %v; want none", q.Items, err)
	}

	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	big := bytes.Repeat([]byte("x"), datastore.InlineMax+1)
	update := func(sk string, u expression.UpdateBuilder) {
		t.Helper()
		e, err := expression.NewBuilder().WithUpdate(u).Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: k(sk),
			UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}); err != nil {
			t.Fatalf("raw UpdateItem: %v", err)
		}
	}
	update("data/t/i/large", expression.Set(expression.Name("inl"), expression.Value(big)).
		Set(expression.Name("size"), expression.Value(len(big))).Set(expression.Name("sha"), expression.Value(sum(big))))
	update("data/t/i/type", expression.Set(expression.Name("inl"), expression.Value("hello")))
	update("data/t/i/liar", expression.Set(expression.Name("inl"), expression.Value([]byte("HELLO"))))
	update("data/t/i/both", expression.Set(expression.Name("chunks"), expression.Value(1)))
	update("data/t/i/foreign", expression.Set(expression.Name("inl"), expression.Value([]byte("peer!"))).
		Set(expression.Name("sha"), expression.Value(sum([]byte("peer!")))))
	for _, p := range []string{"data/t/i/large", "data/t/i/type", "data/t/i/liar", "data/t/i/both"} {
		_, err := s.GetTo(ctx, p, io.Discard)
		if !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), p) {
			t.Fatalf("GetTo(%s) = %v, want a damaged-file error naming it", p, err)
		}
		if info, err := s.Stat(ctx, p); err == nil {
			if ok, err := datastore.WriteInline(info, io.Discard); ok && !errors.Is(err, datastore.ErrDamaged) {
				t.Fatalf("WriteInline(%s) = %v, want a damaged-file error", p, err)
			}
		}
	}
	if _, b, err := s.Get(ctx, "data/t/i/ok"); err != nil || string(b) != "hello" {
		t.Fatalf("Get of another path = %q, %v", b, err)
	}
	if _, b, err := s.Get(ctx, "data/t/i/foreign"); err != nil || string(b) != "peer!" {
		t.Fatalf("Get of a well-formed foreign inline file = %q, %v", b, err)
	}
}

// oneChunk returns s padded to one byte more than InlineMax: a file stored
// in one chunk, for the tests whose subject is chunks (intents, reclaim,
// check) rather than inline files.
func oneChunk(s string) string {
	return s + strings.Repeat(".", max(0, datastore.InlineMax+1-len(s)))
}
