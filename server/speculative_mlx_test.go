package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

type specReply struct {
	Choices []struct {
		Message struct{ Content string }
		Text    string
	}
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	}
	XMLXGO Composition `json:"x_mlxgo"`
	Error  struct {
		Code  string
		Param string
	}
}

func postSpec(t *testing.T, url, body string) (int, specReply) {
	t.Helper()
	status, _, b := post(t, url, body)
	var r specReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v: %s", body, err, b)
	}
	return status, r
}

// TestSpeculativeServe: a server with a draft model (SmolLM2 as its own
// draft) decodes speculatively: the greedy text is the plain server's, the
// composition records the draft, its tokens per pass and what was accepted,
// /metrics counts it, a request's num_draft_tokens is honoured, draft_model
// only when it names the draft loaded, and a request under a grammar runs
// without the draft. A server without one refuses to draft.
func TestSpeculativeServe(t *testing.T) {
	m, tk := smollm2(t)
	plainModel := NewMLXModel(m, tk, "smollm2", "test", 64<<20)
	specModel, err := WithDraft(NewMLXModel(m, tk, "smollm2", "test", 64<<20), m, "smollm2-draft", "/models/smollm2.gguf", 3)
	if err != nil {
		t.Fatal(err)
	}
	specModel.Grammars = gen.NewGrammars(tk, specModel.VocabSize, specModel.EOS)
	spec, _ := startServer(t, Config{Model: specModel})
	plain, _ := startServer(t, Config{Model: plainModel})

	const ask = `{"messages":[{"role":"user","content":"What is the capital of France? Answer in one sentence."}],"max_tokens":12`
	_, want := postSpec(t, plain+"/v1/chat/completions", ask+`}`)
	if want.XMLXGO.Speculative != nil {
		t.Fatalf("the plain server reports speculative decoding: %+v", want.XMLXGO.Speculative)
	}
	status, got := postSpec(t, spec+"/v1/chat/completions", ask+`}`)
	if status != 200 || got.Choices[0].Message.Content != want.Choices[0].Message.Content {
		t.Fatalf("speculative: %d %q, want the plain server's %q", status, got.Choices[0].Message.Content, want.Choices[0].Message.Content)
	}
	sp := got.XMLXGO.Speculative
	if sp == nil || sp.DraftModel != "smollm2-draft" || sp.NumDraftTokens != 3 || sp.DraftTokens == 0 ||
		sp.AcceptedTokens != sp.DraftTokens || sp.AcceptanceRate != 1 || sp.TokensPerPass <= 1 || got.XMLXGO.Scheduling != SchedulingSerial {
		t.Fatalf("composition: %+v scheduling %s, want the self draft's full acceptance", sp, got.XMLXGO.Scheduling)
	}

	// num_draft_tokens per request; draft_model by id, by path, or mlx_lm.server's default.
	for _, extra := range []string{`"num_draft_tokens":1`, `"draft_model":"smollm2-draft","num_draft_tokens":1`,
		`"draft_model":"/models/smollm2.gguf","num_draft_tokens":1`, `"draft_model":"default_model","num_draft_tokens":1`} {
		status, r := postSpec(t, spec+"/v1/chat/completions", ask+`,`+extra+`}`)
		if status != 200 || r.XMLXGO.Speculative == nil || r.XMLXGO.Speculative.NumDraftTokens != 1 ||
			r.XMLXGO.Speculative.DraftTokens != r.XMLXGO.Speculative.TargetPasses-1 && r.XMLXGO.Speculative.DraftTokens != r.XMLXGO.Speculative.TargetPasses {
			t.Fatalf("%s: %d %+v", extra, status, r.XMLXGO.Speculative)
		}
		if r.Choices[0].Message.Content != want.Choices[0].Message.Content {
			t.Fatalf("%s: %q, want %q", extra, r.Choices[0].Message.Content, want.Choices[0].Message.Content)
		}
	}
	// Streaming: the same text, the composition in the last chunk.
	resp, err := http.Post(spec+"/v1/chat/completions", "application/json", strings.NewReader(ask+`,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var last Composition
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct{ Delta struct{ Content string } }
			XMLXGO  *Composition `json:"x_mlxgo"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
		if chunk.XMLXGO != nil {
			last = *chunk.XMLXGO
		}
	}
	resp.Body.Close()
	if text.String() != want.Choices[0].Message.Content || last.Speculative == nil || last.Speculative.AcceptedTokens == 0 {
		t.Fatalf("stream: %q %+v, want %q with the speculative record", text.String(), last.Speculative, want.Choices[0].Message.Content)
	}
	// Log-probabilities come from the verify passes' rows: the plain
	// server's, bit for bit (each row of a pass computes as a one-token pass).
	lp := ask + `,"logprobs":true,"top_logprobs":3}`
	_, _, pb := post(t, plain+"/v1/chat/completions", lp)
	_, _, sb := post(t, spec+"/v1/chat/completions", lp)
	logprobsOf := func(b []byte) string {
		var r struct {
			Choices []struct{ Logprobs json.RawMessage }
		}
		if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) == 0 || len(r.Choices[0].Logprobs) < 10 {
			t.Fatalf("no logprobs in %s", b)
		}
		return string(r.Choices[0].Logprobs)
	}
	if a, b := logprobsOf(sb), logprobsOf(pb); a != b {
		t.Fatalf("logprobs differ from the plain server's\nspec  %s\nplain %s", a, b)
	}
	// Under a grammar: the plain runner, no draft.
	status, r := postSpec(t, spec+"/v1/chat/completions", `{"messages":[{"role":"user","content":"A cat as JSON"}],"max_tokens":8,"response_format":{"type":"json_object"}}`)
	if status != 200 || r.XMLXGO.Speculative != nil || !strings.Contains(r.XMLXGO.RequestFeatures, "grammar=json_object") {
		t.Fatalf("json_object: %d %+v %q", status, r.XMLXGO.Speculative, r.XMLXGO.RequestFeatures)
	}
	// Legacy completions decode speculatively too.
	if status, r := postSpec(t, spec+"/v1/completions", `{"prompt":"The capital of France is","max_tokens":4}`); status != 200 || r.XMLXGO.Speculative == nil {
		t.Fatalf("completions: %d %+v", status, r.XMLXGO.Speculative)
	}

	for _, tc := range []struct {
		url, extra, code, param string
		status                  int
	}{
		{spec, `"draft_model":"other"`, "unsupported_parameter", "draft_model", 400},
		{spec, `"num_draft_tokens":-1`, "", "num_draft_tokens", 400},
		{spec, `"num_draft_tokens":"3"`, "", "num_draft_tokens", 400},
		{spec, `"num_draft_tokens":65`, "", "num_draft_tokens", 400},
		{spec, `"draft_model":3`, "", "draft_model", 400},
		{plain, `"draft_model":"smollm2-draft"`, "unsupported_parameter", "draft_model", 400},
		{plain, `"num_draft_tokens":2`, "unsupported_parameter", "num_draft_tokens", 400},
		{plain, `"num_draft_tokens":0,"draft_model":"default_model"`, "", "", 200},
		{plain, `"draft_model":null,"num_draft_tokens":null`, "", "", 200},
	} {
		status, r := postSpec(t, tc.url+"/v1/chat/completions", ask+`,`+tc.extra+`}`)
		if status != tc.status || r.Error.Param != tc.param || (tc.code != "" && r.Error.Code != tc.code) {
			t.Errorf("%s: %d code %q param %q, want %d %q %q", tc.extra, status, r.Error.Code, r.Error.Param, tc.status, tc.code, tc.param)
		}
	}

	// /metrics: the accepted and proposed tokens, the rate, the tokens per pass.
	mresp, err := http.Get(spec + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, name := range []string{"mlxgo_speculative_draft_tokens_total", "mlxgo_speculative_accepted_tokens_total",
		"mlxgo_speculative_target_passes_total", "mlxgo_speculative_acceptance_rate", "mlxgo_speculative_tokens_per_pass"} {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no %s:\n%s", name, body)
		}
		if v, _ := strconv.ParseFloat(string(m[1]), 64); v <= 0 {
			t.Errorf("%s = %s, want > 0", name, m[1])
		}
	}
	if !bytes.Contains(body, []byte("mlxgo_speculative_acceptance_rate 1\n")) {
		t.Errorf("a self draft accepts every token; /metrics says:\n%s", body)
	}
}

// TestWithDraftRefusesBatch: speculative decoding runs one request at a
// time (as mlx_lm.server); a batched model is refused, naming --batch.
func TestWithDraftRefusesBatch(t *testing.T) {
	m, tk := smollm2(t)
	batched, err := WithBatch(NewMLXModel(m, tk, "smollm2", "test", 0), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WithDraft(batched, m, "d", "d", 3); err == nil || !strings.Contains(err.Error(), "--batch 4") {
		t.Fatalf("got %v, want an error naming --batch 4", err)
	}
}

// TestSpeculativeServeAdapters: a request's adapter applies to the target
// of speculative decoding (the draft runs as loaded, as in mlx_lm.server):
// its greedy text is the one the plain server gives with that adapter.
func TestSpeculativeServeAdapters(t *testing.T) {
	_, tk := smollm2(t)
	oracle := filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
	if d := os.Getenv("MLXGO_ORACLE_DIR"); d != "" {
		oracle = d
	}
	const a = "llama-all-last1"
	prompt, _ := loraFixture(t, oracle, "llama-f32+"+a)
	var m, draft models.Model
	if err := mlx.Do(func() (err error) {
		if m, err = models.Load(filepath.Join(oracle, "models", "llama-f32"), models.LoadOptions{Adapters: []models.Adapter{{Name: a, Path: filepath.Join(oracle, "lora", "adapters", a)}}}); err != nil {
			return err
		}
		draft, err = models.Load(filepath.Join(oracle, "models", "llama-q4g64"), models.LoadOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mlx.Do(m.Close); mlx.Do(draft.Close) })
	specModel, err := WithDraft(NewMLXModel(m, tk, "tiny", "test", 0), draft, "q4", "q4", 3)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := startServer(t, Config{Model: specModel})
	plain, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "tiny", "test", 0)})
	ids, _ := json.Marshal(prompt)
	for _, extra := range []string{``, `,"adapters":"` + a + `"`} {
		body := fmt.Sprintf(`{"prompt":%s,"max_tokens":12,"temperature":0%s}`, ids, extra)
		_, want := postSpec(t, plain+"/v1/completions", body)
		status, got := postSpec(t, spec+"/v1/completions", body)
		if status != 200 || got.XMLXGO.Speculative == nil || got.Choices[0].Text != want.Choices[0].Text {
			t.Fatalf("%s: %d %q, want the plain server's %q", extra, status, got.Choices[0].Text, want.Choices[0].Text)
		}
	}
}
