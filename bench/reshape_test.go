package bench_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestReshape runs the reshape benchmark's engine at a small size.
func TestReshape(t *testing.T) {
	api := ddblocal.Client(t)
	res, err := bench.RunReshape(t.Context(), api, bench.ReshapeConfig{Table: ddblocal.TableName(t), Comments: 200, Segments: 2, PageSize: 50}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Passes) != 4 || res.Passes[1].Written != 200 || res.Passes[2].Written != 0 || res.Passes[0].Items != int64(res.Items) {
		t.Fatalf("result %+v", res)
	}
	if wcu := res.Passes[1].WCU / 200; wcu < 2 {
		t.Fatalf("%.2f WCU per converted comment: the index write is not counted", wcu)
	}
	var out bytes.Buffer
	if err := bench.PrintReshape(&out, res); err != nil || !strings.Contains(out.String(), "vs raw scan") {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
}
