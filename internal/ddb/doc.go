// Package ddb is lake's one home for DynamoDB plumbing: every user of
// DynamoDB (the metastore driver metastore/dynamostore, the datastore
// driver datastore/dynamofs, the lock storage on both, reshape, sweep and
// the benches) gets its client, its metering, its error classes and its
// retry policy here, so that a rule fixed once holds for all of them.
//
// # Client
//
// LoadConfig reads the standard AWS environment (credentials, AWS_REGION,
// AWS_ENDPOINT_URL_DYNAMODB, the shared config files); NewClient builds the
// client the drivers use (no SDK retries: a driver retries each logical
// operation itself, see Retry), NewRetryingClient the one reshape and sweep
// use (the SDK retries each request under NewRetryer's policy). Callers
// depend on API, the narrow interface of the operations lake sends, so a
// fault-injecting client can sit in between.
//
// # Metering
//
// A Meter counts requests, items evaluated, returned and written, and the
// consumed capacity the server reported, per table and operation (Op).
// Drivers present it as their own Stats.
//
// # Errors
//
// Classify sorts a failed request into a Class: a failed condition, a
// cancelled transaction (FailedConditions names its items), throttling, a
// missing table, a refused request, or an Ambiguous outcome (a lost
// response, a reset, a 5xx: a write may have landed). SurelyNotApplied
// tells the refusals that certainly changed nothing apart. Translate maps
// what a caller did not explain to the metastore's sentinels.
//
// # Retries
//
// NewRetryer is the retry policy: bounded attempts (8 by default),
// full-jitter exponential backoff, the SDK's retryable errors plus
// transactions cancelled for transient reasons only, and no client-side
// quota. Retry runs a logical operation under it, stopping when the context
// ends. Backoff is the short pause of a caller's own loop that lost a race
// on an item.
//
// # Conditional writes
//
// Writer.PutOnce is the one single-item conditional write: it stamps the
// item with the write's token (TokenAttr) and, after an attempt whose
// outcome was not seen, reads back in the retry itself (a PutItem
// conditioned on the token): the item carries the token, so the write
// applied; or it does not, and the outcome is unknown (ErrUnknownOutcome,
// a metastore.ErrUnavailable), never a conflict. Transactions get the same
// guarantee from DynamoDB's ClientRequestToken (NewToken), reused by every
// retry of one transaction.
package ddb
