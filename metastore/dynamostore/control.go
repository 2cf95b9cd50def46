package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/keyspace"
	"github.com/lakemeta/lake/metastore"
)

// controlKey returns the primary key of a control record in table.
func (d *Driver) controlKey(table, key string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: key}}
	if table == d.v2 {
		k[attrBucket] = &types.AttributeValueMemberS{Value: controlBucket}
	}
	return k
}

// getControl reads a control record; found is false when it is absent.
func (d *Driver) getControl(ctx context.Context, table, key string) (item map[string]types.AttributeValue, found bool, err error) {
	var out *dynamodb.GetItemOutput
	err = d.retry(ctx, func(int) error {
		d.meter.control()
		out, err = d.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(table), Key: d.controlKey(table, key), ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return nil, false, d.classify(err, table)
	}
	return out.Item, out.Item != nil, nil
}

// checkParams compares the v2 table's frozen layout parameters with ours.
func (d *Driver) checkParams(ctx context.Context) error {
	item, found, err := d.getControl(ctx, d.v2, layoutKey)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %q has no layout parameters (run `lake init` with this store URL)", ErrNoTable, d.v2)
	}
	v, ok := item[attrValue].(*types.AttributeValueMemberB)
	if !ok {
		return fmt.Errorf("lake: layout parameters of %q are not binary", d.v2)
	}
	stored, err := keyspace.Unmarshal(v.Value)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrLayoutMismatch, d.v2, err)
	}
	if !stored.Equal(d.params) {
		return fmt.Errorf("%w: %q was created with %s, this process computes %s", ErrLayoutMismatch, d.v2, stored.Marshal(), d.params.Marshal())
	}
	return nil
}

// registerFamily adds family to the v2 family registry before its first
// write, with an atomic ADD to a string set, so concurrent registrations of
// different families never overwrite each other. Each process does it once
// per family.
func (d *Driver) registerFamily(ctx context.Context, family string) error {
	if family == metastore.RootFamily || d.layout == LayoutV1 {
		return nil
	}
	if d.layout == LayoutAuto {
		// Before dual the v2 table may not exist; the backfill registers
		// the families it copies.
		snap, err := d.state(ctx, false)
		if err != nil {
			return err
		}
		if snap.m.State == StateV1 {
			return nil
		}
	}
	if _, ok := d.registered.Load(family); ok {
		return nil
	}
	if _, ok := d.registered.Load(family); ok {
		return nil
	}
	return d.addFamily(ctx, family)
}

// addFamily adds family to the registry (idempotent).
func (d *Driver) addFamily(ctx context.Context, family string) error {
	upd, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name(attrFamilies),
		expression.Value(&types.AttributeValueMemberSS{Value: []string{family}}))).Build()
	if err != nil {
		return fmt.Errorf("lake: build registry update: %w", err)
	}
	err = d.retry(ctx, func(int) error {
		d.meter.control()
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(d.v2), Key: d.controlKey(d.v2, familiesKey),
			UpdateExpression: upd.Update(), ExpressionAttributeNames: upd.Names(), ExpressionAttributeValues: upd.Values(),
		})
		return err
	})
	if err != nil {
		return d.classify(err, d.v2)
	}
	d.registered.Store(family, struct{}{})
	return nil
}

// registeredFamilies reads the family registry.
func (d *Driver) registeredFamilies(ctx context.Context) ([]string, error) {
	item, _, err := d.getControl(ctx, d.v2, familiesKey)
	if err != nil {
		return nil, err
	}
	ss, _ := item[attrFamilies].(*types.AttributeValueMemberSS)
	if ss == nil {
		return nil, nil
	}
	return slices.Clone(ss.Value), nil
}

// Create makes the table opts.Layout needs, on demand (PAY_PER_REQUEST): the
// v1 table for LayoutV1 and LayoutAuto (a migration starts from it and
// creates v2 when it enters dual), the v2 table for LayoutV2; and
// waits until they are ACTIVE; for v2 it also freezes the layout parameters
// into the table. It is idempotent: existing tables are checked, not
// changed, and parameters that differ from the table's give ErrLayoutMismatch.
func Create(ctx context.Context, api ddb.API, opts Options) error {
	if err := opts.fill(); err != nil {
		return err
	}
	d := newDriver(api, opts)
	if opts.Layout != LayoutV2 {
		if err := d.createTable(ctx, d.v1, []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}}); err != nil {
			return err
		}
		// TTL on "expires": the backstop of writes made with
		// metastore.WithExpiry (lock records). A legacy table may already
		// have a TTL on an attribute of its own (DynamoDB allows one): the
		// backstop then stays off, which costs nothing but space.
		err := d.enableTTLOn(ctx, d.v1)
		if errors.Is(err, metastore.ErrInvalidArgument) {
			return nil // DynamoDB refused it (a ValidationException)
		}
		return err
	}
	err := d.createTable(ctx, d.v2, []types.KeySchemaElement{
		{AttributeName: aws.String(attrBucket), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeRange},
	})
	if err == nil {
		err = d.enableTTLOn(ctx, d.v2)
	}
	if err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrPK))).Build()
	if err != nil {
		return err
	}
	item := d.controlKey(d.v2, layoutKey)
	item[attrValue] = &types.AttributeValueMemberB{Value: d.params.Marshal()}
	err = d.retry(ctx, func(int) error {
		_, err := api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(d.v2), Item: item, ConditionExpression: cond.Condition(),
			ExpressionAttributeNames: cond.Names(),
		})
		return err
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return d.classify(err, d.v2)
	}
	// Present already (or just written): the table's parameters rule.
	return d.checkParams(ctx)
}

func (d *Driver) createTable(ctx context.Context, table string, schema []types.KeySchemaElement) error {
	var defs []types.AttributeDefinition
	for _, k := range schema {
		defs = append(defs, types.AttributeDefinition{AttributeName: k.AttributeName, AttributeType: types.ScalarAttributeTypeS})
	}
	_, err := d.api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), KeySchema: schema, AttributeDefinitions: defs,
		BillingMode: types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return d.classify(err, table)
	}
	waiter := dynamodb.NewTableExistsWaiter(d.api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 500*time.Millisecond, 10*time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("lake: waiting for table %q to become ACTIVE: %w", table, err)
	}
	if !slices.EqualFunc(out.Table.KeySchema, schema, func(a, b types.KeySchemaElement) bool {
		return aws.ToString(a.AttributeName) == aws.ToString(b.AttributeName) && a.KeyType == b.KeyType
	}) {
		return fmt.Errorf("%w: table %q exists with another key schema than layout %s needs", metastore.ErrRefused, table, d.layout)
	}
	return nil
}
