package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/tok/jinja"
)

// Unit tests of what Render does around the engine; parity_test.go holds
// the comparison against transformers.

const echo = `{% for m in messages %}{{ m|tojson }}
{% endfor %}{{ tools|tojson }} {{ add_generation_prompt }} {{ bos_token|default('-') }} {{ extra|default('-') }}`

func TestRenderPreparesMessages(t *testing.T) {
	tests := []struct {
		name     string
		messages []map[string]any
		opts     Options
		want     string
	}{
		{"nulls dropped and key order", []map[string]any{{"tool_calls": nil, "content": nil, "role": "assistant", "name": "x"}},
			Options{}, "{\"role\": \"assistant\", \"name\": \"x\"}\nnull False <s> -"},
		{"reasoning aliased", []map[string]any{{"role": "assistant", "content": "a", "reasoning": "r"}},
			Options{AddGenerationPrompt: true},
			"{\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"a\", \"reasoning\": \"r\", \"reasoning_content\": \"r\"}\nnull True <s> -"},
		{"tools and kwargs", []map[string]any{{"role": "user", "content": "hi"}},
			Options{Tools: []any{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}, Kwargs: map[string]any{"extra": 1, "bos_token": "B"}},
			"{\"role\": \"user\", \"content\": \"hi\"}\n[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}] False B 1"},
	}
	tmpl, err := New(echo, SpecialTokens{BOS: "<s>"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tmpl.Render(tc.messages, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRenderJSONKeepsOrder(t *testing.T) {
	tmpl, err := New(`{{ messages[0].tool_calls[0].function.arguments|tojson }}`, SpecialTokens{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.RenderJSON([]byte(`[{"role":"assistant","tool_calls":[{"function":{"arguments":{"z":1,"a":2.0,"m":[1e2]}}}]}]`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z": 1, "a": 2.0, "m": [100.0]}`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name     string
		template string
		messages []map[string]any
		opts     Options
		check    func(error) bool
	}{
		{"empty conversation", "x", nil, Options{}, func(err error) bool { return errors.Is(err, ErrEmptyConversation) }},
		{"raise_exception", "{{ raise_exception('roles must alternate') }}", []map[string]any{{"role": "user"}}, Options{},
			func(err error) bool {
				var re *jinja.RaiseError
				return errors.As(err, &re) && re.Msg == "roles must alternate"
			}},
		{"reserved kwarg", "x", []map[string]any{{"role": "user"}}, Options{Kwargs: map[string]any{"messages": 1}},
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "messages") }},
		{"tool not an object", "x", []map[string]any{{"role": "user"}}, Options{Tools: []any{"f"}},
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "tool 0") }},
		{"error names line", "a\n{{ messages[0].content.nope() }}", []map[string]any{{"role": "user", "content": "x"}}, Options{},
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "line 2") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := New(tc.template, SpecialTokens{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tmpl.Render(tc.messages, tc.opts)
			if !tc.check(err) {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}

func TestNewSyntaxErrorNamesLine(t *testing.T) {
	_, err := New("{% for m in messages %}\n{{ m.content }\n{% endfor %}", SpecialTokens{})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("want a syntax error naming line 2, got %v", err)
	}
}

func TestStrftimeNowInjectable(t *testing.T) {
	tmpl, err := New(`{{ strftime_now("%d %B %Y") }}`, SpecialTokens{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SetNow(func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.Local) })
	got, err := tmpl.Render([]map[string]any{{"role": "user", "content": "x"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "30 November 2026" {
		t.Errorf("got %q", got)
	}
}

// FuzzRenderJSON feeds arbitrary message JSON through a real-world-shaped
// template: no panics, and any failure is an error value.
func FuzzRenderJSON(f *testing.F) {
	f.Add(`[{"role":"user","content":"hi"}]`)
	f.Add(`[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}]`)
	f.Add(`[{"role":"user","content":[{"type":"text","text":"x"}]}]`)
	f.Add(`[1, "x", null]`)
	tmpl, err := New(`{%- for m in messages %}{% if m.content is string %}{{ m.role ~ ': ' ~ m.content|trim }}{% elif m.content is iterable %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% for c in m.tool_calls|default([]) %}{{ c.function.arguments|tojson }}{% endfor %}
{% endfor %}`, SpecialTokens{})
	if err != nil {
		f.Fatal(err)
	}
	tmpl.SetLimits(jinja.Limits{MaxOutput: 1 << 20, MaxSteps: 100_000})
	f.Fuzz(func(t *testing.T, messages string) {
		out, err := tmpl.RenderJSON([]byte(messages), Options{AddGenerationPrompt: true})
		if err == nil && len(out) > 1<<20 {
			t.Fatalf("output too large: %d", len(out))
		}
	})
}
