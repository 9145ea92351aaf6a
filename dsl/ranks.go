package dsl

// The `ranks` declaration: the ranks' relative speeds, the global batch
// and its balancing, which the generated program takes as the defaults of
// --speed, --batch and --balance.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/syncgen/syncgen/ir"
)

// RanksDecl is `ranks [batch N] [balance static|dynamic [every K]] {
// RANKS speed S ... }`. `ranks` is not a reserved word: it starts this
// declaration only where a declaration starts (tensors, streams and
// patterns may still be called so). The options are kept as a list of
// words that the checker pairs up, so that it can say which is unknown or
// lacks its value.
type RanksDecl struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Words   []*Word      `parser:"'ranks' @@*"`
	Open    *OpenBrace   `parser:"@@"`
	Entries []*RankEntry `parser:"@@*"`
	Close   *CloseBrace  `parser:"@@"`
}

// RankEntry is one line of a ranks declaration, `RANK speed S` or `FIRST..LAST
// speed S`, or a lone `;`.
type RankEntry struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Ranks  *Word  `parser:"(  @@"`
	Speed  *Word  `parser:"   'speed' @@"`
	Semi   *Punct `parser:"| @@ )"`
}

// ranksSyntax is how a ranks declaration is written, for hints.
const ranksSyntax = "ranks are declared as `ranks batch N balance static|dynamic every K { RANK speed S; FIRST..LAST speed S }` (entries on lines of their own or between `;`), each option optional"

// ranksKeys are a ranks declaration's options in canonical order.
var ranksKeys = []string{"batch", "balance", "every"}

// defaultBalanceEvery is the period of `balance dynamic` without `every`
// (the runtime's default for --balance dynamic).
const defaultBalanceEvery = 5

// addRanks records the ranks declaration of the main file.
func (c *checker) addRanks(m *module, d *RanksDecl) {
	sp := keywordSpan(d.Pos.Offset, len("ranks"))
	switch {
	case m != c.main:
		c.errorf(m.file, sp, "the ranks belong to the program: declare them in the main file", "ranks declaration in an imported file")
	case c.ranksDecl != nil:
		c.errorf(m.file, sp, "a program has one ranks declaration: put all of its entries in one", "second ranks declaration (the first is on line %d)", c.ranksDecl.Pos.Line)
	default:
		c.ranksDecl = d
	}
}

// declareRanks checks the ranks declaration and sets Program.Ranks.
func (c *checker) declareRanks() {
	d := c.ranksDecl
	if d == nil {
		return
	}
	f := c.main.file
	r := &ir.Ranks{Pos: f.pos(d.Pos.Offset)}
	ok := c.ranksOptions(d, r)
	type entry struct {
		first, last int
		w           *Word
	}
	var seen []entry
	for _, e := range d.Entries {
		if e.Semi != nil {
			continue
		}
		first, last, good := c.rankRange(e.Ranks)
		speed, sgood := c.rankSpeed(e.Speed)
		ok = ok && good && sgood
		if !good {
			continue
		}
		for _, s := range seen {
			if first <= s.last && s.first <= last {
				c.errorf(f, wordSpan(e.Ranks), "give each rank one speed: remove it from one of the entries",
					"ranks %s overlap %s on line %d", code(e.Ranks.Text), code(s.w.Text), s.w.Pos.Line)
				ok = false
				break
			}
		}
		seen = append(seen, entry{first, last, e.Ranks})
		r.Speeds = append(r.Speeds, ir.RankSpeed{First: first, Last: last, Speed: speed, Pos: f.pos(e.Ranks.Pos.Offset)})
	}
	if ok {
		c.prog.Ranks = r
	}
}

// ranksOptions checks the options of a ranks declaration and sets them.
func (c *checker) ranksOptions(d *RanksDecl, r *ir.Ranks) bool {
	f := c.main.file
	const form = "ranks options are written NAME VALUE before the `{`: batch 256, balance static|dynamic, every 5"
	given := map[string]*Word{}
	ok := true
	for i := 0; i < len(d.Words); i++ {
		key := d.Words[i]
		if !slices.Contains(ranksKeys, key.Text) {
			hint := form
			if h := didYouMean(key.Text, ranksKeys); h != "" && !numberLike(key.Text) {
				hint = h + " " + form
			}
			c.errorf(f, wordSpan(key), hint, "unknown ranks option %s", code(key.Text))
			ok = false
			if i+1 < len(d.Words) && numberLike(d.Words[i+1].Text) {
				i++ // its value
			}
			continue
		}
		if prev := given[key.Text]; prev != nil {
			c.errorf(f, wordSpan(key), "give each option once", "%s given twice (first at column %d)", code(key.Text), prev.Pos.Column)
			ok = false
		}
		given[key.Text] = key
		if i+1 >= len(d.Words) || slices.Contains(ranksKeys, d.Words[i+1].Text) {
			c.errorf(f, wordSpan(key), form, "%s without its value", code(key.Text))
			ok = false
			continue
		}
		i++
		v := d.Words[i]
		switch key.Text {
		case "batch", "every":
			n, err := strconv.Atoi(v.Text)
			if err != nil || n < 1 {
				what := "the global batch in samples"
				if key.Text == "every" {
					what = "the period of dynamic balancing in steps"
				}
				c.errorf(f, wordSpan(v), fmt.Sprintf("%s is %s, a whole number of 1 or more", code(key.Text), what),
					"%s %s is not a whole number of 1 or more", key.Text, code(v.Text))
				ok = false
			} else if key.Text == "batch" {
				r.Batch = n
			} else {
				r.Every = n
			}
		case "balance":
			switch v.Text {
			case "static":
				r.Balance = ir.BalanceStatic
			case "dynamic":
				r.Balance = ir.BalanceDynamic
			default:
				hint := "balance is static (shares from the declared speeds) or dynamic (from the measured compute, every K steps)"
				if h := didYouMean(v.Text, []string{"static", "dynamic"}); h != "" {
					hint = h + " " + hint
				}
				c.errorf(f, wordSpan(v), hint, "unknown balance %s", code(v.Text))
				ok = false
			}
		}
	}
	if w := given["every"]; w != nil && r.Balance != ir.BalanceDynamic && given["balance"] != nil && ok {
		c.errorf(f, wordSpan(w), "only `balance dynamic` has a period: remove `every`, or write `balance dynamic`", "`every` with `balance %s`", r.Balance)
		ok = false
	} else if w != nil && given["balance"] == nil {
		c.errorf(f, wordSpan(w), "write `balance dynamic every K`", "`every` without `balance dynamic`")
		ok = false
	}
	if w := given["balance"]; w != nil && given["batch"] == nil && ok {
		c.errorf(f, wordSpan(w), "balancing shares the global batch: give it, e.g. `batch 256`", "`balance %s` without `batch`", r.Balance)
		ok = false
	}
	if r.Balance == ir.BalanceDynamic && r.Every == 0 {
		r.Every = defaultBalanceEvery
	}
	return ok
}

// rankRange checks the ranks of an entry, RANK or FIRST..LAST. A rank is
// at most 2^31-1, as a root rank is (parseInt): the world's size, and
// the ranks the program is run with, are int32 in MPI.
func (c *checker) rankRange(w *Word) (first, last int, ok bool) {
	f := c.main.file
	const form = "write a rank, `3`, or a range of ranks, `4..7`"
	a, b, isRange := strings.Cut(w.Text, "..")
	first, msg := parseInt(a, "rank")
	last = first
	var msg2 string
	if isRange {
		last, msg2 = parseInt(b, "rank")
	}
	tooLarge := func(m string) bool { return strings.HasSuffix(m, " is too large") }
	switch {
	case (msg == "" || tooLarge(msg)) && (msg2 == "" || tooLarge(msg2)) && (msg != "" || msg2 != ""):
		big := a
		if msg == "" {
			big = b
		}
		c.errorf(f, wordSpan(w), fmt.Sprintf("the largest rank is %d", math.MaxInt32), "rank %s is too large", code(big))
	case msg != "" || msg2 != "":
		c.errorf(f, wordSpan(w), form, "%s is not a rank or a range of ranks", code(w.Text))
	case first < 0 || last < 0:
		c.errorf(f, wordSpan(w), "ranks are numbered from 0", "negative rank in %s", code(w.Text))
	case first > last:
		c.errorf(f, wordSpan(w), fmt.Sprintf("write the first rank first: `%d..%d`", last, first), "range %s runs backwards", code(w.Text))
	default:
		return first, last, true
	}
	return 0, 0, false
}

// rankSpeed checks the speed of an entry: a decimal number above 0.
func (c *checker) rankSpeed(w *Word) (float64, bool) {
	v, err := strconv.ParseFloat(w.Text, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || strings.ContainsAny(w.Text, "xXpP_") {
		c.errorf(c.main.file, wordSpan(w), "a speed is a decimal number relative to 1, e.g. `0.6`", "speed %s is not a number", code(w.Text))
		return 0, false
	}
	if v <= 0 {
		c.errorf(c.main.file, wordSpan(w), "a speed is relative to 1 and above 0: 0.5 takes twice as long", "speed %s is not above 0", code(w.Text))
		return 0, false
	}
	return v, true
}

// ranks prints a ranks declaration: its options in canonical order (as
// written when one is unknown or lacks its value), its entries one a line.
func (p *printer) ranks(d *RanksDecl, depth int) {
	text := "ranks"
	var pairs [][2]string
	canonical := true
	for i := 0; i < len(d.Words); i++ {
		k := d.Words[i].Text
		if !slices.Contains(ranksKeys, k) || i+1 >= len(d.Words) || slices.Contains(ranksKeys, d.Words[i+1].Text) {
			canonical = false
			break
		}
		pairs = append(pairs, [2]string{k, d.Words[i+1].Text})
		i++
	}
	if canonical {
		slices.SortStableFunc(pairs, func(a, b [2]string) int {
			return slices.Index(ranksKeys, a[0]) - slices.Index(ranksKeys, b[0])
		})
		for _, kv := range pairs {
			text += " " + kv[0] + " " + kv[1]
		}
	} else {
		for _, w := range d.Words {
			text += " " + w.Text
		}
	}
	it := p.add(d.Pos.Offset, d.Open.Pos.Offset+1, depth, text+" {")
	it.open = true
	for _, e := range d.Entries {
		if e.Semi == nil {
			p.add(e.Pos.Offset, e.EndPos.Offset, depth+1, e.Ranks.Text+" speed "+e.Speed.Text)
		}
	}
	end := p.add(d.Close.Pos.Offset, d.Close.Pos.Offset+1, depth, "}")
	end.close = true
}

// startsRanks reports whether the word t is the `ranks` that starts a
// ranks declaration, rather than a tensor named so: prev is the
// significant token before it.
func startsRanks(t, prev token) bool {
	return t.Type == tokWord && t.Value == "ranks" && !isTensorKeyword(prev)
}
