package runtime

// A progress bar on rank 0's terminal.

import (
	"fmt"
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
}

func newProgress(want bool) *progressBar {
	p := &progressBar{start: time.Now()}
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
	fmt.Fprintf(os.Stderr, "\r[%s%s] %d/%d steps %.1fs ", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, now.Sub(p.start).Seconds())
}

// done clears the bar.
func (p *progressBar) done() {
	if p.on {
		fmt.Fprintf(os.Stderr, "\r%s\r", strings.Repeat(" ", 60))
	}
}
