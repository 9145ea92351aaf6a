package report

// A progress bar on rank 0's terminal.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Progress draws "[#####.....] 12/22 steps 3.4s" on stderr when it is a
// terminal; otherwise it does nothing.
type Progress struct {
	on    bool
	start time.Time
	last  time.Time
	width int // the length of the longest line drawn, which done clears
	out   io.Writer
}

// NewProgress returns a bar that draws when want and stderr is a terminal.
func NewProgress(want bool) *Progress {
	p := &Progress{start: time.Now(), out: os.Stderr}
	if want {
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.on = true
		}
	}
	return p
}

// Update redraws the bar after step done of total, at most 10 times a
// second.
func (p *Progress) Update(done, total int) {
	if !p.on || total == 0 {
		return
	}
	now := time.Now()
	if done < total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	const width = 30
	n := done * width / total
	line := fmt.Sprintf("[%s%s] %d/%d steps %.1fs ", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, now.Sub(p.start).Seconds())
	p.width = max(p.width, len(line))
	fmt.Fprintf(p.out, "\r%s", line)
}

// Done clears the bar.
func (p *Progress) Done() {
	if p.on {
		fmt.Fprintf(p.out, "\r%s\r", strings.Repeat(" ", p.width))
	}
}
