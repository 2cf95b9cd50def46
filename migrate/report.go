package migrate

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore/dynamostore"
	"golang.org/x/sync/errgroup"
)

// maxReported bounds the differences a report keeps.
const maxReported = 20

// Report is the result of a verification.
type Report struct {
	Checked     int64                    `json:"checked"`
	MissingInV2 int64                    `json:"missing_in_v2"`
	ExtraInV2   int64                    `json:"extra_in_v2"`
	Different   int64                    `json:"different"`
	Unstamped   int64                    `json:"unstamped"`
	First       []dynamostore.Difference `json:"first,omitempty"`
	// Keys are the differing keys, at most dynamostore.MaxDivergedKeys
	// (what a repair converges); More counts the rest.
	Keys     []string      `json:"-"`
	More     int64         `json:"-"`
	Duration time.Duration `json:"duration_ns"`
	Recorded bool          `json:"recorded"`
}

// Clean reports whether nothing differs.
func (r Report) Clean() bool { return r.MissingInV2+r.ExtraInV2+r.Different == 0 }

// Summary is one line. Checked counts keys, each once: every v1 key
// compared with its v2 copy, and every v2 key v1 lacks.
func (r Report) Summary() string {
	return fmt.Sprintf("checked %d keys: %d missing in v2, %d extra in v2, %d different (%d unstamped, written by a non-lake writer)",
		r.Checked, r.MissingInV2, r.ExtraInV2, r.Different, r.Unstamped)
}

// firstInError bounds the keys an error message names.
const firstInError = 5

// Detail names the first differing keys, for error messages.
func (r Report) Detail() string {
	var parts []string
	for _, d := range r.First[:min(len(r.First), firstInError)] {
		p := fmt.Sprintf("%s %q", d.Kind, d.Key)
		if d.Unstamped {
			p += " (unstamped)"
		}
		parts = append(parts, p)
	}
	s := "first: " + strings.Join(parts, ", ")
	if n := r.MissingInV2 + r.ExtraInV2 + r.Different; n > int64(len(parts)) {
		s += fmt.Sprintf(" and %d more", n-int64(len(parts)))
	}
	return s
}

// Print writes the summary and the first differing keys for people.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%s in %v\n", r.Summary(), r.Duration.Round(time.Millisecond))
	for _, d := range r.First {
		un := ""
		if d.Unstamped {
			un = " (unstamped)"
		}
		fmt.Fprintf(w, "  %s %q%s\n", d.Kind, d.Key, un)
	}
}

func (r *Report) add(d dynamostore.Difference) {
	switch d.Kind {
	case dynamostore.MissingInV2:
		r.MissingInV2++
	case dynamostore.ExtraInV2:
		r.ExtraInV2++
	default:
		r.Different++
	}
	if d.Unstamped {
		r.Unstamped++
	}
	if len(r.First) < maxReported {
		r.First = append(r.First, d)
	}
	if len(r.Keys) < dynamostore.MaxDivergedKeys {
		r.Keys = append(r.Keys, d.Key)
	} else {
		r.More++
	}
}

// verify runs both passes at once, each as a parallel scan of
// Options.Segments segments; with since, only what changed since.
func (m *Migrator) verify(ctx context.Context, since *time.Time) (Report, error) {
	start := time.Now()
	var rep Report
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, pass := range []func(context.Context, dynamostore.Segment, string, int, *time.Time) (dynamostore.VerifyPageResult, error){m.p.VerifyV1Page, m.p.VerifyV2Page} {
		for i := range m.opts.Segments {
			seg := dynamostore.Segment{Index: i, Total: m.opts.Segments}
			g.Go(func() error {
				cur := ""
				for {
					page, err := pass(gctx, seg, cur, m.opts.PageSize, since)
					if err != nil {
						return err
					}
					mu.Lock()
					rep.Checked += page.Checked
					for _, d := range page.Differences {
						rep.add(d)
					}
					mu.Unlock()
					if cur = page.Next; cur == "" {
						return nil
					}
				}
			})
		}
	}
	if err := g.Wait(); err != nil {
		return rep, err
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// progress prints backfill progress: a redrawn line on a terminal, plain
// log lines (at most one every few seconds) otherwise.
type progress struct {
	w        io.Writer
	tty      bool
	start    time.Time
	base     int64
	last     time.Time
	lastLine string
}

func newProgress(w io.Writer, p dynamostore.BackfillProgress) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty, start: time.Now(), base: p.Scanned}
}

func (p *progress) line(b dynamostore.BackfillProgress) string {
	rate := float64(b.Scanned-p.base) / max(time.Since(p.start).Seconds(), 1e-9)
	return fmt.Sprintf("backfill: scanned %d, created %d, validated %d, repaired %d, %.0f items/s", b.Scanned, b.Created, b.Validated, b.Repaired, rate)
}

func (p *progress) update(b dynamostore.BackfillProgress) {
	p.lastLine = p.line(b)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", p.lastLine)
		return
	}
	if time.Since(p.last) >= 2*time.Second {
		fmt.Fprintln(p.w, p.lastLine)
		p.last = time.Now()
	}
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
	fmt.Fprintln(p.w, strings.Replace(p.lastLine, "backfill:", "backfill complete:", 1))
}
