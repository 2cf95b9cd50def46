package syncload

import "time"

// Sample is one iteration of one worker: what it did, what each step took
// and what it cost. Worker processes send them to the parent as JSON lines.
type Sample struct {
	Worker    int `json:"w"`
	Iteration int `json:"i"`
	// End is when the iteration ended, as an offset from the run's start.
	End time.Duration `json:"end"`
	// OK is false when a step failed (Err says which and why); LockTimeout
	// marks a failure that was a lock wait running out.
	OK          bool   `json:"ok"`
	Err         string `json:"err,omitempty"`
	LockTimeout bool   `json:"lockTimeout,omitempty"`
	// Syncs the iteration ran (run, delete, prune).
	Syncs int `json:"syncs"`
	// Step latencies, summed over the iteration's syncs. Lock is the lock
	// wait; Pull, Push and Commit the time in the datastore calls of those
	// steps (Push includes the batch stat); Work the method run; Catalog
	// the catalog step; Prune the lifecycle's sync, whole.
	Lock, Pull, Work, Push, Commit, Catalog, Prune time.Duration
	// Requests, ItemsRead and ItemsWritten count the worker's datastore
	// calls and the items they returned or wrote; IndexWritten the index
	// entries its commits wrote.
	Requests, ItemsRead, ItemsWritten, IndexWritten int64
	// CatalogRows is the catalog's size at the iteration's last read.
	CatalogRows int `json:"catalogRows"`
	// LiveFiles counts the files the worker's models hold in the datastore
	// (the namespace index is the sum over the namespace's workers).
	LiveFiles int `json:"liveFiles"`
	// Keys counts requests by key.
	Keys map[string]int64 `json:"keys,omitempty"`
	// StoreRequests and StoreItemsRead are DynamoDB's or S3's own
	// requests (one a request on the wire, however many keys it
	// addresses) and items read, StoreKeys the load by partition key or key
	// prefix: items read, at least one per request (zero without
	// DynamoKeys or S3Keys).
	StoreRequests, StoreItemsRead int64
	StoreKeys                     map[string]int64 `json:"storeKeys,omitempty"`
}
