package jinja

// Expression parsing, one function per jinja2 precedence level.

const maxExprDepth = 200

type tupleOpts struct {
	simplified bool // assignment targets: primaries only
	condexpr   bool // allow `a if b else c`
	extraEnds  []string
	explicit   bool // inside parentheses: () is an empty tuple
}

func (p *parser) isTupleEnd(extra []string) bool {
	t := p.cur()
	if t.kind == tVarEnd || t.kind == tBlockEnd || (t.kind == tOp && t.val == ")") {
		return true
	}
	if t.kind == tName {
		for _, e := range extra {
			if t.val == e {
				return true
			}
		}
	}
	return false
}

func (p *parser) tuple(o tupleOpts) (expr, error) {
	line := p.cur().line
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(o.extraEnds) {
			break
		}
		var e expr
		var err error
		switch {
		case o.simplified:
			e, err = p.primary()
		default:
			e, err = p.expression(o.condexpr)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, e)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !o.explicit {
			return nil, p.fail("expected an expression, got %s", describe(p.cur()))
		}
	}
	return &tupleExpr{pos{line}, items}, nil
}

func (p *parser) expression(condexpr bool) (expr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxExprDepth {
		return nil, p.fail("expression nested too deeply")
	}
	if !condexpr {
		return p.or()
	}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		line := p.next().line
		test, err := p.or()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.skipName("else") {
			if els, err = p.expression(true); err != nil {
				return nil, err
			}
		}
		e = &condExpr{pos{line}, test, e, els}
	}
	return e, nil
}

func (p *parser) or() (expr, error) {
	l, err := p.and()
	for err == nil && p.isName("or") {
		line := p.next().line
		var r expr
		if r, err = p.and(); err == nil {
			l = &binaryExpr{pos{line}, "or", l, r}
		}
	}
	return l, err
}

func (p *parser) and() (expr, error) {
	l, err := p.not()
	for err == nil && p.isName("and") {
		line := p.next().line
		var r expr
		if r, err = p.not(); err == nil {
			l = &binaryExpr{pos{line}, "and", l, r}
		}
	}
	return l, err
}

func (p *parser) not() (expr, error) {
	if p.isName("not") {
		line := p.next().line
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxExprDepth {
			return nil, p.fail("expression nested too deeply")
		}
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos{line}, "not", x}, nil
	}
	return p.compare()
}

var compareOps = map[string]bool{"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}

func (p *parser) compare() (expr, error) {
	line := p.cur().line
	first, err := p.math1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{pos: pos{line}, first: first}
	for {
		var op string
		t := p.cur()
		switch {
		case t.kind == tOp && compareOps[t.val]:
			op = t.val
			p.next()
		case p.isName("in"):
			op = "in"
			p.next()
		case p.isName("not") && p.peek().kind == tName && p.peek().val == "in":
			op = "notin"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		r, err := p.math1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (p *parser) math1() (expr, error) {
	l, err := p.concat()
	for err == nil && (p.isOp("+") || p.isOp("-")) {
		t := p.next()
		var r expr
		if r, err = p.concat(); err == nil {
			l = &binaryExpr{pos{t.line}, t.val, l, r}
		}
	}
	return l, err
}

func (p *parser) concat() (expr, error) {
	line := p.cur().line
	first, err := p.math2()
	if err != nil || !p.isOp("~") {
		return first, err
	}
	parts := []expr{first}
	for p.skipOp("~") {
		r, err := p.math2()
		if err != nil {
			return nil, err
		}
		parts = append(parts, r)
	}
	return &concatExpr{pos{line}, parts}, nil
}

func (p *parser) math2() (expr, error) {
	l, err := p.pow()
	for err == nil && (p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%")) {
		t := p.next()
		var r expr
		if r, err = p.pow(); err == nil {
			l = &binaryExpr{pos{t.line}, t.val, l, r}
		}
	}
	return l, err
}

func (p *parser) pow() (expr, error) {
	l, err := p.unary(true)
	for err == nil && p.isOp("**") {
		t := p.next()
		var r expr
		if r, err = p.unary(true); err == nil {
			l = &binaryExpr{pos{t.line}, "**", l, r}
		}
	}
	return l, err
}

func (p *parser) unary(withFilter bool) (expr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxExprDepth {
		return nil, p.fail("expression nested too deeply")
	}
	var e expr
	var err error
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		x, err := p.unary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{pos{t.line}, t.val, x}
	} else if e, err = p.primary(); err != nil {
		return nil, err
	}
	if e, err = p.postfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return p.filterExpr(e)
	}
	return e, nil
}

func (p *parser) primary() (expr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxExprDepth {
		return nil, p.fail("expression nested too deeply")
	}
	t := p.cur()
	ps := pos{t.line}
	switch t.kind {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{ps, true}, nil
		case "false", "False":
			return &constExpr{ps, false}, nil
		case "none", "None":
			return &constExpr{ps, nil}, nil
		}
		return &nameExpr{ps, t.val}, nil
	case tString:
		s := p.next().val
		for p.cur().kind == tString { // adjacent literals concatenate
			s += p.next().val
		}
		return &constExpr{ps, s}, nil
	case tInt, tFloat:
		p.next()
		return &constExpr{ps, t.num}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			e, err := p.tuple(tupleOpts{condexpr: true, explicit: true})
			if err != nil {
				return nil, err
			}
			return e, p.expectOp(")")
		case "[":
			p.next()
			l := &listExpr{pos: ps}
			for !p.isOp("]") {
				if len(l.items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				e, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, e)
			}
			return l, p.expectOp("]")
		case "{":
			p.next()
			d := &dictExpr{pos: ps}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			return d, p.expectOp("}")
		}
	}
	return nil, p.fail("unexpected %s", describe(t))
}

func (p *parser) postfix(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			e, err = p.subscript(e)
		case p.isOp("("):
			e, err = p.call(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) filterExpr(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			p.next()
			e, err = p.filterTail(e)
		case p.isName("is"):
			e, err = p.test(e)
		case p.isOp("("):
			e, err = p.call(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) subscript(obj expr) (expr, error) {
	t := p.next()
	ps := pos{t.line}
	if t.val == "." {
		a := p.next()
		switch a.kind {
		case tName:
			return &getAttrExpr{ps, obj, a.val}, nil
		case tInt:
			return &getItemExpr{ps, obj, &constExpr{ps, a.num}}, nil
		}
		return nil, p.failAt(a.line, "expected name or number")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		a, err := p.subscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	p.next()
	switch len(args) {
	case 0:
		return nil, p.failAt(t.line, "expected subscript expression")
	case 1:
		return &getItemExpr{ps, obj, args[0]}, nil
	}
	return &getItemExpr{ps, obj, &tupleExpr{ps, args}}, nil
}

func (p *parser) subscribed() (expr, error) {
	ps := pos{p.cur().line}
	var start expr
	if !p.isOp(":") {
		e, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return e, nil
		}
		start = e
	}
	p.next()
	s := &sliceExpr{pos: ps, start: start}
	var err error
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		if s.stop, err = p.expression(true); err != nil {
			return nil, err
		}
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		if s.step, err = p.expression(true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// callArgs parses `(a, b, k=v, *args, **kwargs)`.
func (p *parser) callArgs() (args []expr, kwNames []string, kwVals []expr, dyn, dynKw expr, err error) {
	if err = p.expectOp("("); err != nil {
		return
	}
	first := true
	for !p.isOp(")") {
		if !first {
			if err = p.expectOp(","); err != nil {
				return
			}
			if p.isOp(")") {
				break
			}
		}
		first = false
		switch {
		case p.isOp("*"):
			p.next()
			dyn, err = p.expression(true)
		case p.isOp("**"):
			p.next()
			dynKw, err = p.expression(true)
		case p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=":
			if dynKw != nil {
				return nil, nil, nil, nil, nil, p.fail("invalid syntax for function call expression")
			}
			name := p.next().val
			p.next()
			var v expr
			v, err = p.expression(true)
			kwNames = append(kwNames, name)
			kwVals = append(kwVals, v)
		default:
			if dyn != nil || dynKw != nil || kwNames != nil {
				return nil, nil, nil, nil, nil, p.fail("invalid syntax for function call expression")
			}
			var v expr
			v, err = p.expression(true)
			args = append(args, v)
		}
		if err != nil {
			return
		}
	}
	p.next()
	return
}

func (p *parser) call(fn expr) (expr, error) {
	line := p.cur().line
	args, kn, kv, dyn, dynKw, err := p.callArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos{line}, fn, args, kn, kv, dyn, dynKw}, nil
}

// filterTail parses a filter name (dotted names allowed) and its arguments;
// the pipe has been consumed.
func (p *parser) filterTail(node expr) (*filterExpr, error) {
	line := p.cur().line
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	for p.skipOp(".") {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + n
	}
	f := &filterExpr{pos: pos{line}, node: node, name: name}
	if p.isOp("(") {
		var dyn, dynKw expr
		if f.args, f.kwNames, f.kwVals, dyn, dynKw, err = p.callArgs(); err != nil {
			return nil, err
		}
		if dyn != nil || dynKw != nil {
			return nil, p.failAt(line, "*args and **kwargs in filter calls are not supported")
		}
	}
	return f, nil
}

func (p *parser) test(node expr) (expr, error) {
	line := p.next().line // "is"
	negate := p.skipName("not")
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	for p.skipOp(".") {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + n
	}
	t := &testExpr{pos: pos{line}, node: node, name: name}
	c := p.cur()
	switch {
	case p.isOp("("):
		var dyn, dynKw expr
		if t.args, t.kwNames, t.kwVals, dyn, dynKw, err = p.callArgs(); err != nil {
			return nil, err
		}
		if dyn != nil || dynKw != nil {
			return nil, p.failAt(line, "*args and **kwargs in tests are not supported")
		}
	case (c.kind == tName || c.kind == tString || c.kind == tInt || c.kind == tFloat ||
		(c.kind == tOp && (c.val == "[" || c.val == "{"))) &&
		!(c.kind == tName && (c.val == "else" || c.val == "or" || c.val == "and")):
		// jinja2 takes one bare argument: `x is divisibleby 3`.
		if c.kind == tName && c.val == "is" {
			return nil, p.fail("you cannot chain multiple tests with is")
		}
		a, err := p.primary()
		if err != nil {
			return nil, err
		}
		if a, err = p.postfix(a); err != nil {
			return nil, err
		}
		t.args = []expr{a}
	}
	if negate {
		return &unaryExpr{pos{line}, "not", t}, nil
	}
	return t, nil
}
