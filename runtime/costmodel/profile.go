package costmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
)

// Format is the format tag of profile files this package reads and
// writes; a file with another tag is refused.
const Format = "syncgen-profile/1"

// Profile is the cost model of one cluster: a curve per collective (and
// reduction operator and dtype, where they were measured apart), and the
// memory bandwidth of casts and updates.
type Profile struct {
	Format string `json:"format"`
	// Name names the profile ("nvlink-h100" for a built-in one).
	Name string `json:"name,omitempty"`
	// Source says where the figures come from: the calibration's command,
	// or for a built-in profile the tables it was derived from.
	Source string `json:"source,omitempty"`
	// Machine, Backend, Versions and Date describe where it was measured.
	Machine  string            `json:"machine,omitempty"`
	Backend  string            `json:"backend,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
	Date     string            `json:"date,omitempty"`
	// Ranks is the world size the profile was measured at (0: a built-in
	// profile, which scales with the ranks).
	Ranks int `json:"ranks"`
	// MemGBs is the memory bandwidth (GB/s, bytes read plus written) of
	// casts between dtypes, unscales and updates; 0 leaves them out of the
	// model.
	MemGBs float64 `json:"mem_gbs,omitempty"`
	// Curves are the collectives' costs.
	Curves []Curve `json:"collectives"`
}

// Curve is the cost of one collective as a function of its bytes: the
// segment with the largest FromBytes not above the size applies.
type Curve struct {
	Collective string `json:"collective"`
	// Op and DType narrow the curve to one reduction operator and one
	// wire dtype; empty means any.
	Op       string    `json:"op,omitempty"`
	DType    string    `json:"dtype,omitempty"`
	Segments []Segment `json:"segments"`
	// Points are the measurements the segments were fitted to.
	Points []Point `json:"points,omitempty"`
}

// Segment is the alpha-beta cost of a size range:
// time = AlphaUs + StepUs*steps(n) + bytes*factor(n)/BusGBs, with
// factor nccl-tests' bus bandwidth factor (2(n-1)/n for allreduce) and
// steps the ring's steps (2(n-1) for allreduce), so that one segment
// holds at any world size. BusGBs 0 means no bandwidth term.
type Segment struct {
	FromBytes int64   `json:"from_bytes"`
	AlphaUs   float64 `json:"alpha_us"`
	StepUs    float64 `json:"step_us,omitempty"`
	BusGBs    float64 `json:"busbw_gbs"`
}

// Point is one measurement: the time of one collective of Bytes bytes.
type Point struct {
	Bytes int64   `json:"bytes"`
	Us    float64 `json:"us"`
}

// Collectives are the names a curve may have.
var Collectives = []string{"allreduce", "broadcast", "reduce", "allgather", "reducescatter"}

// Ops are the reduction operators a curve's op may name, the language's;
// only the reducing collectives (reducingCollectives) take one.
var Ops = []string{"sum", "avg", "min", "max", "prod", "wavg"}

// DTypes are the wire dtypes a curve's dtype may name, the language's.
var DTypes = []string{"f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}

// reducingCollectives are the collectives that take a reduction operator.
var reducingCollectives = []string{"allreduce", "reduce", "reducescatter"}

// nameAliases maps spellings other tools use to the names above, for the
// hint of an unknown op or dtype.
var nameAliases = map[string]string{
	"fp64": "f64", "float64": "f64", "double": "f64",
	"fp32": "f32", "float32": "f32", "float": "f32",
	"fp16": "f16", "float16": "f16", "half": "f16",
	"bfloat16": "bf16",
	"int64":    "i64", "int32": "i32", "int8": "i8", "uint8": "u8",
	"mean": "avg", "average": "avg", "product": "prod",
}

// checkName returns an error when name, the curve's field (op or dtype),
// is neither empty (any) nor one of valid; the error lists valid and, for
// a known alias or a name in other case, the name meant.
func checkName(field, name string, valid []string) error {
	if name == "" || slices.Contains(valid, name) {
		return nil
	}
	hint := ""
	lower := strings.ToLower(name)
	if alias, ok := nameAliases[lower]; ok && slices.Contains(valid, alias) {
		hint = fmt.Sprintf(" (did you mean %q?)", alias)
	} else if slices.Contains(valid, lower) {
		hint = fmt.Sprintf(" (did you mean %q?)", lower)
	}
	return fmt.Errorf("unknown %s %q%s; the %ss are %s, or leave it out for any", field, name, hint, field, strings.Join(valid, ", "))
}

// maxProfileBytes bounds the size of a profile file: a profile is a few
// hundred points at most.
const maxProfileBytes = 16 << 20

// ReadProfile reads and validates the profile file at path.
func ReadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	p, err := ParseProfile(data)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return p, nil
}

// ParseProfile decodes and validates a profile. Unknown fields are
// errors, so that a misspelt field is not silently ignored.
func ParseProfile(data []byte) (*Profile, error) {
	if len(data) > maxProfileBytes {
		return nil, fmt.Errorf("%d bytes is too large for a profile (at most %d)", len(data), maxProfileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("the file is empty, not a profile; write one with `syncgen calibrate`")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a syncgen profile (JSON): %v; write one with `syncgen calibrate`", err)
	}
	// One object: anything after it (a second profile pasted in, a
	// stray edit) would otherwise be ignored.
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("byte %d: more after the profile's JSON object; a profile file holds one", len(data)-len(rest))
	}
	// The format first: a file of another format is said to be one,
	// not to lack this format's fields.
	if p.Format == Format {
		if err := checkRequired(data, &p); err != nil {
			return nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkRequired returns an error naming the first figure that data, a
// profile p was decoded from, leaves out or gives as null: ranks, a
// segment's from_bytes, alpha_us and busbw_gbs, a point's bytes and us.
// Decoded, each would be a silent 0 (a profile that scales like a
// built-in one, a collective without latency or without a bandwidth
// term), which Validate cannot tell from a written 0.
func checkRequired(data []byte, p *Profile) error {
	var shadow struct {
		Ranks       *json.RawMessage `json:"ranks"`
		Collectives []struct {
			Segments []struct {
				FromBytes *json.RawMessage `json:"from_bytes"`
				AlphaUs   *json.RawMessage `json:"alpha_us"`
				BusGBs    *json.RawMessage `json:"busbw_gbs"`
			} `json:"segments"`
			Points []struct {
				Bytes *json.RawMessage `json:"bytes"`
				Us    *json.RawMessage `json:"us"`
			} `json:"points"`
		} `json:"collectives"`
	}
	if err := json.Unmarshal(data, &shadow); err != nil {
		return fmt.Errorf("not a syncgen profile (JSON): %v; write one with `syncgen calibrate`", err)
	}
	if shadow.Ranks == nil {
		return fmt.Errorf("no ranks: give the world size the profile was measured at (0: any, for a model that scales like a built-in profile)")
	}
	for i, c := range shadow.Collectives {
		where := fmt.Sprintf("collectives[%d] (%s)", i, p.Curves[i].Key())
		for j, s := range c.Segments {
			for _, f := range []struct {
				name  string
				value *json.RawMessage
				what  string
			}{{"from_bytes", s.FromBytes, "the size in bytes the segment starts at"}, {"alpha_us", s.AlphaUs, "the latency in microseconds"}, {"busbw_gbs", s.BusGBs, "the bus bandwidth in GB/s, 0 for none"}} {
				if f.value == nil {
					return fmt.Errorf("%s: segment %d: no %s: give %s", where, j, f.name, f.what)
				}
			}
		}
		for j, pt := range c.Points {
			if pt.Bytes == nil || pt.Us == nil {
				return fmt.Errorf("%s: point %d: a point needs bytes and us (its size and measured time in microseconds)", where, j)
			}
		}
	}
	return nil
}

// finite says whether v is a usable figure: finite and not negative.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// The bounds of a profile's figures. A figure outside them is one that no
// machine has (a typing slip, a unit mistaken, a broken fit), and it would
// turn a prediction into a time no step takes, so Validate refuses it.
const (
	// MaxLatencyUs bounds alpha_us, step_us and a point's us: one hour,
	// in microseconds.
	MaxLatencyUs = 3.6e9
	// MinGBs and MaxGBs bound busbw_gbs and mem_gbs other than 0 (which
	// means no bandwidth term): one byte a second, and a petabyte a
	// second.
	MinGBs = 1e-9
	MaxGBs = 1e6
)

// checkLatency returns an error naming field when v, a time in
// microseconds, is not finite, negative or longer than MaxLatencyUs.
func checkLatency(field string, v float64) error {
	switch {
	case !finite(v):
		return fmt.Errorf("%s %v: want a finite time in microseconds, 0 or more", field, v)
	case v > MaxLatencyUs:
		return fmt.Errorf("%s %g: more than an hour (%g us), which no collective takes; a profile from syncgen calibrate has the measured figure", field, v, float64(MaxLatencyUs))
	}
	return nil
}

// checkBandwidth returns an error naming field when v, a bandwidth in the
// profile's unit, is neither 0 nor between MinGBs and MaxGBs.
func checkBandwidth(field string, v float64) error {
	switch {
	case !finite(v):
		return fmt.Errorf("%s %v: want a finite bandwidth in GB/s, 0 or more", field, v)
	case v != 0 && v < MinGBs:
		return fmt.Errorf("%s %g: below one byte a second (%g GB/s), which no machine moves; 0 means no bandwidth term", field, v, MinGBs)
	case v > MaxGBs:
		return fmt.Errorf("%s %g: above a petabyte a second (%g GB/s), which no machine moves; a profile from syncgen calibrate has the measured figure", field, v, float64(MaxGBs))
	}
	return nil
}

// Validate checks that the profile can be used: its format, known
// collectives, operators (on reducing collectives only) and dtypes, figures within the bounds above (MaxLatencyUs, MinGBs,
// MaxGBs), segments in size order.
func (p *Profile) Validate() error {
	if p.Format != Format {
		return fmt.Errorf("format %q: want %q (a file written by `syncgen calibrate`)", p.Format, Format)
	}
	if p.Ranks < 0 {
		return fmt.Errorf("ranks %d: want 0 (any) or more", p.Ranks)
	}
	if err := checkBandwidth("mem_gbs", p.MemGBs); err != nil {
		return err
	}
	if len(p.Curves) == 0 {
		return fmt.Errorf("no collectives: a profile needs at least one curve")
	}
	seen := map[[3]string]bool{}
	for i, c := range p.Curves {
		where := fmt.Sprintf("collectives[%d] (%s)", i, c.Key())
		if !knownCollective(c.Collective) {
			return fmt.Errorf("%s: unknown collective %q; the collectives are %s", where, c.Collective, strings.Join(Collectives, ", "))
		}
		if c.Op != "" && !slices.Contains(reducingCollectives, c.Collective) {
			return fmt.Errorf("%s: op %q on %s, which reduces nothing; only %s take an op: leave it out", where, c.Op, c.Collective, strings.Join(reducingCollectives, ", "))
		}
		if err := checkName("op", c.Op, Ops); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := checkName("dtype", c.DType, DTypes); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		key := [3]string{c.Collective, c.Op, c.DType}
		if seen[key] {
			return fmt.Errorf("%s: a second curve for the same collective, op and dtype", where)
		}
		seen[key] = true
		if len(c.Segments) == 0 {
			return fmt.Errorf("%s: no segments", where)
		}
		for j, s := range c.Segments {
			if s.FromBytes < 0 {
				return fmt.Errorf("%s: segment %d: from_bytes %d: want 0 or more", where, j, s.FromBytes)
			}
			for _, err := range []error{checkLatency("alpha_us", s.AlphaUs), checkLatency("step_us", s.StepUs), checkBandwidth("busbw_gbs", s.BusGBs)} {
				if err != nil {
					return fmt.Errorf("%s: segment %d: %w", where, j, err)
				}
			}
			if j == 0 && s.FromBytes != 0 {
				return fmt.Errorf("%s: the first segment must start at 0 bytes, not %d", where, s.FromBytes)
			}
			if j > 0 && s.FromBytes <= c.Segments[j-1].FromBytes {
				return fmt.Errorf("%s: segment %d starts at %d bytes, not after segment %d's %d", where, j, s.FromBytes, j-1, c.Segments[j-1].FromBytes)
			}
		}
		for j, pt := range c.Points {
			if pt.Bytes < 0 {
				return fmt.Errorf("%s: point %d: bytes %d: want 0 or more", where, j, pt.Bytes)
			}
			if err := checkLatency("us", pt.Us); err != nil {
				return fmt.Errorf("%s: point %d: %w", where, j, err)
			}
		}
	}
	return nil
}

// Key names the curve: "allreduce", "allreduce sum f32", "allgather f32".
func (c *Curve) Key() string { return curveName(c.Collective, c.Op, c.DType) }

// curveName names a collective, its operator and dtype, leaving out the
// empty ones: "allgather f32", not "allgather  f32".
func curveName(coll, op, dtype string) string {
	var parts []string
	for _, s := range []string{coll, op, dtype} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func knownCollective(name string) bool {
	for _, c := range Collectives {
		if c == name {
			return true
		}
	}
	return false
}

// Curve returns the profile's curve for collective coll with operator op
// on dtype: the one that matches best, the dtype before the operator; a
// curve of another operator or dtype when there is nothing closer.
func (p *Profile) Curve(coll, op, dtype string) (*Curve, error) {
	best, bestScore := -1, -1
	for i := range p.Curves {
		c := &p.Curves[i]
		if c.Collective != coll {
			continue
		}
		// An exact match is best, then a curve for any; one measured for
		// another operator or dtype is the last resort (the dtype weighs
		// more: it sets the bytes' arithmetic).
		score := 0
		switch c.Op {
		case op:
			score += 2
		case "":
			score++
		}
		switch c.DType {
		case dtype:
			score += 6
		case "":
			score += 3
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		var have []string
		for _, c := range p.Curves {
			have = append(have, c.Key())
		}
		sort.Strings(have)
		return nil, fmt.Errorf("the profile has no curve for %s (it has: %s); calibrate with a plan that uses it (syncgen calibrate --plan FILE)",
			coll, strings.Join(have, ", "))
	}
	return &p.Curves[best], nil
}

// Encode returns the profile as the indented JSON that ParseProfile reads.
func (p *Profile) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
