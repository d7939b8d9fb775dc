package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// loraFixture is lora.py's prompt and greedy tokens of one case.
func loraFixture(t *testing.T, oracle, c string) (prompt, tokens []int32) {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(oracle, "lora", c+".safetensors"))
	if err != nil {
		testenv.Missing(t, "the adapter fixtures of lora.py", "make oracle")
	}
	defer f.Close()
	ids := func(name string) []int32 {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("fixture %s has no %s", c, name)
		}
		b := f.Data(ti)
		out := make([]int32, len(b)/4)
		for i := range out {
			out[i] = int32(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
		}
		return out
	}
	return ids("prompt_ids"), ids("tokens")
}

// TestServeAdapters serves the tiny llama with two LoRA adapters (SmolLM2's
// tokenizer covers its 512 ids) at --batch 4 and sends, all at once,
// completions that choose an adapter by the adapters field, by the model
// id "ID:NAME", or none: each must be the text of the same request sent
// alone, an adapter's the text of mlx-lm's greedy tokens with that adapter
// (lora.py), and the prompt cache must not serve one adapter's KV to
// another. /v1/models lists the adapters; unknown or conflicting names are
// refused.
func TestServeAdapters(t *testing.T) {
	_, tk := smollm2(t)
	oracle := filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
	if d := os.Getenv("MLXGO_ORACLE_DIR"); d != "" {
		oracle = d
	}
	adapters := []string{"llama-all-last1", "llama-qvdown-head"}
	var specs []models.Adapter
	want := map[string][]int32{}
	var prompt []int32
	for _, a := range adapters {
		p, toks := loraFixture(t, oracle, "llama-f32+"+a)
		prompt, want[a] = p, toks
		specs = append(specs, models.Adapter{Name: a, Path: filepath.Join(oracle, "lora", "adapters", a)})
	}
	var m models.Model
	if err := mlx.Do(func() (err error) {
		m, err = models.Load(filepath.Join(oracle, "models", "llama-f32"), models.LoadOptions{Adapters: specs})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mlx.Do(m.Close) })
	const steps = 12
	serve := func(batch, cacheBytes int) string {
		sm := NewMLXModel(m, tk, "tiny", "test", cacheBytes)
		if batch > 1 {
			var err error
			if sm, err = WithBatch(sm, batch); err != nil {
				t.Fatal(err)
			}
		}
		url, _ := startServer(t, Config{Model: sm, MaxQueue: 8})
		return url
	}
	batched, solo := serve(4, 0), serve(1, 0)
	ids, _ := json.Marshal(prompt)
	other, _ := json.Marshal([]int32{5, 77, 300, 12, 9, 401, 3})
	type req struct{ name, adapter, body string }
	body := func(extra string, p []byte) string {
		return fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"temperature":0%s}`, p, steps, extra)
	}
	reqs := []req{
		{"field A", adapters[0], body(`,"adapters":"llama-all-last1"`, ids)},
		{"none", "", body(``, ids)},
		{"model B", adapters[1], body(`,"model":"tiny:llama-qvdown-head"`, ids)},
		{"path A, other prompt", adapters[0], body(`,"adapters":`+quote(specs[0].Path), other)},
		{"field B, other prompt", adapters[1], body(`,"adapters":"llama-qvdown-head"`, other)},
		{"none, other prompt", "", body(`,"model":"tiny"`, other)},
	}
	type reply struct {
		Model   string
		Choices []struct{ Text string }
		XMLXGO  Composition `json:"x_mlxgo"`
	}
	complete := func(url, b string) (reply, error) {
		status, _, out := post(t, url+"/v1/completions", b)
		var r reply
		if status != 200 {
			return r, fmt.Errorf("status %d: %s", status, out)
		}
		return r, json.Unmarshal(out, &r)
	}
	alone := map[string]reply{}
	for _, rq := range reqs {
		r, err := complete(solo, rq.body)
		if err != nil {
			t.Fatalf("%s alone: %v", rq.name, err)
		}
		alone[rq.name] = r
	}
	var wg sync.WaitGroup
	together := make([]reply, len(reqs))
	errs := make([]error, len(reqs))
	for i, rq := range reqs {
		wg.Go(func() { together[i], errs[i] = complete(batched, rq.body) })
	}
	wg.Wait()
	texts := map[string]bool{}
	for i, rq := range reqs {
		if errs[i] != nil {
			t.Fatalf("%s batched: %v", rq.name, errs[i])
		}
		got, a := together[i], alone[rq.name]
		if got.Choices[0].Text != a.Choices[0].Text {
			t.Errorf("%s: batched %q, alone %q", rq.name, got.Choices[0].Text, a.Choices[0].Text)
		}
		wantModel, wantFeature := "tiny", ""
		if rq.adapter != "" {
			wantModel, wantFeature = "tiny:"+rq.adapter, "adapter="+rq.adapter
		}
		if got.Model != wantModel || !strings.Contains(got.XMLXGO.RequestFeatures, wantFeature) {
			t.Errorf("%s: model %q, request features %q; want %q and %q", rq.name, got.Model, got.XMLXGO.RequestFeatures, wantModel, wantFeature)
		}
		if i < 3 {
			texts[got.Choices[0].Text] = true
		}
		if i < 3 && rq.adapter != "" {
			if w := tk.Decode(want[rq.adapter][:steps], true); got.Choices[0].Text != w {
				t.Errorf("%s: %q, mlx-lm's greedy tokens with the adapter decode to %q", rq.name, got.Choices[0].Text, w)
			}
		}
	}
	if len(texts) != 3 {
		t.Errorf("the same prompt gave %d distinct texts under two adapters and none, want 3", len(texts))
	}

	// The prompt cache: adapter B after adapter A on the same prompt reuses
	// nothing; the same adapter again reuses the prompt.
	cached := serve(1, 64<<20)
	for i, rq := range []struct {
		adapter    string
		wantCached bool
	}{{"llama-all-last1", false}, {"llama-qvdown-head", false}, {"llama-all-last1", true}, {"", false}} {
		status, _, out := post(t, cached+"/v1/completions", body(`,"adapters":`+quote(rq.adapter), ids))
		var r struct {
			Choices []struct{ Text string }
			Usage   struct {
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if status != 200 || json.Unmarshal(out, &r) != nil {
			t.Fatalf("cached request %d: %d %s", i, status, out)
		}
		if n := r.Usage.PromptTokensDetails.CachedTokens; (n > 0) != rq.wantCached {
			t.Errorf("cached request %d (adapter %q): %d cached tokens, want cached %v", i, rq.adapter, n, rq.wantCached)
		}
		name := map[string]string{"llama-all-last1": "field A", "llama-qvdown-head": "model B", "": "none"}[rq.adapter]
		if r.Choices[0].Text != alone[name].Choices[0].Text {
			t.Errorf("cached request %d (adapter %q): %q, without a prompt cache %q", i, rq.adapter, r.Choices[0].Text, alone[name].Choices[0].Text)
		}
	}

	// /v1/models and the refusals.
	resp, err := http.Get(batched + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	status := resp.StatusCode
	for _, id := range []string{`"tiny"`, `"tiny:llama-all-last1"`, `"tiny:llama-qvdown-head"`} {
		if status != 200 || !strings.Contains(string(out), `"id":`+id) {
			t.Errorf("/v1/models lacks %s: %d %s", id, status, out)
		}
	}
	for _, tc := range []struct {
		body, param string
		status      int
	}{
		{body(`,"adapters":"nope"`, ids), "adapters", 404},
		{body(`,"model":"tiny:nope"`, ids), "model", 404},
		{body(`,"model":"tiny:llama-all-last1","adapters":"llama-qvdown-head"`, ids), "adapters", 400},
		{body(`,"adapters":7`, ids), "adapters", 400},
	} {
		status, _, out = post(t, batched+"/v1/completions", tc.body)
		if status != tc.status || !strings.Contains(string(out), `"param":"`+tc.param+`"`) || (tc.status == 404 && !strings.Contains(string(out), "llama-all-last1")) {
			t.Errorf("%s: %d %s; want %d naming %s (and the loaded adapters)", tc.body, status, out, tc.status, tc.param)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestServeFusedAdapter: with --fuse-adapter every request runs the fused
// model (mlx-lm's fused tokens, lora.py), named or not, and the
// composition says the adapter is fused; /v1/models lists it as fused.
func TestServeFusedAdapter(t *testing.T) {
	_, tk := smollm2(t)
	oracle := filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
	if d := os.Getenv("MLXGO_ORACLE_DIR"); d != "" {
		oracle = d
	}
	prompt, want := loraFixture(t, oracle, "llama-f32+llama-all-last1-fused")
	var m models.Model
	if err := mlx.Do(func() (err error) {
		m, err = models.Load(filepath.Join(oracle, "models", "llama-f32"), models.LoadOptions{FuseAdapter: true,
			Adapters: []models.Adapter{{Name: "a", Path: filepath.Join(oracle, "lora", "adapters", "llama-all-last1")}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mlx.Do(m.Close) })
	url, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "tiny", "test", 0)})
	ids, _ := json.Marshal(prompt)
	for _, extra := range []string{``, `,"model":"tiny:a"`, `,"adapters":"a"`} {
		status, _, out := post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":12,"temperature":0%s}`, ids, extra))
		var r struct {
			Choices []struct{ Text string }
			XMLXGO  Composition `json:"x_mlxgo"`
		}
		if status != 200 || json.Unmarshal(out, &r) != nil {
			t.Fatalf("%s: %d %s", extra, status, out)
		}
		if w := tk.Decode(want[:12], true); r.Choices[0].Text != w || !strings.Contains(r.XMLXGO.RequestFeatures, "adapter=a(fused)") {
			t.Errorf("%s: %q (features %q), want mlx-lm's fused %q and adapter=a(fused)", extra, r.Choices[0].Text, r.XMLXGO.RequestFeatures, w)
		}
	}
	if status, _, out := post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"adapters":"b"}`, ids)); status != 404 {
		t.Errorf("unknown adapter on a fused server: %d %s", status, out)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(out), `"id":"tiny:a"`) || !strings.Contains(string(out), `"fused":true`) {
		t.Errorf("/v1/models: %s", out)
	}
}
