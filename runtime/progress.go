package runtime

// A progress bar on rank 0's terminal.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressBar draws "[#####.....] 12/22 steps 3.4s" on stderr when it is a
// terminal; otherwise it does nothing.
type progressBar struct {
	on    bool
	start time.Time
	last  time.Time
	width int // the length of the longest line drawn, which done clears
	out   io.Writer
}

func newProgress(want bool) *progressBar {
	p := &progressBar{start: time.Now(), out: os.Stderr}
	if want {
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.on = true
		}
	}
	return p
}

// update redraws the bar after step done of total, at most 10 times a
// second.
func (p *progressBar) update(done, total int) {
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

// done clears the bar.
func (p *progressBar) done() {
	if p.on {
		fmt.Fprintf(p.out, "\r%s\r", strings.Repeat(" ", p.width))
	}
}
