// Package server is the HTTP face of a lake node (`lake serve`): an
// http.Handler that exposes the whole metastore contract of one
// *metastore.Store, plus the node's own duties: write admission, a catalog
// cache, health, readiness and Prometheus metrics. Package
// metastore/remotestore is its client; package nodeapi holds the wire
// format both use, and docs/node.md describes the API for people.
//
// # Endpoints
//
//	GET    /v1/kv/{key}          the value, with a strong ETag; 404 if missing
//	PUT    /v1/kv/{key}          Put; If-None-Match: * creates; If-Match: ETag is a CAS
//	DELETE /v1/kv/{key}          delete-if-equals; If-Match is required (428 without)
//	POST   /v1/guarded-mutate    GuardedMutate, JSON body
//	GET    /v1/list              one page of List (?prefix=&limit=&cursor=)
//	GET    /v1/catalog           the cached catalog prefix, with its age and last error (?limit=&after= pages it)
//	POST   /v1/admin/pause       pause write admission (and wait for in-flight writes)
//	POST   /v1/admin/resume      resume it
//	GET    /healthz              the process is alive
//	GET    /readyz               the store has answered a read
//	GET    /metrics              Prometheus metrics, all named lake_*
//
// The key is the rest of the path after /v1/kv/, percent-decoded; "/" may be
// written as is or as %2F. A query string on a key path is refused rather
// than ignored, since it almost always is a "?" that should have been %3F.
//
// # Conditional writes
//
// If-Match carries the ETag (nodeapi.ETag) of the value the client expects.
// The server reads the current value, compares its ETag, and then calls CAS
// (or Delete) with the value it read as the expected one: the store checks
// exact bytes, so a change between the read and the write is a conflict
// (412), never a lost update.
//
// # Errors
//
// Every error is a JSON nodeapi.Error whose code names a metastore sentinel
// (nodeapi.CodeOf); remotestore maps it back so that errors.Is works on the
// client. writes_paused and unavailable come with Retry-After.
//
// # Serving and memory
//
// Listen binds the address (before anything is created); Serve runs the
// node on it with its timeouts and shutdown order, and rewrites the errors
// net/http answers before any handler (a malformed request line, a bad
// Content-Length) into the same JSON errors. A list page is bounded by
// metastore.MaxPageBytes and streamed; the catalog copy is bounded by
// Options.CatalogMaxBytes; a body must arrive within Options.BodyTimeout
// (408 after it). Query strings, If-Match/If-None-Match and JSON bodies are
// parsed strictly: what cannot be read exactly is refused, never guessed.
//
// # Authentication
//
// With Options.Token set, every /v1/ request needs "Authorization: Bearer
// TOKEN"; /healthz, /readyz and /metrics stay open for probes and scrapers
// (they reveal no key or value). A node that listens beyond loopback
// without a token is refused (CheckListen).
package server
