package prometheus_test

// A small PromQL parser for checking the PromQL this package ships (the
// module does not depend on Prometheus's own): it recognises the syntax
// (tokens, brackets, calls, aggregations, selectors, ranges, subqueries,
// offsets, vector matching) and records what the syntax names, for
// schema.check (schema_test.go).

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// PromQL tokens.
type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tNumber
	tDuration
	tString
	tOp // operators and punctuation
)

type token struct {
	kind tokKind
	text string
}

var durationRE = regexp.MustCompile(`^([0-9]+(ms|[smhdwy]))+$`)

// lex splits a PromQL expression into tokens.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case isLetter(c):
			j := i + 1
			for j < len(src) && (isLetter(src[j]) || isDigit(src[j]) || src[j] == ':') {
				j++
			}
			toks = append(toks, token{tIdent, src[i:j]})
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			j := i + 1
			for j < len(src) && (isLetter(src[j]) || isDigit(src[j]) || src[j] == '.' ||
				((src[j] == '+' || src[j] == '-') && (src[j-1] == 'e' || src[j-1] == 'E'))) {
				j++
			}
			text := src[i:j]
			switch {
			case durationRE.MatchString(text):
				toks = append(toks, token{tDuration, text})
			default:
				if _, err := strconv.ParseFloat(text, 64); err != nil {
					return nil, fmt.Errorf("bad number %q", text)
				}
				toks = append(toks, token{tNumber, text})
			}
			i = j
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			v := src[i+1 : j]
			if c != '`' {
				u, err := strconv.Unquote(`"` + strings.ReplaceAll(v, `\'`, `'`) + `"`)
				if err != nil {
					return nil, fmt.Errorf("bad string %q: %v", src[i:j+1], err)
				}
				v = u
			}
			toks = append(toks, token{tString, v})
			i = j + 1
		default:
			if i+1 < len(src) {
				switch two := src[i : i+2]; two {
				case "==", "!=", ">=", "<=", "=~", "!~":
					toks = append(toks, token{tOp, two})
					i += 2
					continue
				}
			}
			if !strings.ContainsRune("=><+-*/%^(){}[],:@", rune(c)) {
				return nil, fmt.Errorf("unexpected character %q at %d", c, i)
			}
			toks = append(toks, token{tOp, string(c)})
			i++
		}
	}
	return append(toks, token{tEOF, ""}), nil
}

func isLetter(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

var (
	aggregations = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile")
	functions    = set("abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
		"count_over_time", "day_of_month", "day_of_week", "days_in_month", "delta", "deriv", "exp", "floor", "histogram_quantile",
		"hour", "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
		"max_over_time", "min_over_time", "minute", "month", "predict_linear", "present_over_time", "quantile_over_time", "rate",
		"resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time",
		"time", "timestamp", "vector", "year")
	counterFuncs = set("rate", "irate", "increase", "resets")
	binOps       = set("+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<=", "and", "or", "unless", "atan2")
)

func set(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

type matcher struct{ label, op, value string }

// selector is a vector selector and the innermost call around it.
type selector struct {
	name     string
	matchers []matcher
	call     string
}

// parser is a recursive-descent recogniser of PromQL that records the
// selectors and the label names of by, without, on, ignoring and
// group_left/group_right lists.
type parser struct {
	toks   []token
	i      int
	calls  []string
	sels   []selector
	groups []string
}

type parseError string

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }
func (p *parser) fail(format string, args ...any) {
	panic(parseError(fmt.Sprintf(format, args...) + fmt.Sprintf(" (at token %d %q)", p.i, p.peek().text)))
}
func (p *parser) expect(text string) {
	if t := p.next(); t.kind != tOp || t.text != text {
		p.i--
		p.fail("want %q", text)
	}
}
func (p *parser) isOp(text string) bool { t := p.peek(); return t.kind == tOp && t.text == text }
func (p *parser) isIdent(text string) bool {
	t := p.peek()
	return t.kind == tIdent && t.text == text
}

// parse parses src as one expression.
func parse(src string) (p *parser, err error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p = &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", string(pe))
		}
	}()
	p.expr()
	if p.peek().kind != tEOF {
		p.fail("unexpected trailing input")
	}
	return p, nil
}

func (p *parser) expr() {
	p.unary()
	for {
		t := p.peek()
		if (t.kind != tOp && t.kind != tIdent) || !binOps[t.text] {
			return
		}
		p.next()
		if p.isIdent("bool") {
			p.next()
		}
		if p.isIdent("on") || p.isIdent("ignoring") {
			p.next()
			p.labelList()
		}
		if p.isIdent("group_left") || p.isIdent("group_right") {
			p.next()
			if p.isOp("(") {
				p.labelList()
			}
		}
		p.unary()
	}
}

func (p *parser) unary() {
	if p.isOp("-") || p.isOp("+") {
		p.next()
	}
	p.primary()
	p.postfix()
}

func (p *parser) postfix() {
	for {
		switch {
		case p.isOp("["):
			p.next()
			if p.next().kind != tDuration {
				p.i--
				p.fail("want a duration")
			}
			if p.isOp(":") {
				p.next()
				if p.peek().kind == tDuration {
					p.next()
				}
			}
			p.expect("]")
		case p.isIdent("offset"):
			p.next()
			if p.isOp("-") {
				p.next()
			}
			if p.next().kind != tDuration {
				p.i--
				p.fail("want a duration after offset")
			}
		case p.isOp("@"):
			p.next()
			if p.peek().kind == tNumber {
				p.next()
			} else if p.isIdent("start") || p.isIdent("end") {
				p.next()
				p.expect("(")
				p.expect(")")
			} else {
				p.fail("want a time after @")
			}
		default:
			return
		}
	}
}

func (p *parser) primary() {
	t := p.peek()
	switch {
	case t.kind == tNumber || t.kind == tString:
		p.next()
	case t.kind == tOp && t.text == "(":
		p.next()
		p.expr()
		p.expect(")")
	case t.kind == tOp && t.text == "{":
		p.selector("")
	case t.kind == tIdent && (strings.EqualFold(t.text, "inf") || strings.EqualFold(t.text, "nan")):
		p.next()
	case t.kind == tIdent && aggregations[t.text]:
		p.next()
		if p.isIdent("by") || p.isIdent("without") {
			p.next()
			p.labelList()
		}
		p.call(t.text)
		if p.isIdent("by") || p.isIdent("without") {
			p.next()
			p.labelList()
		}
	case t.kind == tIdent && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].text == "(":
		if !functions[t.text] {
			p.fail("unknown function %s", t.text)
		}
		p.next()
		p.call(t.text)
	case t.kind == tIdent:
		p.next()
		p.selector(t.text)
	default:
		p.fail("want an expression")
	}
}

// call parses a parenthesised argument list of fn.
func (p *parser) call(fn string) {
	p.expect("(")
	p.calls = append(p.calls, fn)
	if !p.isOp(")") {
		p.expr()
		for p.isOp(",") {
			p.next()
			p.expr()
		}
	}
	p.calls = p.calls[:len(p.calls)-1]
	p.expect(")")
}

func (p *parser) labelList() {
	p.expect("(")
	for !p.isOp(")") {
		t := p.next()
		if t.kind != tIdent {
			p.i--
			p.fail("want a label name")
		}
		p.groups = append(p.groups, t.text)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	p.expect(")")
}

func (p *parser) selector(name string) {
	s := selector{name: name}
	if len(p.calls) > 0 {
		s.call = p.calls[len(p.calls)-1]
	}
	if p.isOp("{") {
		p.next()
		for !p.isOp("}") {
			l := p.next()
			if l.kind != tIdent {
				p.i--
				p.fail("want a label name in a matcher")
			}
			op := p.next()
			if op.kind != tOp || (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~") {
				p.i--
				p.fail("want a matcher operator")
			}
			v := p.next()
			if v.kind != tString {
				p.i--
				p.fail("want a string in a matcher")
			}
			if l.text == "__name__" && op.text == "=" {
				s.name = v.text
			} else {
				s.matchers = append(s.matchers, matcher{l.text, op.text, v.text})
			}
			if !p.isOp(",") {
				break
			}
			p.next()
		}
		p.expect("}")
	}
	if s.name == "" {
		p.fail("a selector without a metric name")
	}
	p.sels = append(p.sels, s)
}
