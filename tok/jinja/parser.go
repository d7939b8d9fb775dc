package jinja

import (
	"fmt"
	"strings"
)

// The parser follows jinja2's recursive-descent Parser (parser.py): the same
// statement set (with the loopcontrols and generation extensions that
// transformers loads) and the same expression precedence, including its
// quirks (filters bind tighter than unary minus's operand, `-2**2` is 4).

type parser struct {
	toks  []token
	i     int
	loops int // for-loop nesting, to reject break/continue outside loops
	depth int // expression nesting, bounded against stack exhaustion
}

func (p *parser) cur() token  { return p.toks[p.i] }
func (p *parser) peek() token { return p.toks[min(p.i+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) failAt(line int, format string, args ...any) error {
	return &SyntaxError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) fail(format string, args ...any) error {
	return p.failAt(p.cur().line, format, args...)
}

func (p *parser) isOp(op string) bool  { t := p.cur(); return t.kind == tOp && t.val == op }
func (p *parser) isName(n string) bool { t := p.cur(); return t.kind == tName && t.val == n }
func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(n string) bool {
	if p.isName(n) {
		p.next()
		return true
	}
	return false
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tVarEnd:
		return "end of print statement"
	case tBlockEnd:
		return "end of statement block"
	case tBlockBegin:
		return "begin of statement block"
	case tVarBegin:
		return "begin of print statement"
	case tString:
		return "string"
	case tInt:
		return "integer"
	case tFloat:
		return "float"
	}
	return "'" + t.val + "'"
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		return p.fail("expected token '%s', got %s", op, describe(p.cur()))
	}
	return nil
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	if p.cur().kind != k {
		return token{}, p.fail("expected token '%s', got %s", what, describe(p.cur()))
	}
	return p.next(), nil
}

func (p *parser) expectName() (string, error) {
	t, err := p.expectKind(tName, "name")
	return t.val, err
}

// parse parses a whole template.
func parse(toks []token) ([]node, error) {
	p := &parser{toks: toks}
	body, end, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.fail("unexpected '%s'", end)
	}
	return body, nil
}

// subparse reads nodes until a block tag whose name is one of ends (left
// unconsumed, returned) or the end of the template.
func (p *parser) subparse(ends []string) ([]node, string, error) {
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			if ends != nil {
				return nil, "", p.fail("unexpected end of template, expected '%s'", strings.Join(ends, "' or '"))
			}
			return body, "", nil
		case tData:
			p.next()
			body = append(body, &dataNode{pos{t.line}, t.val})
		case tVarBegin:
			p.next()
			e, err := p.tuple(tupleOpts{condexpr: true})
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tVarEnd, "end of print statement"); err != nil {
				return nil, "", err
			}
			body = append(body, &outputNode{pos{t.line}, e})
		case tBlockBegin:
			p.next()
			nt := p.cur()
			if nt.kind == tName {
				for _, e := range ends {
					if nt.val == e {
						return body, e, nil
					}
				}
			}
			n, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
				return nil, "", err
			}
			if n != nil {
				body = append(body, n)
			}
		default:
			return nil, "", p.fail("unexpected %s", describe(t))
		}
	}
}

// statements parses a block body after the opening tag, up to one of ends;
// with drop the end tag's name is consumed (its %} is left for the caller).
func (p *parser) statements(ends []string, drop bool) ([]node, string, error) {
	p.skipOp(":")
	if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
		return nil, "", err
	}
	body, end, err := p.subparse(ends)
	if err != nil {
		return nil, "", err
	}
	if drop {
		p.next()
	}
	return body, end, nil
}

func (p *parser) statement() (node, error) {
	t := p.cur()
	if t.kind != tName {
		return nil, p.fail("tag name expected")
	}
	line := t.line
	switch t.val {
	case "for":
		return p.parseFor()
	case "if":
		return p.parseIf()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		p.next()
		fs, err := p.filterChain()
		if err != nil {
			return nil, err
		}
		body, _, err := p.statements([]string{"endfilter"}, true)
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{pos{line}, fs, body}, nil
	case "with":
		return p.parseWith()
	case "print":
		p.next()
		e, err := p.tuple(tupleOpts{condexpr: true})
		if err != nil {
			return nil, err
		}
		return &outputNode{pos{line}, e}, nil
	case "generation":
		// transformers' AssistantTracker: renders its body unchanged.
		p.next()
		body, _, err := p.statements([]string{"endgeneration"}, true)
		if err != nil {
			return nil, err
		}
		return &ifNode{pos{line}, &constExpr{pos{line}, true}, body, nil}, nil
	case "break", "continue":
		p.next()
		if p.loops == 0 {
			return nil, p.failAt(line, "'%s' outside of a loop", t.val)
		}
		return &loopControlNode{pos{line}, t.val == "break"}, nil
	}
	return nil, p.fail("encountered unknown tag '%s'", t.val)
}

func (p *parser) parseFor() (node, error) {
	line := p.next().line
	target, err := p.assignTarget([]string{"in"}, false)
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.fail("expected token 'in', got %s", describe(p.cur()))
	}
	iter, err := p.tuple(tupleOpts{extraEnds: []string{"recursive"}})
	if err != nil {
		return nil, err
	}
	n := &forNode{pos: pos{line}, target: target, iter: iter}
	if p.skipName("if") {
		if n.filter, err = p.expression(true); err != nil {
			return nil, err
		}
	}
	n.recursive = p.skipName("recursive")
	if n.recursive {
		return nil, p.failAt(line, "recursive for loops are not supported")
	}
	p.loops++
	body, end, err := p.statements([]string{"endfor", "else"}, true)
	p.loops--
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if n.elseBody, _, err = p.statements([]string{"endfor"}, true); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseIf() (node, error) {
	line := p.next().line
	test, err := p.tuple(tupleOpts{})
	if err != nil {
		return nil, err
	}
	n := &ifNode{pos: pos{line}, test: test}
	body, end, err := p.statements([]string{"elif", "else", "endif"}, true)
	if err != nil {
		return nil, err
	}
	n.body = body
	switch end {
	case "elif":
		elif, err := p.parseIfRest(p.cur().line)
		if err != nil {
			return nil, err
		}
		n.elseBody = []node{elif}
	case "else":
		if n.elseBody, _, err = p.statements([]string{"endif"}, true); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// parseIfRest parses the tail after an `elif` keyword as a nested if.
func (p *parser) parseIfRest(line int) (node, error) {
	p.i-- // re-read as though the elif were an if
	p.toks[p.i] = token{kind: tName, val: "if", line: line}
	return p.parseIf()
}

func (p *parser) parseSet() (node, error) {
	line := p.next().line
	target, err := p.assignTarget(nil, true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		v, err := p.tuple(tupleOpts{condexpr: true})
		if err != nil {
			return nil, err
		}
		return &setNode{pos{line}, target, v}, nil
	}
	var fs []*filterExpr
	if p.isOp("|") {
		if fs, err = p.filterChain(); err != nil {
			return nil, err
		}
	}
	body, _, err := p.statements([]string{"endset"}, true)
	if err != nil {
		return nil, err
	}
	return &setBlockNode{pos{line}, target, fs, body}, nil
}

// assignTarget parses a name, a tuple of names, or (for set) ns.attr.
func (p *parser) assignTarget(extraEnds []string, withNamespace bool) (expr, error) {
	line := p.cur().line
	if withNamespace && p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "." {
		name := p.next().val
		p.next()
		attr, err := p.expectName()
		if err != nil {
			return nil, err
		}
		return &nsRefExpr{pos{line}, name, attr}, nil
	}
	t, err := p.tuple(tupleOpts{simplified: true, extraEnds: extraEnds})
	if err != nil {
		return nil, err
	}
	if !assignable(t) {
		return nil, p.failAt(line, "can't assign to %T", t)
	}
	return t, nil
}

func assignable(e expr) bool {
	switch e := e.(type) {
	case *nameExpr:
		return !map[string]bool{"true": true, "false": true, "none": true, "True": true, "False": true, "None": true}[e.name]
	case *tupleExpr:
		for _, it := range e.items {
			if !assignable(it) {
				return false
			}
		}
		return true
	}
	return false
}

func (p *parser) signature() ([]string, []expr, error) {
	var params []string
	var defaults []expr
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	for !p.isOp(")") {
		if len(params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		name, err := p.expectName()
		if err != nil {
			return nil, nil, err
		}
		if p.skipOp("=") {
			d, err := p.expression(true)
			if err != nil {
				return nil, nil, err
			}
			defaults = append(defaults, d)
		} else if len(defaults) > 0 {
			return nil, nil, p.fail("non-default argument follows default argument")
		}
		params = append(params, name)
	}
	p.next()
	return params, defaults, nil
}

func (p *parser) parseMacro() (node, error) {
	line := p.next().line
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	params, defaults, err := p.signature()
	if err != nil {
		return nil, err
	}
	loops := p.loops
	p.loops = 0 // break inside a macro cannot reach an outer loop
	body, _, err := p.statements([]string{"endmacro"}, true)
	p.loops = loops
	if err != nil {
		return nil, err
	}
	return &macroNode{pos{line}, name, params, defaults, body}, nil
}

func (p *parser) parseCallBlock() (node, error) {
	line := p.next().line
	caller := &macroNode{pos: pos{line}, name: "caller"}
	if p.isOp("(") {
		var err error
		if caller.params, caller.defaults, err = p.signature(); err != nil {
			return nil, err
		}
	}
	e, err := p.expression(true)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callExpr)
	if !ok {
		return nil, p.failAt(line, "expected call")
	}
	loops := p.loops
	p.loops = 0
	caller.body, _, err = p.statements([]string{"endcall"}, true)
	p.loops = loops
	if err != nil {
		return nil, err
	}
	return &callBlockNode{pos{line}, call, caller}, nil
}

func (p *parser) parseWith() (node, error) {
	line := p.next().line
	n := &withNode{pos: pos{line}}
	for p.cur().kind != tBlockEnd {
		if len(n.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		t, err := p.assignTarget(nil, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, t)
		n.values = append(n.values, v)
	}
	body, _, err := p.statements([]string{"endwith"}, true)
	if err != nil {
		return nil, err
	}
	n.body = body
	return n, nil
}

// filterChain parses `f1(args)|f2|...` as used by filter blocks and set
// blocks (the first filter has no leading pipe in a filter block).
func (p *parser) filterChain() ([]*filterExpr, error) {
	var fs []*filterExpr
	first := !p.isOp("|")
	for first || p.isOp("|") {
		if !first {
			p.next()
		}
		first = false
		f, err := p.filterTail(nil)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}
