package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/tok"
)

// TestToolCallGrammar compiles tool_choice grammars on Qwen3's vocabulary
// and follows each with the most preferred allowed token until the grammar
// ends: the text must parse, with the json_tools parser serve uses, into a
// call of an allowed function whose arguments meet its schema.
func TestToolCallGrammar(t *testing.T) {
	mlxtest.Need(t)
	path := testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json")
	tk, err := tok.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := tk.TokenToID("<|im_end|>")
	const vocab = 151936
	grammars := gen.NewGrammars(tk, vocab, []int32{end})
	params := map[string]json.RawMessage{
		"get_weather": json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`),
		"get_time":    json.RawMessage(`{"type":"object","properties":{"tz":{"enum":["UTC","CET"]}},"required":["tz"]}`),
	}
	f := toolFormats["json_tools"]
	text := make([]string, tk.VocabSize())
	for id := range text {
		text[id] = tk.Decode([]int32{int32(id)}, false)
	}
	for _, only := range []string{"", "get_weather", "get_time"} {
		c, err := toolCallGrammar(&f, params, only)
		if err != nil {
			t.Fatal(err)
		}
		gr, err := grammars.Compile(c.kind, c.source)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.what, err, c.source)
		}
		p, err := gr.Processor()
		if err != nil {
			t.Fatal(err)
		}
		out := followGrammar(t, p, text, end)
		p.Close()
		t.Logf("%s: %q", c.what, out)
		inner, ok := strings.CutPrefix(out, "<tool_call>")
		inner, ok2 := strings.CutSuffix(inner, "</tool_call>")
		if !ok || !ok2 {
			t.Fatalf("%s: %q is not one tool call", c.what, out)
		}
		calls, err := parseJSONTools(inner, nil)
		if err != nil || len(calls) != 1 {
			t.Fatalf("%s: %q: %v %v", c.what, out, calls, err)
		}
		if only != "" && calls[0].Name != only {
			t.Fatalf("%s: called %s", c.what, calls[0].Name)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil {
			t.Fatalf("%s: arguments %q: %v", c.what, calls[0].Arguments, err)
		}
		switch calls[0].Name {
		case "get_weather":
			city, _ := args["city"].(string)
			days, _ := args["days"].(float64)
			if len(city) > 12 || days < 1 || days > 7 || len(args) != 2 {
				t.Fatalf("%s: arguments %v break the schema", c.what, args)
			}
		case "get_time":
			if tz := args["tz"]; tz != "UTC" && tz != "CET" {
				t.Fatalf("%s: tz %v", c.what, tz)
			}
		default:
			t.Fatalf("%s: unknown function %q", c.what, calls[0].Name)
		}
	}
	if _, err := toolCallGrammar(&f, params, "nope"); err == nil {
		t.Fatal("a function not among the tools was accepted")
	}
	mistral := toolFormats["mistral"]
	if _, err := toolCallGrammar(&mistral, params, ""); err == nil || !strings.Contains(err.Error(), "mistral") {
		t.Fatalf("mistral format: %v", err)
	}
}

// followGrammar takes, each step, the allowed token that closes the most
// (the call's markers first, a think block last; then the shortest, then
// the lowest id) until only the end token is left.
func followGrammar(t *testing.T, p *gen.GrammarProcessor, text []string, end int32) string {
	t.Helper()
	var out strings.Builder
	mlxtest.Do(t, func() error {
		history := mlx.FromSlice([]int32{0})
		for step := 0; step < 200; step++ {
			logits := mlx.Zeros(mlx.Float32, 1, 151936)
			masked := p.Process(history, logits)
			if err := mlx.Eval(masked); err != nil {
				return err
			}
			vals, _ := masked.Float32s()
			if vals[end] == 0 && p.Done() {
				return nil
			}
			best := -1
			score := func(s string) int {
				switch s {
				case "<tool_call>", "</tool_call>":
					return -2
				case "<think>":
					return 1 << 20
				}
				if k := strings.Index(`"}]`, s); len(s) == 1 && k >= 0 {
					return k
				}
				return 10 + len(s)
			}
			for id, v := range vals[:len(text)] {
				if v == 0 && (best < 0 || score(text[id]) < score(text[best])) {
					best = id
				}
			}
			if best < 0 {
				return nil
			}
			out.WriteString(text[best])
			history = mlx.FromSlice([]int32{int32(best)})
		}
		return nil
	})
	return out.String()
}
