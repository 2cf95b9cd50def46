package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// procCPU reads utime and stime after the command name, which may hold
// spaces and parentheses, and refuses a line it cannot read.
func TestProcCPU(t *testing.T) {
	line := "8822 (java (x) y) S 1 8822 8822 0 -1 4194560 1 0 0 0 1234 566 0 0 20 0 40 0 100 0 0\n"
	got, err := procCPU(line)
	if err != nil || got != 18*time.Second {
		t.Fatalf("procCPU = %v, %v; want 18s (1800 ticks)", got, err)
	}
	for _, bad := range []string{"", "8822 java S 1", "1 (a) S 1 2 3 4 5 6 7 8 9 10 x 3 4", "1 (a) S 1 2 3 4 5 6 7 8 9 10 -5 3 4"} {
		if _, err := procCPU(bad); err == nil {
			t.Errorf("procCPU(%q) passed", bad)
		}
	}
	// This process's own line, where /proc exists.
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if _, err := procCPU(string(b)); err != nil {
			t.Fatalf("this process's /proc/self/stat: %v", err)
		}
		if _, err := sampleCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
}

// The CPU table is a markdown table of three copies, per item.
func TestPrintCompareCPU(t *testing.T) {
	r := CompareResult{Records: 1000, RawCopy: time.Second, RawTxCopy: 4 * time.Second, Backfill: 2 * time.Second,
		CPU: &CompareCPU{RawCopy: CopyCPU{Client: 16 * time.Millisecond, Server: 68 * time.Millisecond}, RawTxCopy: CopyCPU{Server: 300 * time.Millisecond}, Backfill: CopyCPU{Client: 32 * time.Millisecond}}}
	var b bytes.Buffer
	if err := PrintCompareCPU(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| copy (1000 records) | items/s | DynamoDB CPU per item | client CPU per item |", "| raw, Scan + BatchWriteItem, no conditions | 1000 | 68 µs | 16 µs |", "| raw, the backfill's conditioned transactions | 250 | 300 µs | 0 µs |", "| lake backfill | 500 | 0 µs | 32 µs |"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := PrintCompareCPU(&b, CompareResult{Records: 10}); err != nil || b.Len() != 0 {
		t.Fatalf("without CPU figures it printed %q, %v", b.String(), err)
	}
}
