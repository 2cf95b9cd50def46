package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CopyCPU is the CPU time one copy of the records cost: this process's
// (lake's side, or the raw SDK's) and the DynamoDB server process's, read
// before and after the copy. The server's is all of its work meanwhile: on
// a server shared with other clients it is an upper bound.
type CopyCPU struct {
	Client, Server time.Duration
}

// cpuSample is the CPU used so far by this process and by the server.
type cpuSample struct{ client, server time.Duration }

// sampleCPU reads this process's user+system CPU (getrusage) and, when
// serverPID > 0, the server process's from /proc/PID/stat (Linux).
func sampleCPU(serverPID int) (cpuSample, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}, fmt.Errorf("lake: getrusage: %w", err)
	}
	s := cpuSample{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if serverPID > 0 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", serverPID))
		if err != nil {
			return s, fmt.Errorf("lake: the server's CPU (--server-pid %d): %w", serverPID, err)
		}
		if s.server, err = procCPU(string(b)); err != nil {
			return s, fmt.Errorf("lake: the server's CPU (--server-pid %d): %w", serverPID, err)
		}
	}
	return s, nil
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// procCPU returns utime+stime of a /proc/PID/stat line. The command name
// (field 2) may hold spaces and parentheses: the fields are counted after
// its last ')'; utime and stime are fields 14 and 15.
func procCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want 13 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("utime or stime %q is not a count of ticks", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuSince returns the CPU used since before.
func cpuSince(before cpuSample, serverPID int) (CopyCPU, error) {
	after, err := sampleCPU(serverPID)
	if err != nil {
		return CopyCPU{}, err
	}
	return CopyCPU{Client: after.client - before.client, Server: after.server - before.server}, nil
}

// PrintCompareCPU prints, as a markdown table, each copy's rate and its CPU
// per item on the server and in this process (RunCompare with ServerPID).
func PrintCompareCPU(w io.Writer, r CompareResult) error {
	if r.Records == 0 || r.CPU == nil {
		return nil
	}
	perItem := func(d time.Duration) string {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)/float64(r.Records))
	}
	rate := func(d time.Duration) float64 { return float64(r.Records) / max(d.Seconds(), 1e-9) }
	if _, err := fmt.Fprintf(w, "\n| copy (%d records) | items/s | DynamoDB CPU per item | client CPU per item |\n|---|---|---|---|\n", r.Records); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		wall time.Duration
		cpu  CopyCPU
	}{
		{"raw, Scan + BatchWriteItem, no conditions", r.RawCopy, r.CPU.RawCopy},
		{"raw, the backfill's conditioned transactions", r.RawTxCopy, r.CPU.RawTxCopy},
		{"lake backfill", r.Backfill, r.CPU.Backfill},
	} {
		if _, err := fmt.Fprintf(w, "| %s | %.0f | %s | %s |\n", c.name, rate(c.wall), perItem(c.cpu.Server), perItem(c.cpu.Client)); err != nil {
			return err
		}
	}
	return nil
}

// CompareCPU is the CPU of RunCompare's three copies.
type CompareCPU struct {
	RawCopy, RawTxCopy, Backfill CopyCPU
}
