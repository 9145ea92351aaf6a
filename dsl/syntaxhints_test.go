package dsl

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// grammarRules returns the rules of the parser's grammar, as participle
// writes it in EBNF (`Name = rule .`), by name.
func grammarRules(t *testing.T) map[string]string {
	t.Helper()
	rules := map[string]string{}
	for _, line := range strings.Split(parser.String(), "\n") {
		if name, rule, ok := strings.Cut(line, " = "); ok {
			rules[name] = strings.TrimSuffix(rule, " .")
		}
	}
	if len(rules) < 10 {
		t.Fatalf("the grammar has %d rules:\n%s", len(rules), parser.String())
	}
	return rules
}

// grammarWord matches a keyword that the grammar names.
var grammarWord = regexp.MustCompile(`"([a-z_][a-z0-9_]*)"`)

// leadingWords returns the keywords a rule starts with: `"wait" Word` is
// wait, `("init" | "step") ...` is init and step.
func leadingWords(rule string) []string {
	head := rule
	if strings.HasPrefix(rule, "(") {
		head = rule[:strings.Index(rule, ")")+1]
	} else if f := strings.Fields(rule); len(f) > 0 {
		head = f[0]
	}
	var words []string
	for _, m := range grammarWord.FindAllStringSubmatch(head, -1) {
		words = append(words, m[1])
	}
	return words
}

// alternatives returns the names of the rules a rule of alternatives,
// `(A | B | C)`, chooses among.
func alternatives(rule string) []string {
	return strings.Fields(strings.NewReplacer("(", " ", ")", " ", "|", " ").Replace(rule))
}

// The keywords that hints suggest and list are the grammar's: a word the
// grammar takes is suggested for a misspelling of it, the statements and
// declarations it starts are listed where one may start, and every option
// the grammar takes after a statement or bucket is some construct's.
// (`barrier`, `algo` and `checkpoint` were missing.)
func TestHintKeywordsFollowTheGrammar(t *testing.T) {
	rules := grammarRules(t)
	for _, m := range grammarWord.FindAllStringSubmatch(parser.String(), -1) {
		// wd: the grammar takes it so that the checker can say to write
		// weight_decay; it is suggested for nothing.
		if !slices.Contains(allKeywords, m[1]) && m[1] != "wd" {
			t.Errorf("the grammar's %q is not in allKeywords: no \"did you mean\" suggests it", m[1])
		}
	}
	for _, tc := range []struct {
		rule string
		list []string
		name string
	}{{"Stmt", statementKeywords, "statementKeywords"}, {"Decl", topKeywords, "topKeywords"}} {
		var starts []string
		for _, alt := range alternatives(rules[tc.rule]) {
			if alt == "Punct" {
				continue
			}
			words := leadingWords(rules[alt])
			if len(words) == 0 {
				t.Errorf("%s %s starts with no keyword: %s", tc.rule, alt, rules[alt])
			}
			starts = append(starts, words...)
		}
		slices.Sort(starts)
		if got := slices.Sorted(slices.Values(tc.list)); !slices.Equal(got, starts) {
			t.Errorf("%s = %q, want the keywords that start a %s of the grammar, %q", tc.name, got, tc.rule, starts)
		}
	}
	var options []string
	for _, m := range grammarWord.FindAllStringSubmatch(rules["Option"], -1) {
		options = append(options, m[1])
	}
	for _, o := range options {
		found := false
		for _, opts := range constructOptions {
			found = found || slices.Contains(opts, o)
		}
		if !found && o != "wd" { // wd: the checker says to write weight_decay
			t.Errorf("the grammar's option %q is no construct's in constructOptions", o)
		}
		if _, ok := optionValues[o]; !ok && o != "agree" && o != "wd" {
			t.Errorf("the grammar's option %q has no value in optionValues", o)
		}
	}
	for construct, opts := range constructOptions {
		for _, o := range opts {
			if _, ok := optionValues[o]; !ok && o != "agree" && o != "frozen" {
				t.Errorf("option %q of %s has no value in optionValues", o, construct)
			}
		}
	}
	// The values hints list are the checker's.
	if got := slices.Sorted(slices.Values(redOpNames)); !slices.Equal(got, slices.Sorted(maps.Keys(redOps))) {
		t.Errorf("redOpNames %q, want the ops of redOps", redOpNames)
	}
	for _, op := range redOpNames {
		if !strings.Contains("|"+optionValue("allreduce", "op")+"|", "|"+op+"|") {
			t.Errorf("the hint's ops %q lack %q", optionValue("allreduce", "op"), op)
		}
	}
	for algo := range algos {
		if !strings.Contains(optionValue("allreduce", "algo"), algo) {
			t.Errorf("the hint's algorithms %q lack %q", optionValue("allreduce", "algo"), algo)
		}
	}
}

// constructOptions lists, for each statement and for a bucket, exactly
// the options that the checker takes there, and the value hints give
// each is one the checker takes: the hints said `after ready|STREAM` of
// backward (an error there) and missed allreduce's `algo` and backward's
// `for`.
func TestConstructOptionsAreTheCheckers(t *testing.T) {
	options := append(grammarWord.FindAllString(grammarRules(t)["Option"], -1), `"for"`)
	values := map[string]string{
		"op": "sum", "algo": "flat", "on": "comm", "after": "comm", "from": "0", "to": "0", "into": "out",
		"master": "f32", "lr": "0.1", "momentum": "0.5", "weight_decay": "0.1", "wd": "0.1", "beta1": "0.5", "beta2": "0.5", "eps": "0.1",
		"cap": "1MiB", "first": "1KiB", "order": "declared", "wire": "f32", "divide": "before", "agree": "", "for": "a",
	}
	const decls = "tensor a f32[4]\ntensor b f32[4]\nbucket g { a }\n"
	// Each construct with %s where the option goes; several forms when
	// the options it takes depend on more (an update's optimizer).
	constructs := map[string][]string{
		"backward":      {"step { backward 1ms on compute %s }\n"},
		"compute":       {"step { compute 1ms on compute %s }\n"},
		"allreduce":     {"step { allreduce g %s }\n"},
		"broadcast":     {"step { broadcast g from 0 %s }\n"},
		"reduce":        {"step { reduce g to 0 %s }\n"},
		"allgather":     {"step { allgather g %s }\n"},
		"reducescatter": {"step { reducescatter g %s }\n"},
		"update":        {"step { backward 1ms; allreduce g after ready; update g sgd %s }\n", "step { backward 1ms; allreduce g after ready; update g adamw %s }\n"},
		"unscale":       {"scaler dynamic\nstep { backward 1ms; allreduce g after ready; unscale g %s }\n"},
		"barrier":       {"step { barrier %s }\n"},
		"bucket":        {"bucket h { b } cap 1MiB %s\n"},
	}
	for construct, forms := range constructs {
		var takes []string
		for _, o := range options {
			o = strings.Trim(o, `"`)
			if strings.Contains(forms[0], " "+o+" ") || o == "for" && construct != "backward" && construct != "compute" {
				continue // in the form already; `for` is parsed after a backward or compute only
			}
			text := strings.TrimSpace(o + " " + values[o])
			for _, form := range forms {
				src := decls + strings.Replace(form, "%s", text, 1)
				at := strings.Index(src, text)
				_, diags := Check("plan.sync", []byte(src))
				refused := false
				for _, d := range diags {
					if d.Severity == Error && d.Pos.Offset >= at && d.Pos.Offset < at+len(text) {
						refused = true
					}
				}
				if !refused {
					takes = append(takes, o)
					break
				}
			}
		}
		want := slices.Sorted(slices.Values(constructOptions[construct]))
		for _, o := range strings.Fields(forms[0]) {
			want = slices.DeleteFunc(want, func(w string) bool { return w == o })
		}
		if slices.Sort(takes); !slices.Equal(takes, want) {
			t.Errorf("%s takes %q, constructOptions has %q", construct, takes, want)
		}
	}
}
