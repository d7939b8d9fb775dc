package jinja

// Postfix parsing: attribute and item access, calls, filters and tests.

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
