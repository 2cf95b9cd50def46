package reshape

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// tableInfo is what a reshape needs to know of the live table.
type tableInfo struct {
	desc      *types.TableDescription
	keyNames  []string // HASH, then RANGE if any
	attrTypes map[string]types.ScalarAttributeType
}

// describe reads the table and checks that the spec fits it: the new
// attributes are not the table's keys (changing a key in place is a
// rewrite, not an added attribute), an attribute already defined keeps its
// type, and an index of that name, if any, is a GSI with the spec's keys.
func describe(ctx context.Context, api API, s *Spec) (*tableInfo, error) {
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Table)})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w: reshape: table %q does not exist", metastore.ErrNotFound, s.Table)
		}
		return nil, fmt.Errorf("lake: reshape: describe table %q: %w", s.Table, err)
	}
	t := &tableInfo{desc: out.Table, attrTypes: map[string]types.ScalarAttributeType{}}
	for _, k := range out.Table.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			t.keyNames = append([]string{aws.ToString(k.AttributeName)}, t.keyNames...)
		} else {
			t.keyNames = append(t.keyNames, aws.ToString(k.AttributeName))
		}
	}
	for _, d := range out.Table.AttributeDefinitions {
		t.attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	for _, k := range t.keyNames {
		if _, ok := s.Derive[k]; ok {
			return nil, fmt.Errorf("%w: reshape spec: derive.%s: %s is a key of table %s, and a key cannot change in place: that is a key rewrite (copy, dual-read, then delete), not an added attribute", metastore.ErrInvalidArgument, k, k, s.Table)
		}
	}
	if err := s.checkOwnership(out.Table); err != nil {
		return nil, err
	}
	for a := range s.Covers.KeyPrefixes {
		if typ, ok := t.attrTypes[a]; ok && typ != types.ScalarAttributeTypeS {
			return nil, fmt.Errorf("%w: reshape spec: covers.keyPrefixes.%s: %s is defined in table %s as type %s, and a prefix selects strings only: it would cover nothing", metastore.ErrInvalidArgument, a, a, s.Table, typ)
		}
	}
	if s.Index.Provisioned != nil {
		if bm := out.Table.BillingModeSummary; bm != nil && bm.BillingMode == types.BillingModePayPerRequest {
			return nil, fmt.Errorf("%w: reshape spec: index.provisioned: table %s is on-demand (PAY_PER_REQUEST), and its indexes take no provisioned throughput; remove index.provisioned", metastore.ErrInvalidArgument, s.Table)
		}
	}
	for _, ka := range s.indexKeys() {
		if typ, ok := t.attrTypes[ka.Attribute]; ok && string(typ) != ka.Type {
			return nil, fmt.Errorf("%w: reshape spec: %s is defined in table %s as type %s, the spec says %s", metastore.ErrInvalidArgument, ka.Attribute, s.Table, typ, ka.Type)
		}
	}
	for _, l := range out.Table.LocalSecondaryIndexes {
		if aws.ToString(l.IndexName) == s.Index.Name {
			return nil, fmt.Errorf("%w: reshape: table %s already has a local secondary index %s; name the new index otherwise", metastore.ErrRefused, s.Table, s.Index.Name)
		}
	}
	if g := t.index(s.Index.Name); g != nil {
		want := s.keySchema()
		if len(g.KeySchema) != len(want) {
			return nil, fmt.Errorf("%w: reshape: index %s of table %s exists with another key schema", metastore.ErrRefused, s.Index.Name, s.Table)
		}
		for i := range want {
			if aws.ToString(g.KeySchema[i].AttributeName) != aws.ToString(want[i].AttributeName) || g.KeySchema[i].KeyType != want[i].KeyType {
				return nil, fmt.Errorf("%w: reshape: index %s of table %s exists with another key schema", metastore.ErrRefused, s.Index.Name, s.Table)
			}
		}
	}
	return t, nil
}

// checkOwnership refuses a derived attribute that another index of the
// table keys on (unless the spec takes it over): writing it would move the
// items in that index, or change their type under it.
func (s *Spec) checkOwnership(desc *types.TableDescription) error {
	keyedBy := map[string][]string{} // attribute → the other indexes keyed on it
	add := func(kind string, name *string, ks []types.KeySchemaElement) {
		if kind == "global" && aws.ToString(name) == s.Index.Name {
			return // the spec's own index
		}
		for _, k := range ks {
			a := aws.ToString(k.AttributeName)
			keyedBy[a] = append(keyedBy[a], kind+" index "+aws.ToString(name))
		}
	}
	for _, g := range desc.GlobalSecondaryIndexes {
		add("global", g.IndexName, g.KeySchema)
	}
	for _, l := range desc.LocalSecondaryIndexes {
		add("local", l.IndexName, l.KeySchema)
	}
	var errs []string
	for _, d := range s.derived {
		if ix := keyedBy[d]; len(ix) > 0 && !s.takesOver(d) {
			errs = append(errs, fmt.Sprintf("derive.%s: %s is a key of the table's %s: deriving it would rewrite the items' own values under that index; derive an attribute of the spec's own, or name it in takeOver", d, d, strings.Join(ix, ", ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: reshape spec: %s", metastore.ErrInvalidArgument, strings.Join(errs, "; "))
	}
	return nil
}

// index returns the table's GSI of that name, nil when there is none.
func (t *tableInfo) index(name string) *types.GlobalSecondaryIndexDescription {
	for i := range t.desc.GlobalSecondaryIndexes {
		if aws.ToString(t.desc.GlobalSecondaryIndexes[i].IndexName) == name {
			return &t.desc.GlobalSecondaryIndexes[i]
		}
	}
	return nil
}

// key returns item's primary key.
func (t *tableInfo) key(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := make(map[string]types.AttributeValue, len(t.keyNames))
	for _, n := range t.keyNames {
		k[n] = item[n]
	}
	return k
}

func (s *Spec) indexKeys() []KeyAttr {
	out := []KeyAttr{s.Index.PartitionKey}
	if s.Index.SortKey != nil {
		out = append(out, *s.Index.SortKey)
	}
	return out
}

func (s *Spec) keySchema() []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(s.Index.PartitionKey.Attribute), KeyType: types.KeyTypeHash}}
	if s.Index.SortKey != nil {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(s.Index.SortKey.Attribute), KeyType: types.KeyTypeRange})
	}
	return ks
}
