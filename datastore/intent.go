package datastore

import (
	"context"
	"time"
)

// IntentChecker is the optional ability of a driver whose upload intents
// are keyed by their start time (DynamoDB, S3) to say whether the intent of
// version, begun at started, is live: recorded by BeginUpload and neither
// committed nor reclaimed. A node asks it before it stores a client's chunk,
// so that a chunk is written only under a live upload intent (issue 26); a
// driver that checks the intent in PutChunk itself (bolt) need not have it.
type IntentChecker interface {
	HasIntent(ctx context.Context, version string, started time.Time) (bool, error)
}
