package remotestore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/datastore/remotefs"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/storeurl"
)

// A node URL with user info is refused without repeating the secret, on
// every client path that parses one (issue 26, row 7).
func TestNodeURLSecretNeverInErrors(t *testing.T) {
	const secret = "hunter2secret"
	urls := []string{
		"http://admin:" + secret + "@127.0.0.1:7070",
		"https://" + secret + "@127.0.0.1:7070/x",
		"http://admin:" + secret + "@127.0.0.1:notaport",
		"admin:" + secret + "@127.0.0.1:7070",
		"dynamodb://t?endpoint=http://admin:" + secret + "@127.0.0.1:99999",
		"dynamodb://t?endpoint=ftp://admin:" + secret + "@127.0.0.1:1",
	}
	for _, u := range urls {
		var errs []error
		_, err := remotestore.New(u, nil)
		errs = append(errs, err)
		_, err = remotefs.Open(context.Background(), u, nil)
		errs = append(errs, err)
		_, err = storeurl.Open(context.Background(), u, nil)
		errs = append(errs, err)
		_, err = dsurl.Open(context.Background(), u, nil)
		errs = append(errs, err)
		for i, err := range errs {
			if err == nil {
				t.Errorf("%d: %q accepted", i, u)
				continue
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%d: error for %q repeats the secret: %v", i, u, err)
			}
		}
	}
}
