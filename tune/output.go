package tune

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

func msText(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

// WriteTable prints the candidates in rank order: their options, buckets,
// predicted step, exposed communication and overlap, and for those that
// ran the measured step's p50, the prediction's error and wrong elements.
func (t *Tuning) WriteTable(w io.Writer) error {
	ran := false
	for _, c := range t.Candidates {
		ran = ran || c.Ran
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "rank\tplan (bucket " + t.Bucket + ")\tbuckets\tpredicted step(ms)\texposed(ms)\toverlap(%)"
	if ran {
		head += "\tmeasured p50(ms)\terror(%)\twrong"
	}
	fmt.Fprintln(tw, head+"\t")
	for i, c := range t.Candidates {
		label := c.Label()
		if c.Current() {
			label = "as written"
		}
		line := fmt.Sprintf("%d\t%s\t%d\t%s\t%s\t%.1f", i+1, label, c.Buckets, msText(c.Step), msText(c.Exposed), c.Overlap)
		if ran {
			if c.Ran {
				wrong := fmt.Sprint(c.Wrong)
				if c.Unchecked {
					wrong = "unchecked"
				}
				line += fmt.Sprintf("\t%s\t%+.1f\t%s", msText(c.Measured), 100*float64(c.Step-c.Measured)/float64(max(c.Measured, 1)), wrong)
			} else {
				line += "\t-\t-\t-"
			}
		}
		fmt.Fprintln(tw, line+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if t.Duplicates > 0 {
		fmt.Fprintf(w, "# %d grid point(s) left out: their buckets come out the same as an earlier grid point's\n", t.Duplicates)
	}
	for _, s := range t.Invalid {
		fmt.Fprintf(w, "# left out, the checker refused it: %s\n", s)
	}
	for _, s := range t.Unsplit {
		fmt.Fprintf(w, "# left out, the step rewriter cannot rewrite this step for %s\n", s)
	}
	return nil
}

// point is one point of the plot.
type point struct {
	cap  int64 // 0: no cap
	step time.Duration
}

// WriteSVG plots the predicted step time against the cap (log scale; no
// cap at the right end): one line per order, each point the best
// candidate of that cap and order; measured steps as rings.
func (t *Tuning) WriteSVG(w io.Writer) error {
	series := map[string]map[int64]time.Duration{}
	measured := map[string]map[int64]time.Duration{}
	var caps []int64
	seenCap := map[int64]bool{}
	var hi time.Duration
	lo := time.Duration(math.MaxInt64)
	ran := false // a ring was drawn: the legend says what rings are
	for _, c := range t.Candidates {
		if c.Current() {
			continue
		}
		o := c.Order
		if series[o] == nil {
			series[o], measured[o] = map[int64]time.Duration{}, map[int64]time.Duration{}
		}
		if v, ok := series[o][c.Cap]; !ok || c.Step < v {
			series[o][c.Cap] = c.Step
		}
		if c.Ran && c.Wrong == 0 {
			ran = true
			if v, ok := measured[o][c.Cap]; !ok || c.Measured < v {
				measured[o][c.Cap] = c.Measured
			}
			hi = max(hi, c.Measured)
			lo = min(lo, c.Measured)
		}
		if !seenCap[c.Cap] {
			seenCap[c.Cap] = true
			caps = append(caps, c.Cap)
		}
		hi = max(hi, c.Step)
		lo = min(lo, c.Step)
	}
	// Caps ascending, no cap last.
	sort.Slice(caps, func(i, j int) bool {
		a, b := caps[i], caps[j]
		if a == 0 || b == 0 {
			return b == 0 && a != 0
		}
		return a < b
	})
	const width, height, left, right, top, bottom = 720.0, 420.0, 70.0, 130.0, 40.0, 60.0
	pw, ph := width-left-right, height-top-bottom
	xs := map[int64]float64{}
	var minLog, maxLog float64
	first := true
	for _, c := range caps {
		if c == 0 {
			continue
		}
		l := math.Log2(float64(c))
		if first || l < minLog {
			minLog = l
		}
		if first || l > maxLog {
			maxLog = l
		}
		first = false
	}
	span := math.Max(maxLog-minLog, 1)
	for _, c := range caps {
		if c == 0 {
			xs[c] = left + pw
			continue
		}
		xs[c] = left + pw*0.92*(math.Log2(float64(c))-minLog)/span
	}
	// The axis spans the values with a margin, not from 0: the
	// candidates often differ by a few percent of the step.
	ymin, ymax := 0.0, 1.0
	if hi > 0 {
		span := math.Max(float64(hi-lo)/1e6, float64(hi)/1e6*0.02)
		ymin, ymax = math.Max(float64(lo)/1e6-0.1*span, 0), float64(hi)/1e6+0.1*span
	}
	y := func(d time.Duration) float64 { return top + ph - ph*(float64(d)/1e6-ymin)/(ymax-ymin) }
	var b strings.Builder
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", width, height)
	fmt.Fprintf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">predicted step time against the cap of bucket %s</text>\n", left, xmlEscape(t.Bucket))
	fmt.Fprintf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, top, left, top+ph)
	for i := 0; i <= 4; i++ {
		v := ymin + (ymax-ymin)*float64(i)/4
		yy := top + ph - ph*float64(i)/4
		fmt.Fprintf(&b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, yy, left+pw, yy)
		fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", left-6, yy+4, v)
	}
	for _, c := range caps {
		label := "none"
		if c > 0 {
			label = SizeText(c)
		}
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", xs[c], top+ph+18, label)
	}
	fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">cap (log scale)</text>\n", left+pw/2, height-12)
	fmt.Fprintf(&b, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">step time (ms)</text>\n", top+ph/2, top+ph/2)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	var orders []string
	for o := range series {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	for i, o := range orders {
		col := colors[i%len(colors)]
		var pts []string
		for _, c := range caps {
			if v, ok := series[o][c]; ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs[c], y(v)))
			}
		}
		fmt.Fprintf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", col, strings.Join(pts, " "))
		for _, c := range caps {
			if v, ok := series[o][c]; ok {
				fmt.Fprintf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", xs[c], y(v), col)
			}
			if v, ok := measured[o][c]; ok {
				fmt.Fprintf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", xs[c], y(v), col)
			}
		}
		name := "order " + o
		if o == "" {
			name = "order as written"
		}
		ly := top + 16 + 18*float64(i)
		fmt.Fprintf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/>\n", left+pw+12, ly-4, left+pw+30, ly-4, col)
		fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", left+pw+34, ly, xmlEscape(name))
	}
	if ran {
		fmt.Fprintf(&b, "<text x=\"%.0f\" y=\"%.0f\">ring: measured</text>\n", left+pw+12, top+16+18*float64(len(orders)))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\"", "&quot;").Replace(s)
}
