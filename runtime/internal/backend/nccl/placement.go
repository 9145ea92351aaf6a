package nccl

import (
	"fmt"
	"strconv"
	"strings"
)

// gpuView is what one rank sees of its host's GPUs: the probe gathers one
// from every rank and decides with gpuPlacement whether every rank of a
// host gets a GPU of its own.
type gpuView struct {
	Host                 string
	LocalRank, LocalSize int
	Visible              string // CUDA_VISIBLE_DEVICES
	VisibleSet           bool   // whether it is set
	N                    int    // the devices the rank sees
	// IDs are the devices' PCI bus ids in device order, nil when unknown
	// ("" for one left out); without them the devices are told apart by
	// CUDA_VISIBLE_DEVICES.
	IDs []string
	Err string // why the rank cannot run NCCL at all; "" if it can
}

// pickDevice is chooseDevice's rule: the local rank's device, or, when
// the launcher gave each rank its own CUDA_VISIBLE_DEVICES (perRank), the
// local rank's modulo n. ok is false when the rank gets none.
func pickDevice(localRank, n int, perRank bool) (dev int, ok bool) {
	switch {
	case n <= 0:
		return 0, false
	case localRank < n:
		return localRank, true
	case perRank:
		return localRank % n, true
	}
	return 0, false
}

// identity names device d of v so that two ranks of one host that name a
// device alike see the same GPU: its PCI bus id when byID, else the
// device's entry in CUDA_VISIBLE_DEVICES (ranks with different values see
// different GPUs), else its number.
func (v *gpuView) identity(d int, byID bool) string {
	if byID {
		return "pci " + v.IDs[d]
	}
	if v.VisibleSet {
		if f := strings.Split(v.Visible, ","); d < len(f) {
			return "CUDA_VISIBLE_DEVICES entry " + strings.TrimSpace(f[d])
		}
		return fmt.Sprintf("device %d of CUDA_VISIBLE_DEVICES=%q", d, v.Visible)
	}
	return "device " + strconv.Itoa(d)
}

// note is visibleNote for v.
func (v *gpuView) note() string {
	if v.VisibleSet {
		return fmt.Sprintf(" visible (CUDA_VISIBLE_DEVICES=%q)", v.Visible)
	}
	return ""
}

// gpuPlacement says whether rank me, given every rank's view (or only its
// own when the others are not known), can run NCCL: the ranks of its host
// must each get a distinct GPU by chooseDevice's rule. So several ranks
// that each see the whole host take one device each, ranks that each got
// their own CUDA_VISIBLE_DEVICES (Slurm's --gpus-per-task) take theirs, and
// ranks that would land on one GPU are refused.
func gpuPlacement(views []gpuView, me int) (bool, string) {
	v := &views[me]
	if v.Err != "" {
		return false, v.Err
	}
	var peers []*gpuView
	for r := range views {
		if w := &views[r]; w.Host == v.Host && w.Err == "" {
			peers = append(peers, w)
		}
	}
	// Bus ids when every rank of the host chose a device whose id it
	// knows; otherwise CUDA_VISIBLE_DEVICES for all of them.
	byID := true
	for _, w := range peers {
		d, ok := pickDevice(w.LocalRank, w.N, w.VisibleSet)
		if len(w.IDs) != w.N || (ok && w.IDs[d] == "") {
			byID = false
		}
	}
	gpus := map[string]bool{}
	for _, w := range peers {
		for d := 0; d < w.N; d++ {
			if !byID || w.IDs[d] != "" {
				gpus[w.identity(d, byID)] = true
			}
		}
	}
	ranks := max(len(peers), v.LocalSize)
	owner := map[string]*gpuView{}
	var clash [2]*gpuView
	var clashID string
	short := false
	for _, w := range peers {
		d, ok := pickDevice(w.LocalRank, w.N, w.VisibleSet)
		if !ok {
			short = true
			continue
		}
		id := w.identity(d, byID)
		if q, dup := owner[id]; dup {
			if clash[0] == nil {
				clash, clashID = [2]*gpuView{q, w}, id
			}
			continue
		}
		owner[id] = w
	}
	if short || ranks > len(gpus) {
		return false, fmt.Sprintf("%d ranks on host %s but %d GPU(s)%s: NCCL needs a GPU per rank",
			ranks, v.Host, len(gpus), v.note())
	}
	if clash[0] != nil {
		return false, fmt.Sprintf("local ranks %d and %d on host %s would share one GPU (%s): NCCL needs a GPU per rank; give every rank the same CUDA_VISIBLE_DEVICES or each its own GPUs",
			clash[0].LocalRank, clash[1].LocalRank, v.Host, clashID)
	}
	return true, ""
}

// viewRecordSize is the size of the record in which each rank sends its
// view to the others.
const viewRecordSize = 2048

// encodeView packs v into a record of viewRecordSize bytes. Where the
// bus ids do not fit, only the one of the rank's own device is sent.
func encodeView(v gpuView) []byte {
	if len(v.Err) > 512 {
		v.Err = v.Err[:512]
	}
	enc := func(ids []string) string {
		set := "0"
		if v.VisibleSet {
			set = "1"
		}
		return strings.Join([]string{v.Host, strconv.Itoa(v.LocalRank), strconv.Itoa(v.LocalSize), set, v.Visible,
			strconv.Itoa(v.N), strings.Join(ids, ","), v.Err, "end"}, "\x00")
	}
	s := enc(v.IDs)
	if len(s) >= viewRecordSize && v.IDs != nil {
		ids := make([]string, len(v.IDs))
		if d, ok := pickDevice(v.LocalRank, v.N, v.VisibleSet); ok && d < len(ids) {
			ids[d] = v.IDs[d]
		}
		s = enc(ids)
	}
	rec := make([]byte, viewRecordSize)
	if len(s) >= viewRecordSize {
		v.IDs, v.Visible, v.Err = nil, "", "CUDA_VISIBLE_DEVICES too long for the GPU check: "+v.Visible[:min(len(v.Visible), 64)]+"..."
		s = enc(nil)
	}
	copy(rec, s)
	return rec
}

// decodeView unpacks a record from encodeView.
func decodeView(rec []byte) (gpuView, error) {
	f := strings.Split(strings.TrimRight(string(rec), "\x00"), "\x00")
	if len(f) != 9 || f[8] != "end" {
		return gpuView{}, fmt.Errorf("malformed GPU record")
	}
	var v gpuView
	var err error
	v.Host, v.Visible, v.VisibleSet, v.Err = f[0], f[4], f[3] == "1", f[7]
	if v.LocalRank, err = strconv.Atoi(f[1]); err != nil {
		return v, fmt.Errorf("malformed GPU record: %w", err)
	}
	if v.LocalSize, err = strconv.Atoi(f[2]); err != nil {
		return v, fmt.Errorf("malformed GPU record: %w", err)
	}
	if v.N, err = strconv.Atoi(f[5]); err != nil {
		return v, fmt.Errorf("malformed GPU record: %w", err)
	}
	if f[6] != "" {
		v.IDs = strings.Split(f[6], ",")
	}
	if len(v.IDs) != v.N {
		v.IDs = nil
	}
	return v, nil
}
