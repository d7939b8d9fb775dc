package server

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

func fp(v float64) *float64 { return &v }
func ip(v int) *int         { return &v }

// TestSamplingDefaultsResolved: per field, the request's value wins, then
// the flag's, then generation_config.json's, then mlx_lm.server's default;
// the runner gets the resolved values and x_mlxgo records where each came
// from.
func TestSamplingDefaultsResolved(t *testing.T) {
	tk := testTokenizer(t)
	run := &seedRunner{t: tk}
	url, _ := startServer(t, Config{MaxTokens: 50, Model: Model{Tokenizer: tk, Runner: serial(run)},
		Flags:            SamplingDefaults{TopP: fp(0.9), MinP: fp(0.05)},
		GenerationConfig: SamplingDefaults{Temperature: fp(0.6), TopP: fp(0.95), TopK: ip(20), MaxTokens: ip(7), RepetitionPenalty: fp(1.1)}})
	for _, tc := range []struct {
		name, body       string
		temp, topP, minP float64
		topK, maxTokens  int
		rep              float64
		from             map[string]string
	}{
		{"defaults", `{"prompt":"hi"}`, 0.6, 0.9, 0.05, 20, 7, 1.1, map[string]string{
			"temperature": FromGenerationConfig, "top_p": FromFlag, "min_p": FromFlag, "top_k": FromGenerationConfig,
			"max_tokens": FromGenerationConfig, "repetition_penalty": FromGenerationConfig}},
		{"request wins", `{"prompt":"hi","temperature":0,"top_p":0.5,"min_p":0,"top_k":0,"max_tokens":3,"repetition_penalty":0}`, 0, 0.5, 0, 0, 3, 0, map[string]string{
			"temperature": FromRequest, "top_p": FromRequest, "min_p": FromRequest, "top_k": FromRequest,
			"max_tokens": FromRequest, "repetition_penalty": FromRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/completions", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			run.mu.Lock()
			o := run.opts[len(run.opts)-1]
			run.mu.Unlock()
			s := o.Sampler
			if s.Temp != tc.temp || s.TopP != tc.topP || s.MinP != tc.minP || s.TopK != tc.topK || o.MaxTokens != tc.maxTokens || o.Processors.RepetitionPenalty != tc.rep {
				t.Errorf("runner got %+v max_tokens %d repetition %g", s, o.MaxTokens, o.Processors.RepetitionPenalty)
			}
			var r choicesReply
			json.Unmarshal(b, &r)
			if !maps.Equal(r.X.SamplingFrom, tc.from) {
				t.Errorf("sampling_from %v, want %v", r.X.SamplingFrom, tc.from)
			}
		})
	}

	// Nothing given anywhere: mlx_lm.server's defaults (greedy, top_p 1,
	// Config.MaxTokens cut to the context).
	plain := &seedRunner{t: tk}
	url, _ = startServer(t, Config{MaxTokens: 50, Model: Model{Tokenizer: tk, Runner: serial(plain)}})
	if status, _, b := post(t, url+"/v1/completions", `{"prompt":"hi"}`); status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	if o := plain.opts[0]; o.Sampler.Temp != 0 || o.Sampler.TopP != 1 || o.Sampler.TopK != 0 || o.Sampler.MinP != 0 || o.MaxTokens != 50 {
		t.Errorf("defaults %+v max_tokens %d", o.Sampler, o.MaxTokens)
	}
	if _, err := New(Config{MaxTokens: 1, MaxQueue: 1, Model: Model{Tokenizer: tk, Runner: serial(plain)}, Flags: SamplingDefaults{TopP: fp(1.5)}}); err == nil {
		t.Error("a top_p flag of 1.5 was accepted")
	}
}

func TestReadGenerationConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		err              bool
	}{
		{"qwen3", `{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "eos_token_id": [1, 2]}`, "temperature=0.6 top_p=0.95 top_k=20", false},
		{"no do_sample", `{"temperature": 0.7, "min_p": 0.1, "max_new_tokens": 64}`, "temperature=0.7 min_p=0.1 max_tokens=64", false},
		{"do_sample false is greedy", `{"do_sample": false, "temperature": 0.6, "top_p": 0.9, "repetition_penalty": 1.05}`, "repetition_penalty=1.05", false},
		{"repetition_penalty 1 is off", `{"repetition_penalty": 1.0}`, "", false},
		{"eos only", `{"bos_token_id": 1, "eos_token_id": 2}`, "", false},
		{"out of range", `{"top_p": 1.5}`, "", true},
		{"not json", `{`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := ReadGenerationConfig(dir)
			if (err != nil) != tc.err || d.String() != tc.want {
				t.Errorf("defaults %q err %v, want %q (error %v)", d.String(), err, tc.want, tc.err)
			}
		})
	}
	for _, path := range []string{t.TempDir(), filepath.Join(t.TempDir(), "model.gguf")} {
		if d, err := ReadGenerationConfig(path); err != nil || d.String() != "" {
			t.Errorf("%s: %q %v, want no defaults", path, d.String(), err)
		}
	}
}
