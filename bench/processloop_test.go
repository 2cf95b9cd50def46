package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestPrintProcessLoop: lake bench process-loop's figures are the syncs of
// each interval and the first tenth of the syncs against the last, by the
// time each ended (a run whose syncs grow from 100 to 290 requests prints
// 105 against 285, ratio 2.71×).
func TestPrintProcessLoop(t *testing.T) {
	var syncs []ProcessSync
	for i := 19; i >= 0; i-- { // out of order, as workers report
		syncs = append(syncs, ProcessSync{At: time.Duration(i) * time.Second, Requests: 100 + 10*i, Took: time.Second})
	}
	var out bytes.Buffer
	PrintProcessLoop(&out, syncs, ProcessLoopConfig{Duration: 20 * time.Second, Reports: 2})
	got := out.String()
	for _, want := range []string{
		"0s–10s                10          145.0           190           1.00",
		"10s–20s               10          245.0           290           1.00",
		"20 syncs; first tenth (2): 105.0 requests, 1.00 s a sync; last tenth (2): 285.0 requests, 1.00 s a sync; ratio 2.71×",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
