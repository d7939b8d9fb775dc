package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInferToolFormat(t *testing.T) {
	cases := []struct{ name, template, want string }{
		{"qwen3 json tools", `<tool_call>\n{"name": "{{ tool_call.name }}"}`, "json_tools"},
		{"qwen3 coder", "{{- '<tool_call>\\n<function=' + tool_call.name }}", "qwen3_coder"},
		{"qwen3 coder literal newline", "<tool_call>\n<function=x>", "qwen3_coder"},
		{"mistral", "[TOOL_CALLS]{{ tools }}", "mistral"},
		{"minimax before json", "<minimax:tool_call><tool_call>tool_call.name", "minimax_m2"},
		{"tool_call without tool_call.name", "<tool_call>", ""},
		{"no tools", "{{ messages }}", ""},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := inferToolFormat(tc.template, nil)
			got := ""
			if f != nil {
				got = f.name
			}
			if got != tc.want {
				t.Errorf("format %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseGemma4 holds mlx-lm 0.32.2's tool_parsers/gemma4.py results for
// the same texts (its arguments dumped compactly): "" where it raises.
func TestParseGemma4(t *testing.T) {
	q := gemma4Quote
	cases := []struct {
		name, text string
		want       []string
	}{
		{"strings", "call:get_weather{location:" + q + "Paris, France" + q + ",unit:" + q + "celsius" + q + "}",
			[]string{`get_weather {"location":"Paris, France","unit":"celsius"}`}},
		{"scalars", "call:add{a:1,b:2.5,c:true,d:null}", []string{`add {"a":1,"b":2.5,"c":true,"d":null}`}},
		{"braces and colons in a string", "call:f{q:" + q + "a {b} c, d:e" + q + "}", []string{`f {"q":"a {b} c, d:e"}`}},
		{"nested", "call:f{nested:{x:[1,2,{y:" + q + "z" + q + "}]},n:-3}", []string{`f {"nested":{"x":[1,2,{"y":"z"}]},"n":-3}`}},
		{"no arguments", "call:f{}", []string{`f {}`}},
		{"two calls", "call:one{a:1}call:two-x{b:" + q + `é "q"` + q + "}", []string{`one {"a":1}`, `two-x {"b":"é \"q\""}`}},
		{"around text", "text call:f{s:" + q + "multi\nline" + q + "} tail", []string{`f {"s":"multi\nline"}`}},
		{"empty string", "call:f{x:" + q + q + "}", []string{`f {"x":""}`}},
		{"unterminated string", "call:f{a:" + q + "unterminated}", nil},
		{"unbalanced", "call:f{a:1", nil},
		{"no call", "no call here", nil},
		{"no name", "call:{a:1}", nil},
		{"spaced keys are not JSON", "call:f{a: 1, b :2}", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := parseGemma4(tc.text, nil)
			var got []string
			if err == nil {
				for _, c := range calls {
					if !json.Valid([]byte(c.Arguments)) {
						t.Fatalf("arguments are not JSON: %s", c.Arguments)
					}
					got = append(got, c.Name+" "+c.Arguments)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || (err == nil) != (tc.want != nil) {
				t.Errorf("parseGemma4(%q) = %q (err %v), want %q", tc.text, got, err, tc.want)
			}
		})
	}
}

func TestParseQwen3Coder(t *testing.T) {
	tools := []toolDef{}
	if err := json.Unmarshal([]byte(`[{"type":"function","function":{"name":"f","parameters":{"properties":{
		"n":{"type":"integer"},"x":{"type":"number"},"b":{"type":"boolean"},"s":{"type":"string"},"o":{"type":"object"},"u":{}}}}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, text, want string }{
		{"typed", "\n<function=f>\n<parameter=s>\n12\n</parameter>\n<parameter=n>\n12\n</parameter>\n<parameter=x>\n1.5\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n<parameter=o>\n{\"k\": [1, 2]}\n</parameter>\n</function>\n",
			`f {"s":"12","n":12,"x":1.5,"b":true,"o":{"k":[1,2]}}`},
		{"untyped and unknown", "<function=f><parameter=u>[1]</parameter><parameter=zz>7</parameter><parameter=n>null</parameter></function>", `f {"u":[1],"zz":"7","n":null}`},
		{"bad integer stays text", "<function=f><parameter=n>1.5</parameter></function>", `f {"n":"1.5"}`},
		{"multi-line string", "<function=g>\n<parameter=code>\na\nb\n</parameter>\n</function>", `g {"code":"a\nb"}`},
		{"no function", "<parameter=a>1</parameter>", ""},
		{"unterminated function", "<function=f><parameter=a>1</parameter>", ""},
		{"empty name", "<function=></function>", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := parseQwen3Coder(tc.text, tools)
			got := ""
			if err == nil {
				got = calls[0].Name + " " + calls[0].Arguments
				if !json.Valid([]byte(calls[0].Arguments)) {
					t.Fatalf("arguments are not JSON: %s", calls[0].Arguments)
				}
			}
			if got != tc.want {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseMistral(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"header", `get_weather[ARGS]{"city": "Paris"}`, `get_weather {"city":"Paris"}`},
		{"two headers", `a[ARGS]{"x": 1} b-2 [ARGS] {}`, `a {"x":1}|b-2 {}`},
		{"json list", ` [{"name": "f", "arguments": {"k": [1]}}, {"name": "g"}] `, `f {"k":[1]}|g {}`},
		{"json list string arguments", `[{"name": "f", "arguments": "{\"k\": 2}"}]`, `f {"k":2}`},
		{"json list that is not calls", `[{"name": "f", "arguments": null}]`, ""},
		{"empty list falls to headers", `[]`, ""},
		{"cut short", `f[ARGS]{"city": "Par`, ""},
		{"no header", `just text`, ""},
		{"arguments not an object", `f[ARGS][1, 2]`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := parseMistral(tc.text, nil)
			var got []string
			for _, c := range calls {
				got = append(got, c.Name+" "+c.Arguments)
			}
			if strings.Join(got, "|") != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

func TestDecodeToolRequest(t *testing.T) {
	def := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	cases := []struct {
		name, tools, choice string
		nTools              int
		none                bool
		errParam            string
	}{
		{"none given", "", "", 0, false, ""},
		{"auto", def, `"auto"`, 1, false, ""},
		{"none hides tools", def, `"none"`, 0, true, ""},
		{"empty list", `[]`, "", 0, false, ""},
		{"required", def, `"required"`, 1, false, ""},
		{"named", def, `{"type":"function","function":{"name":"get_weather"}}`, 1, false, ""},
		{"named, not a tool", def, `{"type":"function","function":{"name":"nope"}}`, 0, false, "tool_choice"},
		{"required without tools", "", `"required"`, 0, false, "tool_choice"},
		{"required, empty list", `[]`, `"required"`, 0, false, "tool_choice"},
		{"named without a name", def, `{"type":"function","function":{}}`, 0, false, "tool_choice"},
		{"bogus choice", def, `"sometimes"`, 0, false, "tool_choice"},
		{"choice wrong type", def, `7`, 0, false, "tool_choice"},
		{"tools not a list", `{"type":"function"}`, "", 0, false, "tools"},
		{"tool not an object", `[1]`, "", 0, false, "tools[0]"},
		{"no function", `[{"type":"function"}]`, "", 0, false, "tools[0].function.name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := decodeToolRequest(json.RawMessage(tc.tools), json.RawMessage(tc.choice))
			if tc.errParam != "" {
				if err == nil || statusOf(err).param != tc.errParam || statusOf(err).status != 400 {
					t.Fatalf("error %v, want a 400 naming %s", err, tc.errParam)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.tools) != tc.nTools || tr.none != tc.none {
				t.Errorf("%d tools, none %v; want %d, %v", len(tr.tools), tr.none, tc.nTools, tc.none)
			}
		})
	}
}

// Arguments arrive as a JSON string (OpenAI's shape) and reach the template
// as the object they hold, every other byte kept.
func TestEncodeToolCallsArguments(t *testing.T) {
	cases := []struct{ name, in, want, errParam string }{
		{"string to object", `[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": [2]}"}}]`,
			`[{"id":"c1","type":"function","function":{"name":"f","arguments":{"b": 1, "a": [2]}}}]`, ""},
		{"object kept", `[{"function":{"arguments":{"z":1},"name":"f"}}]`, `[{"function":{"arguments":{"z":1},"name":"f"}}]`, ""},
		{"empty string kept", `[{"function":{"name":"f","arguments":""}}]`, `[{"function":{"name":"f","arguments":""}}]`, ""},
		{"not json", `[{"function":{"name":"f","arguments":"{oops"}}]`, "", "m.tool_calls[0].function.arguments"},
		{"no function", `[{"id":"x"}]`, "", "m.tool_calls[0].function"},
		{"not a list", `{"id":"x"}`, "", "m.tool_calls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodeToolCalls(json.RawMessage(tc.in), "m.tool_calls")
			if tc.errParam != "" {
				if err == nil || statusOf(err).param != tc.errParam {
					t.Fatalf("error %v, want one naming %s", err, tc.errParam)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}

// FuzzToolParsers: no text panics a parser, and a call that parses has a
// name and arguments that are one JSON object.
func FuzzToolParsers(f *testing.F) {
	for _, s := range []string{
		`{"name": "f", "arguments": {"a": 1}}`,
		`[{"name":"a"},{"name":"b","arguments":"{\"x\":1}","id":"i"}]`,
		"<function=f>\n<parameter=n>\n3\n</parameter>\n</function>",
		`{"name": "f", "arguments": "[1]"}`, `[]`, `{"name":""}`, "<function=<parameter=>",
		`a[ARGS]{"x": 1}b [ARGS] {}`, `[{"name":"f","arguments":null}]`, "x[ARGS]", "é-é[ARGS]{}",
		`call:f{a:<|"|>x<|"|>,b:{c:1}}`, `call:f{a:<|"|>}`, "call:é{é:1}",
	} {
		f.Add(s)
	}
	var tools []toolDef
	json.Unmarshal([]byte(`[{"type":"function","function":{"name":"f","parameters":{"properties":{"n":{"type":"integer"},"b":{"type":"bool"},"o":{"type":"dict"}}}}}]`), &tools)
	f.Fuzz(func(t *testing.T, text string) {
		for _, parse := range []func(string, []toolDef) ([]toolCall, error){parseJSONTools, parseQwen3Coder, parseMistral, parseGemma4} {
			calls, err := parse(text, tools)
			if err != nil {
				continue
			}
			for _, c := range calls {
				var obj map[string]json.RawMessage
				if c.Name == "" || json.Unmarshal([]byte(c.Arguments), &obj) != nil || !strings.HasPrefix(c.Arguments, "{") {
					t.Fatalf("text %q parsed to a bad call %+v", text, c)
				}
			}
		}
	})
}
