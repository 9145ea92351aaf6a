package codegen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/syncgen/syncgen/ir"
)

// PlanHash returns a short hex digest of everything in prog that changes
// what the ranks do: tensors, streams, buckets, statements, the loss
// scaler, the ranks' speeds and batch, and run defaults. Source positions are left out, so editing comments or moving
// lines gives the same hash; the runtime compares it across ranks to catch
// ranks started with different plans.
func PlanHash(prog *ir.Program) (string, error) {
	type hashed struct {
		Tensors []ir.Tensor
		Streams []ir.Stream
		Buckets []ir.Bucket
		Init    []ir.Stmt
		Step    []ir.Stmt
		Run     ir.Run
		// Left out without a scaler, so that such plans hash as they
		// always did.
		Scaler *ir.Scaler `json:",omitempty"`
		// Left out without a ranks declaration, likewise.
		Ranks *ir.Ranks `json:",omitempty"`
	}
	h := hashed{Run: prog.Run}
	if prog.Scaler != nil {
		sc := *prog.Scaler
		sc.Pos = ir.Pos{}
		h.Scaler = &sc
	}
	if prog.Ranks != nil {
		r := *prog.Ranks
		r.Pos = ir.Pos{}
		r.Speeds = nil
		for _, s := range prog.Ranks.Speeds {
			s.Pos = ir.Pos{}
			r.Speeds = append(r.Speeds, s)
		}
		h.Ranks = &r
	}
	for _, t := range prog.Tensors {
		t.Pos = ir.Pos{}
		h.Tensors = append(h.Tensors, t)
	}
	for _, s := range prog.Streams {
		s.Pos = ir.Pos{}
		h.Streams = append(h.Streams, s)
	}
	for _, b := range prog.Buckets {
		b.Pos = ir.Pos{}
		h.Buckets = append(h.Buckets, b)
	}
	h.Init = stripPos(prog.Init)
	h.Step = stripPos(prog.Step)
	data, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("codegen: hashing the plan: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

func stripPos(stmts []ir.Stmt) []ir.Stmt {
	out := make([]ir.Stmt, len(stmts))
	for i, s := range stmts {
		s.Pos = ir.Pos{}
		s.Body = stripPos(s.Body)
		out[i] = s
	}
	return out
}
