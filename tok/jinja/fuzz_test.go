package jinja

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzTemplate parses and renders arbitrary templates: no panics, errors
// that name a line, and bounded work under tight limits.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content|trim }}\n{% endfor %}",
		"{%- set ns = namespace(x=0) -%}{% for i in range(5) if i is odd %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
		"{{ messages|tojson(indent=2) }}{{ tools[0]['function']['name'] if tools }}",
		"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"{{ 'a' * 100000000 }}",
		"{% raw %}{{ x }}{% endraw %}{# c #}{{- 'x' -}}",
		"{{ '%s %d' % ('a', 1) }}{{ '{0}{x}'.format(1, x=2) }}",
		"{% for a, b in {'k': 1}.items() %}{{ a }}{{ b }}{% else %}none{% endfor %}",
		"{{ x[::-1] }}{{ x[1:2:0] }}{{ 1 // 0 }}",
		"{% if %}",
		"{{ ((((((((((1)))))))))) }}",
	} {
		f.Add(s)
	}
	vars := map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": " hi "}},
		"tools":    []any{map[string]any{"function": map[string]any{"name": "f"}}},
		"x":        "abc",
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line < 1 {
				t.Fatalf("parse error without a line: %v", err)
			}
			return
		}
		tmpl.Limits = Limits{MaxOutput: 1 << 20, MaxSteps: 200_000, MaxDepth: 50}
		tmpl.Now = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
		start := time.Now()
		out, err := tmpl.Render(vars)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("render took %v", d)
		}
		if err == nil && len(out) > 1<<20 {
			t.Fatalf("output of %d bytes exceeds the limit", len(out))
		}
		if err != nil && !strings.Contains(err.Error(), "line ") && !errors.Is(err, ErrLimit) {
			var re *RaiseError
			if !errors.As(err, &re) {
				t.Fatalf("render error without a line: %v", err)
			}
		}
	})
}
