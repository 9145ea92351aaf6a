package report

// Counted bytes across hosts: with SYNCGEN_NET_IFACE naming the network
// interface that carries the traffic between hosts (eth0 in
// scripts/cluster.sh's hosts), every rank reads that interface's byte
// counters (/sys/class/net/IFACE/statistics/tx_bytes and rx_bytes) just
// before the first measured step and just after the last (behind a
// barrier, so that every rank's last sends are in). The counters are the
// host's, shared by its ranks: the report takes each host's lowest
// rank's readings. They count whole frames (Ethernet, IP and TCP headers,
// acknowledgements, retransmissions) and everything else the host sent
// meanwhile, so they sit a little above the formulas' payload.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/text"
)

// NetIfaceEnv names the interface whose counters the runtime reads.
const NetIfaceEnv = "SYNCGEN_NET_IFACE"

// NetCounter reads an interface's byte counters around the measured
// steps. The zero value (no interface) reads nothing.
type NetCounter struct {
	Iface        string
	tx0, rx0     int64
	tx1, rx1     int64
	began, ended bool
	err          error
}

// NewNetCounter returns a counter of iface's bytes ("": none).
func NewNetCounter(iface string) *NetCounter {
	return &NetCounter{Iface: iface}
}

// readNetDev reads iface's byte counters from /proc/net/dev, which shows
// the interfaces of the reader's network namespace (where
// /sys/class/net shows those of the namespace that mounted sysfs).
func readNetDev(iface string) (tx, rx int64, err error) {
	data, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return 0, 0, fmt.Errorf("%s=%s: %w", NetIfaceEnv, iface, err)
	}
	return parseNetDev(string(data), iface)
}

// parseNetDev finds iface's line in /proc/net/dev's text: the name, a
// colon, 8 receive counters (bytes first) and 8 transmit counters (bytes
// first).
func parseNetDev(text, iface string) (tx, rx int64, err error) {
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != iface {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("/proc/net/dev: %d fields for %s, want 16", len(f), iface)
		}
		if rx, err = strconv.ParseInt(f[0], 10, 64); err == nil {
			tx, err = strconv.ParseInt(f[8], 10, 64)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/net/dev: %s: %w", iface, err)
		}
		return tx, rx, nil
	}
	return 0, 0, fmt.Errorf("%s=%s: no such interface in this host's network namespace (ip link lists them)", NetIfaceEnv, iface)
}

// read reads both counters, keeping the first error.
func (c *NetCounter) read() (tx, rx int64, ok bool) {
	tx, rx, err := readNetDev(c.Iface)
	if err != nil && c.err == nil {
		c.err = err
	}
	return tx, rx, err == nil
}

// Begin reads the counters before the first measured step.
func (c *NetCounter) Begin() {
	if c == nil || c.Iface == "" {
		return
	}
	c.tx0, c.rx0, c.began = c.read()
}

// End reads the counters after the last measured step.
func (c *NetCounter) End() {
	if c == nil || c.Iface == "" || !c.began {
		return
	}
	c.tx1, c.rx1, c.ended = c.read()
}

// Err returns the first error reading the counters, for a warning.
func (c *NetCounter) Err() error {
	if c == nil {
		return nil
	}
	return c.err
}

// encodeNet lays out this rank's counts for the gather: whether it has
// them, then the bytes sent and received over the measured steps.
func encodeNet(c *NetCounter) []byte {
	vals := [3]float64{}
	if c != nil && c.began && c.ended {
		vals = [3]float64{1, float64(c.tx1 - c.tx0), float64(c.rx1 - c.rx0)}
	}
	rec := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(rec[8*i:], math.Float64bits(v))
	}
	return rec
}

// netHost is one host's counted bytes over the measured steps, and what
// the formulas say it sends a step.
type netHost struct {
	host      string
	ranks     int // the host's ranks, which share its counters
	tx, rx    float64
	formula   float64
	formulaOK bool
}

// netReport is the counted bytes of every host; nil without counts.
type netReport struct {
	iface string
	hosts []netHost
}

// buildNet takes each host's lowest rank's counts from all (every rank's
// encodeNet); nil unless every host has them.
func buildNet(run *Run, all [][]byte, rep *Report) *netReport {
	if run.Net == nil || run.Net.Iface == "" || len(all) != len(run.Hosts) {
		return nil
	}
	nr := &netReport{iface: run.Net.Iface}
	specs := make([]crossSpec, 0, len(rep.rows))
	for _, r := range rep.rows {
		specs = append(specs, rowSpec(run, r))
	}
	formula, ok := hostSent(specs, run.Hosts)
	for _, h := range (&Info{hosts: run.Hosts}).topology() {
		rec := all[h.Ranks[0]]
		if len(rec) < 24 {
			return nil
		}
		at := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(rec[8*i:])) }
		if at(0) != 1 {
			return nil
		}
		nr.hosts = append(nr.hosts, netHost{host: h.Host, ranks: len(h.Ranks), tx: at(1), rx: at(2), formula: formula[h.Host], formulaOK: ok})
	}
	return nr
}

// printNet prints the counted bytes of every host beside the formulas'.
func printNet(w io.Writer, rep *Report) {
	nr := rep.net
	steps := len(rep.stepTimes)
	if nr == nil || steps == 0 {
		return
	}
	var total float64
	for _, d := range rep.stepTimes {
		total += float64(d)
	}
	fmt.Fprintf(w, "#\n# bytes across hosts, counted on %s over %d measured steps (frames, headers included)\n# %-24s %14s %14s %14s %14s %12s %10s\n",
		nr.iface, steps, "host", "sent/step", "per rank", "formula/step", "received/step", "sent/formula", "sent GB/s")
	for _, h := range nr.hosts {
		ratio, formula := "-", "-"
		if h.formulaOK {
			formula = fmt.Sprintf("%.0f", h.formula)
			if h.formula > 0 {
				ratio = fmt.Sprintf("%.3f", h.tx/float64(steps)/h.formula)
			}
		}
		fmt.Fprintf(w, "  %s %14.0f %14.0f %14s %14.0f %12s %10.3f\n", text.Cell(h.host, 24), h.tx/float64(steps),
			h.tx/float64(steps)/float64(h.ranks), formula, h.rx/float64(steps), ratio, h.tx/total)
	}
	fmt.Fprintf(w, "# per rank: sent/step over the host's ranks; formula/step: the bytes the formulas say the host's ranks send to other hosts in a step; sent GB/s: the bytes sent over the measured steps' time\n")
}

// jsonNet is the counted bytes in the JSON file.
type jsonNet struct {
	Iface string        `json:"iface"`
	Steps int           `json:"steps"`
	Hosts []jsonNetHost `json:"hosts"`
}

// jsonNetHost is one host's counted bytes over the measured steps.
type jsonNetHost struct {
	Host           string   `json:"host"`
	TxBytes        float64  `json:"tx_bytes"`
	RxBytes        float64  `json:"rx_bytes"`
	TxPerStep      float64  `json:"tx_bytes_per_step"`
	TxPerStepRank  float64  `json:"tx_bytes_per_step_per_rank"`
	FormulaPerStep *float64 `json:"formula_tx_bytes_per_step,omitempty"`
	TxGBs          float64  `json:"tx_gbs"`
}

// makeJSONNet returns the counted bytes for the JSON file, nil without.
func makeJSONNet(rep *Report) *jsonNet {
	nr := rep.net
	steps := len(rep.stepTimes)
	if nr == nil || steps == 0 {
		return nil
	}
	var total float64
	for _, d := range rep.stepTimes {
		total += float64(d)
	}
	j := &jsonNet{Iface: nr.iface, Steps: steps, Hosts: []jsonNetHost{}}
	for _, h := range nr.hosts {
		jh := jsonNetHost{Host: h.host, TxBytes: h.tx, RxBytes: h.rx, TxPerStep: h.tx / float64(steps),
			TxPerStepRank: h.tx / float64(steps) / float64(h.ranks), TxGBs: h.tx / total}
		if h.formulaOK {
			f := h.formula
			jh.FormulaPerStep = &f
		}
		j.Hosts = append(j.Hosts, jh)
	}
	return j
}
