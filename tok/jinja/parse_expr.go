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
