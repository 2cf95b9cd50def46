package syncload

import (
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// ConfigStoreURL names a fresh datastore for configuration i of a scenario
// beside the one raw names, so that every configuration starts empty:
// bolt://PATH → bolt://PATH-cI; dynamodb://TABLE?… → dynamodb://TABLE-cI?…;
// s3://BUCKET/PREFIX → s3://BUCKET/PREFIX-cI (a sibling: two datastores
// in a bucket need prefixes neither of which starts the other). A node's datastore
// (http://) is one and cannot be multiplied.
func ConfigStoreURL(raw string, i int) (string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", fmt.Errorf("%w: store URL %q has no scheme", metastore.ErrInvalidArgument, raw)
	}
	suffix := fmt.Sprintf("c%d", i)
	switch scheme {
	case "bolt":
		return raw + "-" + suffix, nil
	case "dynamodb":
		table, query, _ := strings.Cut(rest, "?")
		if query != "" {
			query = "?" + query
		}
		return "dynamodb://" + table + "-" + suffix + query, nil
	case "s3":
		rest, query, _ := strings.Cut(rest, "?")
		if query != "" {
			query = "?" + query
		}
		return "s3://" + strings.TrimSuffix(rest, "/") + "-" + suffix + query, nil
	}
	return "", fmt.Errorf("%w: a scenario runs each configuration on a fresh datastore of its own and cannot make one from %q: use bolt://, dynamodb:// or s3://", metastore.ErrInvalidArgument, raw)
}
