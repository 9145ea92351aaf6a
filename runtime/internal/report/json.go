package report

// --json FILE: the report's figures and the environment, for scripts that
// compare runs.

import (
	"encoding/json"
	"fmt"
	"os"
)

// jsonReport is the file's schema.
type jsonReport struct {
	// Incomplete says why the run ended early; the figures are then rank
	// 0's alone, of the steps it finished.
	Incomplete string            `json:"incomplete,omitempty"`
	Program    string            `json:"program"`
	Source     string            `json:"source"`
	PlanHash   string            `json:"plan_hash"`
	Ranks      int               `json:"ranks"`
	Hosts      []string          `json:"hosts"`
	Topology   []hostRanks       `json:"topology"`
	Backend    string            `json:"backend"`
	Why        string            `json:"backend_reason"`
	Versions   map[string]string `json:"versions"`
	Env        map[string]string `json:"env"`
	Settings   map[string]string `json:"mpi_settings,omitempty"`
	GoVersion  string            `json:"go_version"`
	MaxProcs   []int             `json:"gomaxprocs"`
	NumCPU     []int             `json:"num_cpu"`
	ProcNote   string            `json:"gomaxprocs_note,omitempty"`
	Warnings   []string          `json:"warnings,omitempty"`
	Steps      int               `json:"steps"`
	Warmup     int               `json:"warmup"`
	Check      int               `json:"check_every"`
	Tensors    int               `json:"tensors"`
	Params     int64             `json:"parameters"`
	GradBytes  int64             `json:"gradient_bytes"`
	Buckets    []jsonRow         `json:"buckets"`
	Train      *jsonTrain        `json:"training,omitempty"`
	Saves      *jsonSaves        `json:"checkpoints,omitempty"`
	Hetero     *jsonRanks        `json:"heterogeneous,omitempty"`
	Accumulate *jsonAccumulate   `json:"accumulate,omitempty"`
	// Network is the bytes counted on SYNCGEN_NET_IFACE (netcount.go).
	Network *jsonNet    `json:"network,omitempty"`
	Summary jsonSummary `json:"summary"`
}

// jsonRow is one line of the table. Times in microseconds, bandwidths in
// GB/s (1e9 bytes per second). time_us is the maximum over ranks of each
// rank's mean, which the bandwidths use (as nccl-tests); time_median_us the
// maximum over ranks of each rank's median, which says how much of the mean
// is a tail of slow steps. wrong and unchecked count the bucket's elements
// over all checks and ranks, on its last row (unchecked only when not 0,
// so that the summary's unchecked elements can be found).
type jsonRow struct {
	Bucket string `json:"bucket"`
	// Into is the output buffer of an out-of-place collective, whose
	// source is Bucket (in place: omitted).
	Into       string  `json:"into,omitempty"`
	Src        string  `json:"src"`
	Stream     string  `json:"stream"`
	Tensors    int     `json:"tensors"`
	Bytes      int64   `json:"bytes"`
	Wire       string  `json:"wire"`
	Collective string  `json:"collective"`
	Op         string  `json:"op,omitempty"`
	Root       *int    `json:"root,omitempty"`
	Group      bool    `json:"group"`
	TimeUs     float64 `json:"time_us"`
	MedianUs   float64 `json:"time_median_us"`
	AlgBW      float64 `json:"algbw_gbs"`
	BusBW      float64 `json:"busbw_gbs"`
	Wrong      *int64  `json:"wrong,omitempty"`
	Unchecked  int64   `json:"unchecked,omitempty"`
	// With --profile: the predicted time, and its error against
	// time_median_us in percent.
	PredictedUs *float64 `json:"predicted_us,omitempty"`
	ErrorPct    *float64 `json:"error_pct,omitempty"`
	// Algo is "hierarchical" for `algo hierarchical` (flat: omitted).
	Algo string `json:"algo,omitempty"`
	// CrossHostBytes is the bytes a rank sends to other hosts in one run
	// of the row, the mean over ranks; CrossHostBytesHost the most one
	// host's ranks send; CrossHostAlgo the algorithm the formula assumes;
	// CrossHostGBs the host's bytes over the row's time (algo.go).
	CrossHostBytes     *float64 `json:"cross_host_bytes_per_rank,omitempty"`
	CrossHostBytesHost *float64 `json:"cross_host_bytes_per_host,omitempty"`
	CrossHostAlgo      string   `json:"cross_host_algorithm,omitempty"`
	CrossHostGBs       *float64 `json:"cross_host_gbs_per_host,omitempty"`
	// Phases are a hierarchical allreduce's phase figures (phases.go).
	Phases []jsonPhase `json:"phases,omitempty"`
}

// jsonSummary holds the summary figures (milliseconds).
type jsonSummary struct {
	StepP50Ms   float64   `json:"step_p50_ms"`
	StepP90Ms   float64   `json:"step_p90_ms"`
	StepMeanMs  float64   `json:"step_mean_ms"`
	StepsMs     []float64 `json:"step_ms"`
	ComputeMs   float64   `json:"compute_ms"`
	CommMs      float64   `json:"communication_ms"`
	ExposedMs   float64   `json:"exposed_communication_ms"`
	OverlapPct  float64   `json:"overlap_pct"`
	Wrong       int64     `json:"wrong"`
	Unchecked   int64     `json:"unchecked"`
	Checks      int       `json:"checks"`
	TimeOverRks string    `json:"time_over_ranks"`
	// With --profile: the profile, the predicted step and exposed
	// communication, and the step's error against step_p50_ms in percent.
	Profile            string   `json:"profile,omitempty"`
	PredictedStepMs    *float64 `json:"predicted_step_ms,omitempty"`
	PredictedExposedMs *float64 `json:"predicted_exposed_communication_ms,omitempty"`
	StepErrorPct       *float64 `json:"step_error_pct,omitempty"`
}

// WriteJSON writes the report as JSON to path (rank 0; "-": standard
// output), or to pipe, the named pipe checkOutputs kept open for it. A
// file it cannot write is an *OutputError.
func WriteJSON(path string, pipe *os.File, run *Run, rep *Report, info *Info) error {
	data, err := json.MarshalIndent(makeJSON(run, rep, info), "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(data)
	} else {
		err = WriteOutput(path, pipe, data)
	}
	if err != nil {
		return &OutputError{flag: "--json", path: path, err: err}
	}
	return nil
}

// makeJSON fills the file's schema from the report.
func makeJSON(run *Run, rep *Report, info *Info) jsonReport {
	p := run.Plan
	nt, _, params, bytes := planTotals(p)
	j := jsonReport{Program: p.Name, Source: p.Source, PlanHash: p.Hash, Ranks: run.Ranks, Hosts: info.hosts,
		Backend: info.backend, Why: info.why, Versions: map[string]string{}, Env: map[string]string{},
		GoVersion: info.goVer, MaxProcs: info.maxprocs, NumCPU: info.numCPU, ProcNote: info.procNote, Warnings: info.warnings,
		Steps: run.Steps, Warmup: run.Warmup, Check: run.CheckEvery, Tensors: nt, Params: params, GradBytes: bytes}
	for _, kv := range info.Versions {
		j.Versions[kv.Key] = kv.Value
	}
	for _, kv := range info.env {
		j.Env[kv.Key] = kv.Value
	}
	if len(info.mpiSettings) > 0 {
		j.Settings = map[string]string{}
		for _, kv := range info.mpiSettings {
			j.Settings[kv.Key] = kv.Value
		}
	}
	// Empty lists are [] rather than null: a plan whose step has no
	// collective still has a list of buckets, and --steps 0 a list of
	// step times.
	j.Topology = info.topology()
	j.Incomplete = rep.incomplete
	j.Train = makeJSONTrain(run, rep)
	j.Saves = makeJSONSaves(rep)
	j.Hetero = makeJSONRanks(rep)
	j.Accumulate = makeJSONAccumulate(run, rep)
	j.Network = makeJSONNet(rep)
	j.Buckets = []jsonRow{}
	for _, r := range rep.rows {
		b := p.Buckets[r.Bucket]
		jr := jsonRow{Bucket: b.Name, Src: string(r.At), Stream: p.Streams[r.Stream].Name, Tensors: len(b.Tensors), Bytes: r.Bytes,
			Wire: b.Wire.String(), Collective: r.Coll.String(), Group: r.Group,
			TimeUs: float64(r.time) / 1e3, MedianUs: float64(r.median) / 1e3, AlgBW: r.algbw, BusBW: r.busbw}
		if r.Coll.Reduces() {
			jr.Op = r.Op.String()
		}
		if r.Into > 0 && r.Into < len(p.Buckets) {
			jr.Into = p.Buckets[r.Into].Name
		}
		if r.Hier {
			jr.Algo = "hierarchical"
		}
		if f, ok := rowCross(rowSpec(run, r), run.Hosts); ok {
			jr.CrossHostBytes, jr.CrossHostBytesHost, jr.CrossHostAlgo = &f.perRank, &f.perHost, f.algo
			if r.time > 0 {
				gbs := f.perHost / float64(r.time)
				jr.CrossHostGBs = &gbs
			}
		}
		jr.Phases = jsonPhases(r)
		if r.Coll.Info().RootWord != "" {
			root := r.Root
			jr.Root = &root
		}
		if r.showWrong && rep.checks > 0 {
			w := r.wrong
			jr.Wrong = &w
			jr.Unchecked = r.unchecked
		}
		if pr := run.Predicted; pr != nil && len(rep.stepTimes) > 0 {
			if t, ok := pr.row(r.ID, r.Bucket); ok {
				us, e := float64(t)/1e3, errPct(t, r.median)
				jr.PredictedUs, jr.ErrorPct = &us, &e
			}
		}
		j.Buckets = append(j.Buckets, jr)
	}
	ms := func(d interface{ Nanoseconds() int64 }) float64 { return float64(d.Nanoseconds()) / 1e6 }
	j.Summary = jsonSummary{StepP50Ms: ms(rep.p50), StepP90Ms: ms(rep.p90), StepMeanMs: ms(rep.mean), ComputeMs: ms(rep.compute),
		CommMs: ms(rep.comm), ExposedMs: ms(rep.exposed), OverlapPct: rep.overlap, Wrong: rep.wrong, Unchecked: rep.unchecked,
		Checks: rep.checks, TimeOverRks: "bucket time: max over ranks of the per-rank mean; step time: max over ranks"}
	if pr := run.Predicted; pr != nil && len(rep.stepTimes) > 0 {
		step, exposed, e := ms(pr.Step), ms(pr.Exposed), errPct(pr.Step, rep.p50)
		j.Summary.Profile, j.Summary.PredictedStepMs, j.Summary.PredictedExposedMs, j.Summary.StepErrorPct = pr.Profile, &step, &exposed, &e
	}
	j.Summary.StepsMs = make([]float64, 0, len(rep.stepTimes))
	for _, d := range rep.stepTimes {
		j.Summary.StepsMs = append(j.Summary.StepsMs, ms(d))
	}
	return j
}

// WriteOutput writes data to the file at path, or to pipe when
// checkOutputs kept one open for it, and closes it.
func WriteOutput(path string, pipe *os.File, data []byte) error {
	f, err := createOutput(path, pipe)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// createOutput opens an output file for writing its data: the pipe that
// checkOutputs kept open for it, or the file at path, created or
// truncated.
func createOutput(path string, pipe *os.File) (*os.File, error) {
	if pipe != nil {
		return pipe, nil
	}
	return os.Create(path)
}

// OutputError is a --json or --trace file that rank 0 could not write
// after the run: the file is lost, the run is not.
type OutputError struct {
	flag, path string
	err        error
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%s %s: writing the file: %v", e.flag, e.path, e.err)
}

func (e *OutputError) Unwrap() error { return e.err }
