package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/gguf"
)

// Parity with transformers' apply_chat_template on the real templates: every
// case in testdata/cases.json rendered by every template must be
// byte-identical, or fail on both sides.

type parityCase struct {
	Name                string          `json:"name"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools,omitempty"`
	AddGenerationPrompt bool            `json:"add_generation_prompt,omitempty"`
	Kwargs              json.RawMessage `json:"kwargs,omitempty"`
}

// oracleTemplate is how oracle.py finds a template.
type oracleTemplate struct {
	Name          string            `json:"name"`
	TokenizerDir  string            `json:"tokenizer_dir,omitempty"`
	Template      string            `json:"template,omitempty"`
	SpecialTokens map[string]string `json:"special_tokens,omitempty"`
}

type loadedTemplate struct {
	oracle oracleTemplate
	source string
	tokens SpecialTokens
}

func loadCases(t *testing.T) []parityCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []parityCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("cannot read cases.json: %v", err)
	}
	return cases
}

// tokenString reads a special token from tokenizer_config.json, where it is
// a string, an AddedToken object, or null.
func tokenString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

func loadTokenizerTemplate(t *testing.T, name string) loadedTemplate {
	t.Helper()
	path := testenv.DataFile(t, filepath.Join("tokenizers", name, "tokenizer_config.json"))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	var src string
	if err := json.Unmarshal(cfg["chat_template"], &src); err != nil {
		t.Fatalf("%s: chat_template is not a string: %v", path, err)
	}
	return loadedTemplate{
		oracle: oracleTemplate{Name: name, TokenizerDir: filepath.Dir(path)},
		source: src,
		tokens: SpecialTokens{BOS: tokenString(cfg["bos_token"]), EOS: tokenString(cfg["eos_token"]),
			PAD: tokenString(cfg["pad_token"]), UNK: tokenString(cfg["unk_token"])},
	}
}

func loadGGUFTemplate(t *testing.T) loadedTemplate {
	t.Helper()
	path := testenv.DataFile(t, filepath.Join("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, ok := f.String("tokenizer.chat_template")
	if !ok {
		t.Fatal("smollm2 gguf has no tokenizer.chat_template")
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	tok := func(key string) string {
		id, ok := f.Int(key)
		if !ok || id < 0 || id >= int64(len(toks)) {
			return ""
		}
		return toks[id]
	}
	st := SpecialTokens{BOS: tok("tokenizer.ggml.bos_token_id"), EOS: tok("tokenizer.ggml.eos_token_id"),
		PAD: tok("tokenizer.ggml.padding_token_id"), UNK: tok("tokenizer.ggml.unknown_token_id")}
	special := map[string]string{}
	for k, v := range map[string]string{"bos_token": st.BOS, "eos_token": st.EOS, "pad_token": st.PAD, "unk_token": st.UNK} {
		if v != "" {
			special[k] = v
		}
	}
	return loadedTemplate{
		oracle: oracleTemplate{Name: "smollm2", Template: src, SpecialTokens: special},
		source: src,
		tokens: st,
	}
}

type oracleResult struct {
	Out   *string `json:"out"`
	Error string  `json:"error"`
}

func runOracle(t *testing.T, tmpls []loadedTemplate, cases []parityCase) map[string][]oracleResult {
	t.Helper()
	py := testenv.Python(t)
	req := struct {
		Templates []oracleTemplate `json:"templates"`
		Cases     []parityCase     `json:"cases"`
	}{Cases: cases}
	for _, tm := range tmpls {
		req.Templates = append(req.Templates, tm.oracle)
	}
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "oracle.py"))
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle failed: %v\n%s", err, stderr.String())
	}
	res := map[string][]oracleResult{}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("cannot read oracle output: %v", err)
	}
	return res
}

func renderCase(tm loadedTemplate, c parityCase) (string, error) {
	tmpl, err := New(tm.source, tm.tokens)
	if err != nil {
		return "", err
	}
	opts := Options{AddGenerationPrompt: c.AddGenerationPrompt}
	if len(c.Tools) > 0 {
		if opts.Tools, err = DecodeTools(c.Tools); err != nil {
			return "", err
		}
	}
	if len(c.Kwargs) > 0 {
		if err := json.Unmarshal(c.Kwargs, &opts.Kwargs); err != nil {
			return "", err
		}
	}
	return tmpl.RenderJSON(c.Messages, opts)
}

func TestParityWithTransformers(t *testing.T) {
	cases := loadCases(t)
	if len(cases) < 20 {
		t.Fatalf("want at least 20 conversations, have %d", len(cases))
	}
	var tmpls []loadedTemplate
	for _, name := range []string{"qwen3", "gemma3", "llama3", "llama3_1"} {
		tmpls = append(tmpls, loadTokenizerTemplate(t, name))
	}
	tmpls = append(tmpls, loadGGUFTemplate(t))
	want := runOracle(t, tmpls, cases)
	for _, tm := range tmpls {
		results := want[tm.oracle.Name]
		if len(results) != len(cases) {
			t.Fatalf("%s: oracle returned %d results for %d cases", tm.oracle.Name, len(results), len(cases))
		}
		rendered := 0
		for i, c := range cases {
			t.Run(tm.oracle.Name+"/"+c.Name, func(t *testing.T) {
				got, err := renderCase(tm, c)
				w := results[i]
				switch {
				case w.Out == nil && err == nil:
					t.Errorf("transformers failed (%s) but Go rendered %q", w.Error, got)
				case w.Out != nil && err != nil:
					t.Errorf("transformers rendered %q but Go failed: %v", *w.Out, err)
				case w.Out != nil && got != *w.Out:
					t.Errorf("render differs:\n got %q\nwant %q", got, *w.Out)
				}
				if w.Out != nil {
					rendered++
				}
			})
		}
		// Guard against a suite that only agrees on errors.
		if rendered < len(cases)/2 {
			t.Errorf("%s: only %d of %d cases rendered without error", tm.oracle.Name, rendered, len(cases))
		}
	}
}
