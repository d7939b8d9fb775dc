package jinja

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Errors name the template line, limits stop runaway templates, and the
// injected clock drives strftime_now.

func TestErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		parse     bool // a syntax error rather than a render error
	}{
		{"unknown tag", "a\nb\n{% frobnicate %}", 3, true},
		{"unclosed block", "{% if x %}\n\nx", 3, true},
		{"bad expression", "{{ 1 +\n }}", 2, true},
		{"unclosed comment", "\n{# never", 2, true},
		{"undefined attribute", "line1\n{{ nope.attr }}", 2, false},
		{"type error", "\n\n\n{{ 'a' + 1 }}", 4, false},
		{"raise", "{% if true %}\n  {{ raise_exception('boom') }}\n{% endif %}", 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Parse(tc.src)
			if tc.parse {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("want a syntax error, got %v", err)
				}
				if se.Line != tc.line {
					t.Errorf("syntax error on line %d, want %d (%v)", se.Line, tc.line, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = tmpl.Render(nil)
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("want a render error, got %v", err)
			}
			if re.Line != tc.line {
				t.Errorf("render error on line %d, want %d (%v)", re.Line, tc.line, err)
			}
		})
	}
}

func TestRaiseExceptionCarriesMessage(t *testing.T) {
	tmpl, err := Parse(`{{ raise_exception("Conversation roles must alternate") }}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(nil)
	var re *RaiseError
	if !errors.As(err, &re) || re.Msg != "Conversation roles must alternate" {
		t.Fatalf("got %v, want a RaiseError with the message", err)
	}
}

func TestLimits(t *testing.T) {
	tests := []struct{ name, src string }{
		{"infinite recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"},
		{"huge output", "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxx{% endfor %}{% endfor %}"},
		{"string blowup", "{% set s = 'x' * 1000 %}{% for i in range(100000) %}{{ s ~ s ~ s }}{% endfor %}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			tmpl.Limits = Limits{MaxOutput: 1 << 20, MaxSteps: 1_000_000, MaxDepth: 50}
			start := time.Now()
			_, err = tmpl.Render(nil)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("want ErrLimit, got %v", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v to hit the limit", d)
			}
		})
	}
}

func TestStrftimeNow(t *testing.T) {
	tmpl, err := Parse(`{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%Y-%m-%d %H:%M:%S %A %B %j %p %-d %y %%") }}`)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Now = func() time.Time { return time.Date(2026, 3, 5, 14, 7, 9, 0, time.UTC) }
	got, err := tmpl.Render(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "05 Mar 2026|2026-03-05 14:07:09 Thursday March 064 PM 5 26 %"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFloatRepr(t *testing.T) {
	tests := map[float64]string{0.1: "0.1", 1: "1.0", 1e16: "1e+16", 1e15: "1000000000000000.0",
		0.0001: "0.0001", 0.00001: "1e-05", 1.5e-7: "1.5e-07", 123456789.125: "123456789.125", -2.5: "-2.5"}
	for f, want := range tests {
		t.Run(want, func(t *testing.T) {
			if got := floatRepr(f); got != want {
				t.Errorf("floatRepr(%v) = %q, want %q", f, got, want)
			}
		})
	}
	if got := strRepr("it's"); !strings.HasPrefix(got, `"`) {
		t.Errorf("strRepr picks double quotes around a single quote, got %s", got)
	}
}
