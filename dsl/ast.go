package dsl

import (
	"github.com/alecthomas/participle/v2/lexer"
)

// The syntax tree of one .sync file, as participle builds it from the
// grammar in the struct tags. Every node keeps Pos (its first token) and
// EndPos (just after its last token) so that diagnostics can put a caret
// range under it. Values are kept as written (Word.Text, Name.Quoted) and
// interpreted by the checker, which can then say precisely what is wrong
// with `cap 25Mib` or `f31[3]`; the formatter prints them back unchanged.

// File is a whole .sync file: a list of declarations.
type File struct {
	Pos   lexer.Position
	Decls []*Decl `parser:"@@*"`
}

// Decl is one top-level declaration. Exactly one field is set.
type Decl struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Import *ImportDecl `parser:"(  @@"`
	Tensor *TensorDecl `parser:" | @@"`
	Stream *StreamDecl `parser:" | @@"`
	Bucket *BucketDecl `parser:" | @@"`
	Scaler *ScalerDecl `parser:" | @@"`
	Block  *BlockDecl  `parser:" | @@"`
	Run    *RunDecl    `parser:" | @@"`
	For    *ForDecl    `parser:" | @@"`
	Ranks  *RanksDecl  `parser:" | @@"`
	Semi   *Punct      `parser:" | @@ )"`
}

// Punct is a lone `;`, allowed (and dropped by fmt) between declarations
// and statements.
type Punct struct {
	Pos   lexer.Position
	Value string `parser:"@';'"`
}

// Word is one Word token in a value position: a number, a size, a
// duration, a dtype, a stream name, `ready`. It is never a reserved
// keyword (see reservedWords), so that an incomplete statement is reported
// where the next one starts instead of swallowing its keyword as a value.
type Word struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Text   string `parser:"@Word"`
}

// Name is a bare name or pattern (`layer1.0.conv1.weight`, `h.*`) or a
// quoted one (`"odd name/with:chars"`, kept with its quotes).
type Name struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Bare   string `parser:"  @(Word | Keyword)"`
	Quoted string `parser:"| @String"`
}

// ImportDecl is `import "models/resnet50"`.
type ImportDecl struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Path   *Name `parser:"'import' @@"`
}

// TensorDecl is `tensor NAME DTYPE[DIMS] [frozen]`.
type TensorDecl struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   *Name   `parser:"'tensor' @@"`
	DType  *Word   `parser:"@@"`
	Dims   []*Word `parser:"'[' ( @@ ( ',' @@ )* )? ']'"`
	Frozen bool    `parser:"@'frozen'?"`
}

// StreamDecl is `stream NAME [priority high|low]`.
type StreamDecl struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Name     *Name `parser:"'stream' @@"`
	Priority *Word `parser:"( 'priority' @@ )?"`
}

// BucketDecl is `bucket NAME { PATTERN, ... } OPTIONS`.
type BucketDecl struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Name     *Name     `parser:"'bucket' @@"`
	Patterns []*Name   `parser:"'{' ( @@ ( ',' @@ )* ','? )? '}'"`
	Options  []*Option `parser:"@@*"`
}

// Option is a keyword and its value: a bucket option (`cap 25MiB`,
// `divide before`), a collective option (`op avg`, `on comm`, `after
// ready`, `from 0`, `into sums`) or an update's setting (`lr 1e-3`, `master f32`); or
// the bare flag `agree` of an unscale, whose Value is nil. Any statement
// or bucket parses any of them, and the checker says which it takes. The
// keys that are not reserved words (`lr`, `divide`, ...) stay ordinary
// words everywhere else, so that tensors may still be called so.
type Option struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    string `parser:"(  @'agree' | @('cap' | 'first' | 'order' | 'wire' | 'divide' | 'op' | 'algo' | 'on' | 'after' | 'from' | 'to' | 'into' | 'master' | 'lr' | 'momentum' | 'weight_decay' | 'wd' | 'beta1' | 'beta2' | 'eps')"`
	Value  *Word  `parser:"   @@ )"`
}

// BlockDecl is `init { ... }` or `step [accumulate N] { ... }`.
// Accumulate is a list in the grammar, and its count optional, so that
// the checker can say what is wrong with `accumulate` on init, twice, or
// without its count (accumulate.go).
type BlockDecl struct {
	Pos        lexer.Position
	EndPos     lexer.Position
	Kind       string        `parser:"@('init' | 'step')"`
	Accumulate []*Accumulate `parser:"@@*"`
	Open       *OpenBrace    `parser:"@@"`
	Body       []*Stmt       `parser:"@@*"`
	Close      *CloseBrace   `parser:"@@"`
}

// Accumulate is `accumulate N` after `step`: a step of N micro-batches
// that synchronises once. `accumulate` is not a reserved word (tensors
// and streams called so keep working): the grammar takes it here only.
type Accumulate struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Count  *Word `parser:"'accumulate' ( (?! 'accumulate') @@ )?"`
}

// OpenBrace is the `{` of a block, kept for its position: the formatter
// attaches comments to it.
type OpenBrace struct {
	Pos   lexer.Position
	Value string `parser:"@'{'"`
}

// CloseBrace is the `}` of a block.
type CloseBrace struct {
	Pos   lexer.Position
	Value string `parser:"@'}'"`
}

// Stmt is one statement of a block. Exactly one field is set.
type Stmt struct {
	Pos        lexer.Position
	EndPos     lexer.Position
	Timed      *TimedStmt      `parser:"(  @@"`
	Collective *CollectiveStmt `parser:" | @@"`
	Group      *GroupStmt      `parser:" | @@"`
	Wait       *WaitStmt       `parser:" | @@"`
	Update     *UpdateStmt     `parser:" | @@"`
	Unscale    *UnscaleStmt    `parser:" | @@"`
	Barrier    *BarrierStmt    `parser:" | @@"`
	Semi       *Punct          `parser:" | @@ )"`
}

// TimedStmt is `backward DURATION [on STREAM] [after STREAM] [for
// PATTERN {, PATTERN}]` or `compute DURATION [on STREAM] [after STREAM]`.
// For (a backward in pieces) is parsed for compute too, so that the checker
// can say it belongs to backward; options after it are kept in Late.
type TimedStmt struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Kind     string       `parser:"@('backward' | 'compute')"`
	Duration *Word        `parser:"@@"`
	Options  []*Option    `parser:"@@*"`
	For      []*PieceName `parser:"( 'for' @@ ( ',' @@ )* )?"`
	Late     []*Option    `parser:"@@*"`
}

// PieceName is a pattern of a backward piece: a Name, but not a statement
// keyword, so that `backward 1ms for` before the next statement reports
// the missing pattern there instead of taking the statement's keyword for
// one (quote a tensor named like one).
type PieceName struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Bare   string `parser:"  (?! 'backward' | 'allreduce' | 'broadcast' | 'reduce' | 'allgather' | 'reducescatter' | 'group' | 'wait' | 'update' | 'unscale') @(Word | Keyword)"`
	Quoted string `parser:"| @String"`
}

// name returns the pattern as a Name.
func (n *PieceName) name() *Name {
	return &Name{Pos: n.Pos, EndPos: n.EndPos, Bare: n.Bare, Quoted: n.Quoted}
}

// CollectiveStmt is `allreduce TARGETS OPTIONS` and the other collectives.
type CollectiveStmt struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Kind    string    `parser:"@('allreduce' | 'broadcast' | 'reduce' | 'allgather' | 'reducescatter')"`
	Targets []*Target `parser:"@@ ( ',' @@ )*"`
	Options []*Option `parser:"@@*"`
}

// Target is one target of a collective: a bucket, a piece `grads[3]`, a
// tensor or a pattern.
type Target struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   *TargetName `parser:"@@"`
	Index  *Word       `parser:"( '[' @@ ']' )?"`
}

// TargetName is a Name that is not a keyword: a keyword after a
// collective is a missing target, not a tensor (quote a tensor named like
// a keyword).
type TargetName struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Bare   string `parser:"  @Word"`
	Quoted string `parser:"| @String"`
}

// name returns the target's name as a Name.
func (n *TargetName) name() *Name {
	return &Name{Pos: n.Pos, EndPos: n.EndPos, Bare: n.Bare, Quoted: n.Quoted}
}

// GroupStmt is `group { ... }`.
type GroupStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Kind   string      `parser:"@'group'"`
	Open   *OpenBrace  `parser:"@@"`
	Body   []*Stmt     `parser:"@@*"`
	Close  *CloseBrace `parser:"@@"`
}

// WaitStmt is `wait STREAM`.
type WaitStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Stream *Word `parser:"'wait' @@"`
}

// BarrierStmt is `barrier [on STREAM] [after STREAM]`: all ranks meet on
// the stream. `barrier` is not a reserved word (a tensor or stream called
// so keeps working): the grammar takes it as a word at a statement's start
// only. Its options are read like any statement's, so that the checker
// can say which one it does not take.
type BarrierStmt struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Kind    string    `parser:"@'barrier'"`
	Options []*Option `parser:"@@*"`
}

// UpdateStmt is `update TARGETS OPTIMIZER OPTIONS`. The optimizer is
// optional in the grammar (not a setting's name: `update g lr 1e-3` has
// none), so that the checker can say that it is missing.
type UpdateStmt struct {
	Pos       lexer.Position
	EndPos    lexer.Position
	Targets   []*Target `parser:"'update' @@ ( ',' @@ )*"`
	Optimizer *Word     `parser:"( (?! 'lr' | 'momentum' | 'weight_decay' | 'wd' | 'beta1' | 'beta2' | 'eps' | 'master' | 'divide') @@ )?"`
	Options   []*Option `parser:"@@*"`
}

// UnscaleStmt is `unscale TARGETS OPTIONS`.
type UnscaleStmt struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Targets []*Target `parser:"'unscale' @@ ( ',' @@ )*"`
	Options []*Option `parser:"@@*"`
}

// ScalerDecl is `scaler RULE [SCALE] [OPTION VALUE]...`: `scaler dynamic
// init 65536`, `scaler static 1024`. The words after the rule are kept as
// a list that the checker pairs up, so that it can say which option is
// unknown or lacks its value (`init` is a reserved word, taken here
// unless a `{` follows it: `scaler dynamic` and then an init block is not
// an option).
type ScalerDecl struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Rule   *Word         `parser:"'scaler' @@"`
	Words  []*ScalerWord `parser:"@@*"`
}

// ScalerWord is one word of a scaler declaration after its rule (not
// `for` or `ranks`, which start a template or the ranks on the next line).
type ScalerWord struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Text   string `parser:"@( 'init' (?! '{') | (?! 'for' | 'ranks') Word )"`
}

// word returns the scaler word as a Word.
func (w *ScalerWord) word() *Word { return &Word{Pos: w.Pos, EndPos: w.EndPos, Text: w.Text} }

// ForDecl is a layer template, `for i in 0..47 { DECLS }`: the tensor
// declarations of its body (and nested templates) repeated for each value
// of the variable, block by block. `for` and `in` are not reserved words
// (tensors and streams called so keep working): the grammar takes them as
// words here only. The body takes any declaration, and `in` may be
// missing, so that the checker can say what is wrong (template.go).
type ForDecl struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Var    *LoopVar    `parser:"'for' @@"`
	In     bool        `parser:"@'in'?"`
	Range  *Word       `parser:"@@"`
	Open   *OpenBrace  `parser:"@@"`
	Body   []*Decl     `parser:"@@*"`
	Close  *CloseBrace `parser:"@@"`
}

// LoopVar is the variable of a template: any word, a reserved one too
// (`for step in 0..3`); the checker says when it is not a valid name.
type LoopVar struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Text   string `parser:"@(Word | Keyword)"`
}

// RunDecl is `run steps N warmup N check every N|off checkpoint every N
// to DIR keep N`.
type RunDecl struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Options []*RunOption `parser:"'run' @@*"`
}

// RunOption is one part of a run declaration. Exactly one field is set.
type RunOption struct {
	Pos        lexer.Position
	EndPos     lexer.Position
	Count      *RunCount      `parser:"  @@"`
	Check      *RunCheck      `parser:"| @@"`
	Checkpoint *RunCheckpoint `parser:"| @@"`
}

// RunCount is `steps N` or `warmup N`.
type RunCount struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    string `parser:"@('steps' | 'warmup')"`
	Value  *Word  `parser:"@@"`
}

// RunCheckpoint is `checkpoint every N [to DIR] [keep N]` (`to` and
// `keep` in either order).
type RunCheckpoint struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Every  *Word `parser:"'checkpoint' 'every' @@"`
	Dir    *Name `parser:"( 'to' @@"`
	Keep   *Word `parser:"| 'keep' @@ )*"`
}

// RunCheck is `check every N` or `check off`.
type RunCheck struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Every  *Word `parser:"'check' ( 'every' @@"`
	Off    bool  `parser:"| @'off' )"`
}
