package jinja

// The syntax tree mirrors jinja2's nodes closely enough that the evaluator
// can follow jinja2's semantics one node at a time. Every node records the
// line it came from so that errors can name it.

type node interface{ lineNo() int }

type pos struct{ line int }

func (p pos) lineNo() int { return p.line }

// ---- statements ----

type dataNode struct {
	pos
	text string
}

type outputNode struct {
	pos
	expr expr
}

type forNode struct {
	pos
	target    expr // nameExpr or tupleExpr of names
	iter      expr
	filter    expr // `for x in y if cond`, nil when absent
	body      []node
	elseBody  []node
	recursive bool
}

type ifNode struct {
	pos
	test     expr
	body     []node
	elseBody []node // an elif is a nested ifNode here, as in jinja2
}

type setNode struct {
	pos
	target expr // nameExpr, tupleExpr, or nsRefExpr
	value  expr
}

type setBlockNode struct {
	pos
	target  expr
	filters []*filterExpr // optional `{% set x | f %}` chain, applied in order
	body    []node
}

type macroNode struct {
	pos
	name     string
	params   []string
	defaults []expr // aligned to the last len(defaults) params
	body     []node
}

type callBlockNode struct {
	pos
	call   *callExpr
	caller *macroNode // the block body as the `caller` macro
}

type filterBlockNode struct {
	pos
	filters []*filterExpr
	body    []node
}

type withNode struct {
	pos
	targets []expr
	values  []expr
	body    []node
}

type loopControlNode struct {
	pos
	brk bool // break, else continue
}

// ---- expressions ----

type expr interface{ lineNo() int }

type constExpr struct {
	pos
	val Value
}

type nameExpr struct {
	pos
	name string
}

type listExpr struct {
	pos
	items []expr
}

type tupleExpr struct {
	pos
	items []expr
}

type dictExpr struct {
	pos
	keys, vals []expr
}

type getAttrExpr struct {
	pos
	obj  expr
	attr string
}

type getItemExpr struct {
	pos
	obj expr
	key expr
}

type sliceExpr struct {
	pos
	start, stop, step expr // nil when omitted
}

type callExpr struct {
	pos
	fn        expr
	args      []expr
	kwNames   []string
	kwVals    []expr
	dynArgs   expr
	dynKwargs expr
}

type filterExpr struct {
	pos
	node    expr // nil inside filter blocks and set blocks
	name    string
	args    []expr
	kwNames []string
	kwVals  []expr
}

type testExpr struct {
	pos
	node    expr
	name    string
	args    []expr
	kwNames []string
	kwVals  []expr
}

type unaryExpr struct {
	pos
	op string // "not", "-", "+"
	x  expr
}

type binaryExpr struct {
	pos
	op   string // + - * / // % ** and or
	l, r expr
}

type concatExpr struct {
	pos
	parts []expr
}

type compareExpr struct {
	pos
	first expr
	ops   []string // == != < <= > >= in notin
	rest  []expr
}

type condExpr struct {
	pos
	test, then, els expr // els nil: undefined when the test fails
}

type nsRefExpr struct {
	pos
	name, attr string
}
