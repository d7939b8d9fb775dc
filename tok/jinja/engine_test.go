package jinja

import "testing"

// Table tests of the engine against jinja2 (the oracle renders the same
// templates at test time). Each group covers one part of the language.

const commonVars = `{"xs": [3, 1, 2], "s": "  Hello, World  ", "d": {"b": 1, "a": [1.5, "é"], "items": "k"},
 "n": null, "t": true, "f": 0.1, "big": 1e16, "neg": -7, "empty": [], "u": "ünï ☃ 😀",
 "users": [{"name": "ann", "age": 31, "tags": ["x"]}, {"name": "Bob", "age": 25, "tags": []}, {"name": "cy", "age": 40}],
 "msg": {"role": "user", "content": "hi"}, "q": "it's \"quoted\"\n\ttab"}`

func TestWhitespaceControl(t *testing.T) {
	checkAgainstOracle(t, []oracleCase{
		{"trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n", ""},
		{"lstrip_blocks", "x\n    {% if true %}\n    y\n    {% endif %}\nz", ""},
		{"lstrip comment", "a\n   {# c #}\nb", ""},
		{"plus disables lstrip", "a\n   {%+ if true %}b{% endif %}", ""},
		{"plus disables trim", "{% if true +%}\nb{% endif %}", ""},
		{"minus strips", "a  \n  {%- if true -%}  \n  b  {%- endif -%}\n  c", ""},
		{"variable minus", "a \n {{- 'x' -}} \n b", ""},
		{"variable no lstrip", "a\n   {{ 'x' }}\n", ""},
		{"trailing newline dropped", "a\n", ""},
		{"only one trailing newline dropped", "a\n\n", ""},
		{"crlf", "a\r\nb\r{% if true %}\r\nc{% endif %}", ""},
		{"raw", "{% raw %}{{ x }}{% endraw %}\n{%- raw -%} {% y %} {%- endraw %}.", ""},
		{"comment minus", "a {#- c -#} b", ""},
		{"comment trim", "{# c #}\nb", ""},
		{"lstrip after trim", "{% if true %}\n  {% if true %}\n  x\n  {% endif %}\n{% endif %}", ""},
		{"unicode space minus", "a\u3000{%- if true %}b{% endif %}", ""},
		{"tab lstrip", "\t{% if true %}x{% endif %}", ""},
		{"text before tag on line", "a {% if true %}x{% endif %} b", ""},
	})
}

func TestExpressions(t *testing.T) {
	checkAgainstOracle(t, []oracleCase{
		{"literals", `{{ 1 }} {{ 1.0 }} {{ 1e3 }} {{ 1_000 }} {{ 0x1f }} {{ 'a' "b" }} {{ none }} {{ True }} {{ [1, 'a', none] }} {{ {'a': (1,), 2: []} }}`, ""},
		{"floats", `{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 2.5e-7 }} {{ f }} {{ big }}`, commonVars},
		{"arith", `{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 4 / 2 }} {{ -2 ** 2 }} {{ 1 + 2.0 }} {{ true + 1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}`, ""},
		{"string ops", `{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 1 ~ none ~ 'x' ~ 1.0 ~ [1] }} {{ [1] + [2] }} {{ (1,) + (2,) }}`, ""},
		{"compare", `{{ 1 == 1.0 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ none == none }} {{ 1 != '1' }} {{ true == 1 }}`, ""},
		{"in", `{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'b' in d }} {{ 'z' not in d }} {{ 1 in (1,) }} {{ x in y }}`, commonVars},
		{"logic", `{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not [] }} {{ none or none }} {{ '' and 1 }} {{ not 0 == 1 }}`, ""},
		{"condexpr", `{{ 'y' if t else 'n' }} {{ 'y' if n else 'n' }} [{{ 'y' if n }}] {{ 1 if false else 2 if false else 3 }}`, commonVars},
		{"attr item", `{{ d.b }} {{ d['a'][1] }} {{ d.a.0 }} {{ d["items"] }} {{ msg.content }} [{{ d.zz }}] [{{ n.x }}] {{ users[1].name }}`, commonVars},
		{"slices", `{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ s[2:7] }} {{ u[::-1] }} {{ xs[::2] }} {{ xs[5:] }} {{ xs[-10:10] }} {{ 'abc'[-1] }} [{{ xs[10] }}] {{ u[4] }}`, commonVars},
		{"repr", `{{ q }} {{ [q] }} {{ ['it\'s'] }} {{ ["a\"b'c"] }} {{ [u] }} {{ ['\x00\x7f\u200b'] }} {{ (1, 'a') }} {{ {'k': none, 'l': [true, 1.5]} }}`, commonVars},
		{"string escapes", `{{ 'a\nb\tc\\d\'e\x41\u00e9\N' }}`, ""},
		{"dict literal order", `{{ {'b': 1, 'a': 2, 'b': 3} }}`, ""},
		{"undefined prints empty", `[{{ nope }}] [{{ nope.x is defined }}]`, ""},
		{"undefined attr fails", `{{ nope.x }}`, ""},
		{"undefined arith fails", `{{ nope + 1 }}`, ""},
		{"str plus int fails", `{{ 'a' + 1 }}`, ""},
		{"div zero", `{{ 1 / 0 }}`, ""},
		{"call non callable", `{{ xs() }}`, commonVars},
		{"compare mixed fails", `{{ 1 < 'a' }}`, ""},
		{"percent format", `{{ '%s-%d-%.2f-%r' % ('a', 3, 2.5, 'q') }} {{ '%(a)s' % {'a': 1} }} {{ '%5s|%-5s|' % ('a', 'b') }}`, ""},
		{"str format", `{{ '{} {}'.format(1, 'a') }} {{ '{0}{0}'.format('x') }} {{ '{n:>5}|{f:.2f}'.format(n='a', f=3.14159) }} {{ '{{}}'.format() }}`, ""},
		{"tuple output", `{{ 1, 2 }}`, ""},
		{"unicode names", `{{ u|length }} {{ u|upper }} {{ u[0] }}`, commonVars},
	})
}

func TestStatements(t *testing.T) {
	checkAgainstOracle(t, []oracleCase{
		{"for loop vars", `{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}`, commonVars},
		{"for else", `{% for x in empty %}{{ x }}{% else %}none{% endfor %}`, commonVars},
		{"for filter", `{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}/{{ loop.length }},{% endfor %}`, commonVars},
		{"for dict", `{% for k in d %}{{ k }},{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}`, commonVars},
		{"for string", `{% for c in 'abc' %}{{ c }}.{% endfor %}`, ""},
		{"for none fails", `{% for x in n %}{% endfor %}`, commonVars},
		{"for undefined empty", `{% for x in nope %}x{% else %}e{% endfor %}`, ""},
		{"nested loop", `{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}{% endfor %}`, ""},
		{"loop cycle", `{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}`, commonVars},
		{"break continue", `{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}`, ""},
		{"set scoping", `{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}`, ""},
		{"set in if leaks", `{% if true %}{% set y = 5 %}{% endif %}{{ y }}`, ""},
		{"namespace", `{% set ns = namespace(a=1, b='x') %}{% for i in xs %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }} {{ ns }}`, commonVars},
		{"namespace underscore", `{% set ns = namespace() %}{% set ns._x = 1 %}`, ""},
		{"set tuple", `{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c + d }}`, ""},
		{"set block", `{% set x %}  hi {{ 1 }} {% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}`, ""},
		{"elif", `{% for x in [1, 2, 3] %}{% if x == 1 %}a{% elif x == 2 %}b{% else %}c{% endif %}{% endfor %}`, ""},
		{"macro", `{% macro m(a, b='d', c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 2) }} {{ m(1, c=5) }} {{ m() }}`, ""},
		{"macro varargs kwargs", `{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}`, ""},
		{"macro too many", `{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}`, ""},
		{"macro bad kwarg", `{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}`, ""},
		{"macro sees globals", `{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}`, ""},
		{"macro recursion", `{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}`, ""},
		{"call block", `{% macro w(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call w('b') %}in{% endcall %}`, ""},
		{"call block args", `{% macro w() %}{{ caller(1, 2) }}{% endmacro %}{% call(a, b) w() %}{{ a + b }}{% endcall %}`, ""},
		{"filter block", `{% filter upper %}abc {{ 'd' }}{% endfilter %}`, ""},
		{"with", `{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]`, ""},
		{"raise", `{{ raise_exception('bad ' ~ 1) }}`, ""},
		{"generation", `{% generation %}gen {{ 1 }}{% endgeneration %}`, ""},
		{"print", `{% print 'p' %}`, ""},
		{"unknown tag", `{% foo %}`, ""},
		{"unclosed", `{% if true %}x`, ""},
		{"break outside loop", `{% break %}`, ""},
		{"range limits", `{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}`, ""},
		{"dict global", `{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }}`, ""},
		{"list append unsafe", `{% set l = [] %}{{ l.append(1) }}`, ""},
		{"dict update unsafe", `{% set m = {} %}{{ m.update({'a': 1}) }}`, ""},
		{"joiner", `{% set j = joiner('|') %}{% for x in xs %}{{ j() }}{{ x }}{% endfor %}`, commonVars},
	})
}

func TestFilters(t *testing.T) {
	checkAgainstOracle(t, []oracleCase{
		{"tojson", `{{ d|tojson }} {{ users|tojson }} {{ u|tojson }} {{ q|tojson }} {{ [1.0, 1e16, none, true]|tojson }} {{ {}|tojson }} {{ (1, 2)|tojson }}`, commonVars},
		{"tojson indent", `{{ d|tojson(indent=2) }}|{{ users[0]|tojson(indent=4) }}|{{ []|tojson(indent=2) }}|{{ {'a': {}}|tojson(indent=0) }}`, commonVars},
		{"tojson options", `{{ d|tojson(sort_keys=true) }} {{ u|tojson(ensure_ascii=true) }} {{ d|tojson(separators=(',', ':')) }} {{ {1: 2, none: 3, true: 4, 1.5: 5}|tojson }}`, commonVars},
		{"tojson undefined fails", `{{ nope|tojson }}`, ""},
		{"trim", `[{{ s|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ nope|trim }}] [{{ '\u3000a\n'|trim }}]`, commonVars},
		{"length", `{{ xs|length }} {{ d|count }} {{ u|length }} {{ nope|length }}`, commonVars},
		{"length int fails", `{{ 5|length }}`, ""},
		{"join", `{{ xs|join(', ') }} {{ users|join('/', attribute='name') }} {{ 'abc'|join('-') }} {{ [1, none]|join }}`, commonVars},
		{"case", `{{ 'hELLO wORLD'|upper }} {{ 'HeLLo'|lower }} {{ "hello wORLD it's-a (test)"|title }} {{ 'hELLO wORLD'|capitalize }} {{ 'straße'|upper }}`, ""},
		{"default", `{{ nope|default('d') }} {{ n|default('d') }} {{ ''|default('d', true) }} {{ 0|d('z', boolean=true) }} {{ nope|d }}`, commonVars},
		{"first last", `{{ xs|first }} {{ xs|last }} {{ 'abc'|first }} [{{ empty|first }}] {{ d|first }}`, commonVars},
		{"items", `{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}{{ nope|items|list }}`, commonVars},
		{"list", `{{ 'ab'|list }} {{ d|list }} {{ (1, 2)|list }}`, commonVars},
		{"map", `{{ users|map(attribute='name')|join(',') }} {{ xs|map('string')|list }} {{ users|map(attribute='tags.0', default='-')|list }} {{ ['a', 'B']|map('upper')|list }}`, commonVars},
		{"select reject", `{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ xs|select('>', 1)|list }} {{ xs|select('equalto', 3)|list }}`, commonVars},
		{"selectattr", `{{ users|selectattr('age', '>', 30)|map(attribute='name')|list }} {{ users|rejectattr('tags')|map(attribute='name')|list }} {{ users|selectattr('tags', 'defined')|list|length }}`, commonVars},
		{"string int float", `{{ 1|string }} {{ none|string }} {{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(base=16) }} {{ '1.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ true|int }}`, ""},
		{"abs round", `{{ -3|abs }} {{ neg|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3|round }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(0, 'floor') }} {{ 1234.5|round(-2) }}`, commonVars},
		{"indent", `{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'a\nb'|indent('> ') }}`, ""},
		{"replace", `{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '-') }}`, ""},
		{"safe escape", `{{ '<a>'|safe }} {{ '<a href="x">&\''|e }}`, ""},
		{"unique", `{{ [1, 2, 1, 3]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }}`, ""},
		{"sort", `{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}`, commonVars},
		{"sort mixed fails", `{{ [1, 'a']|sort }}`, ""},
		{"reverse", `{{ xs|reverse|list }} {{ 'abc'|reverse }} {{ u|reverse }}`, commonVars},
		{"batch", `{{ xs|batch(2)|list }} {{ xs|batch(2, 0)|list }}`, commonVars},
		{"wordcount", `{{ 'hello big  world, ok'|wordcount }} {{ u|wordcount }}`, commonVars},
		{"min max sum", `{{ xs|min }} {{ xs|max }} {{ xs|sum }} {{ users|sum(attribute='age') }} {{ ['b', 'A']|max }} {{ users|max(attribute='age') }}`, commonVars},
		{"dictsort", `{{ d|dictsort }} {{ {'b': 2, 'a': 3}|dictsort(by='value') }}`, commonVars},
		{"format filter", `{{ '%s and %s'|format('a', 'b') }} {{ "%05.1f"|format(3.14159) }} {{ "%05s|%-05d|%+d|% d|%x|%5.2s"|format("a", 3, 4, 5, 255, "xyz") }}`, ""},
		{"center truncate", `[{{ 'ab'|center(7) }}] {{ 'hello world foo bar'|truncate(9, leeway=0) }} {{ 'hello world'|truncate(5, true, leeway=0) }}`, ""},
		{"attr", `{{ msg|attr('role') }}`, commonVars},
		{"unknown filter", `{{ 1|nosuch }}`, ""},
	})
}

func TestTestsAndMethods(t *testing.T) {
	checkAgainstOracle(t, []oracleCase{
		{"type tests", `{% for v in [1, 1.5, 'a', none, true, [1], {'a': 1}, (1,)] %}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}{{ v is none }}{{ v is boolean }}{{ v is mapping }}{{ v is sequence }}{{ v is iterable }}|{% endfor %}`, ""},
		{"defined", `{{ nope is defined }} {{ nope is undefined }} {{ n is defined }} {{ d.b is defined }} {{ d.zz is not defined }} {{ nope is iterable }}`, commonVars},
		{"value tests", `{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 2 is in xs }} {{ 'a' is eq 'a' }} {{ 1 is equalto 1.0 }} {{ 3 is gt 2 }} {{ 2 is le 1 }} {{ 'abc' is lower }} {{ 'ABC' is upper }}`, commonVars},
		{"test with tuple arg", `{{ 'a' is in ['a', 'b'] }} {{ 'a' is sameas 'a' }} {{ n is sameas none }}`, commonVars},
		{"unknown test", `{{ 1 is nosuch }}`, ""},
		{"str methods", `{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}`, commonVars},
		{"str methods 2", `{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'a-b'.replace('-', '+') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'ab cd'.title() }} {{ 'aB'.capitalize() }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.count('l') }} {{ 'x'.find('y') }}`, ""},
		{"str methods 3", `{{ '-'.join(['a', 'b']) }} {{ '5'.zfill(3) }} {{ 'ab'.ljust(4, '.') }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'a\nb'.splitlines() }} {{ 'pre_x'.removeprefix('pre_') }} {{ 'a=b=c'.partition('=') }} {{ u.find('☃') }}`, commonVars},
		{"qwen think split", `{% set c = '<think>\nr\n</think>\n\nanswer' %}{{ c.split('</think>')[-1].lstrip('\n') }}|{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}`, ""},
		{"dict methods", `{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('b') }} {{ d.get('zz', 'dflt') }} [{{ d.get('zz') }}] {{ msg.items()|list }}`, commonVars},
		{"list methods", `{{ xs.index(1) }} {{ xs.count(3) }} {{ (1, 2, 1).count(1) }}`, commonVars},
		{"split empty sep fails", `{{ 'a'.split('') }}`, ""},
		{"strftime", `{{ strftime_now('%Y')|length }}`, ""},
		{"sandbox dunder", `[{{ ''.__class__ }}]`, ""},
	})
}
