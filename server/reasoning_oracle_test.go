package server

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

type oracleCase struct {
	Chunks  []string  `json:"chunks"`
	Initial string    `json:"initial"`
	Think   bool      `json:"think"`
	Tools   string    `json:"tools"`
	Defs    []toolDef `json:"defs"`
}

type oracleResult struct {
	Segments  [][2]string `json:"segments"`
	ToolTexts []string    `json:"tool_texts"`
	Calls     [][]struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	} `json:"calls"`
}

// oracleFragments build texts where markers meet, split, nest and break.
var oracleFragments = []string{
	"<think>", "</think>", "<tool_call>", "</tool_call>", "<thi", "nk>", "</tool", "_call>", "<", ">", "\n", "hello ", "é", "日本",
	`{"name": "f", "arguments": {"a": 1, "b": [true, null]}}`, `[{"name": "g", "arguments": {}}]`, `{"name": 3}`, `{"oops`,
	"<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=s>\nx y\n</parameter>\n</function>\n", "<function=", "</parameter>",
	// Whole calls, so that many texts hold one that parses.
	"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Zürich\", \"n\": 2.5}}\n</tool_call>",
	"<tool_call>\n<function=f>\n<parameter=a>\n7\n</parameter>\n<parameter=u>\n{\"k\": 1}\n</parameter>\n</function>\n</tool_call>",
	"<tool_call>[{\"name\": \"a\", \"arguments\": {\"x\": \"<think>\"}}, {\"name\": \"b\", \"arguments\": {}}]</tool_call>",
	// Mistral: no end marker, headers or a JSON list.
	"[TOOL_CALLS]", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", " lookup-2 [ARGS] {\"q\": [1, {}]}", "[ARGS]",
	"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\", \"id\": \"abc123def\"}]",
}

// TestRouterOracle compares the reasoning/tool split and the tool parsers
// with mlx-lm's own (testdata/router_oracle.py) on 400 seeded random texts
// cut into random chunks, plus the table cases' texts.
func TestRouterOracle(t *testing.T) {
	py := testenv.Python(t)
	rng := rand.New(rand.NewSource(5))
	var defs []toolDef
	json.Unmarshal([]byte(`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"type":"integer"},"s":{"type":"string"}}}}}]`), &defs)
	var cases []oracleCase
	for i := 0; i < 400; i++ {
		var sb strings.Builder
		for n := rng.Intn(8) + 1; n > 0; n-- {
			sb.WriteString(oracleFragments[rng.Intn(len(oracleFragments))])
		}
		c := oracleCase{Chunks: runeChunks(sb.String(), rng), Initial: "normal", Think: rng.Intn(4) != 0,
			Tools: []string{"", "json_tools", "qwen3_coder", "mistral"}[rng.Intn(4)], Defs: defs}
		if c.Think && rng.Intn(3) == 0 {
			c.Initial = "reasoning"
		}
		cases = append(cases, c)
	}
	in, _ := json.Marshal(map[string]any{"cases": cases})
	cmd := exec.Command(py, filepath.Join(testenv.RepoRoot(), "server", "testdata", "router_oracle.py"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("router_oracle.py: %v\n%s", err, stderr.String())
	}
	var want []oracleResult
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	compared, byFormat := 0, map[string]int{}
	for i, c := range cases {
		segs, toolTexts := splitLikeServer(c)
		if !reflect.DeepEqual(segs, want[i].Segments) || !reflect.DeepEqual(toolTexts, want[i].ToolTexts) {
			t.Fatalf("case %d %+v:\n mlxgo  %q %q\n mlx-lm %q %q", i, c, segs, toolTexts, want[i].Segments, want[i].ToolTexts)
		}
		if c.Tools == "" {
			continue
		}
		f := toolFormats[c.Tools]
		for k, text := range toolTexts {
			calls, err := f.parse(text, c.Defs)
			w := want[i].Calls[k]
			if w == nil {
				// mlx-lm fails; mlxgo may only be more lenient where
				// documented: absent arguments become {} (mlx-lm raises a
				// KeyError while formatting the call).
				if err == nil && strings.Contains(text, `"arguments"`) {
					t.Errorf("case %d: mlxgo parsed %q that mlx-lm rejects: %+v", i, text, calls)
				}
				continue
			}
			if err != nil || len(calls) != len(w) {
				t.Errorf("case %d: tool text %q: mlxgo %+v (%v), mlx-lm %+v", i, text, calls, err, w)
				continue
			}
			for j := range w {
				var got any
				json.Unmarshal([]byte(calls[j].Arguments), &got)
				if calls[j].Name != w[j].Name || !reflect.DeepEqual(got, w[j].Arguments) {
					t.Errorf("case %d: tool text %q: mlxgo %s %s, mlx-lm %s %v", i, text, calls[j].Name, calls[j].Arguments, w[j].Name, w[j].Arguments)
				}
				compared++
				byFormat[c.Tools]++
			}
		}
	}
	for _, f := range []string{"json_tools", "qwen3_coder", "mistral"} {
		if byFormat[f] < 5 {
			t.Errorf("only %d parsed %s calls compared: the generator should make more", byFormat[f], f)
		}
	}
	t.Logf("%d cases, %d parsed tool calls equal to mlx-lm's %v", len(cases), compared, byFormat)
}

// runeChunks cuts s into random chunks at character boundaries (the
// oracle's text is Python str).
func runeChunks(s string, rng *rand.Rand) []string {
	var out []string
	for len(s) > 0 {
		n := rng.Intn(12) + 1
		i := 0
		for k := 0; k < n && i < len(s); k++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// splitLikeServer runs the splitter as the oracle script collects mlx-lm's
// segments: text by state (consecutive pieces merged) and tool texts.
func splitLikeServer(c oracleCase) ([][2]string, []string) {
	var think *thinkMarkers
	if c.Think {
		think = qwenThink
	}
	var tools *toolFormat
	if c.Tools != "" {
		f := toolFormats[c.Tools]
		tools = &f
	}
	initial := stateNormal
	if c.Initial == "reasoning" {
		initial = stateReasoning
	}
	sp := newSplitter(think, tools, initial)
	var segs []segment
	for _, ch := range c.Chunks {
		segs = append(segs, sp.push(ch)...)
	}
	segs = append(segs, sp.flush())
	merged, toolTexts := [][2]string{}, []string{}
	prev, toolText := initial, ""
	for _, s := range segs {
		if s.state == stateTool {
			toolText += s.text
		} else if prev == stateTool {
			toolTexts = append(toolTexts, toolText)
			toolText = ""
		}
		if s.state != stateTool && s.text != "" {
			if n := len(merged); n > 0 && merged[n-1][0] == s.state.String() {
				merged[n-1][1] += s.text
			} else {
				merged = append(merged, [2]string{s.state.String(), s.text})
			}
		}
		prev = s.state
	}
	if prev == stateTool && toolText != "" {
		toolTexts = append(toolTexts, toolText)
	}
	return merged, toolTexts
}
