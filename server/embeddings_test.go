package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/embed"
)

func TestDecodeEmbeddings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		inputs []embed.Input
		base64 bool
		dims   int
		param  string // the field a 400 must name; "" when the body is valid
	}{
		{name: "string", body: `{"input":"a cat","model":"m"}`, inputs: []embed.Input{{Text: "a cat"}}},
		{name: "strings base64", body: `{"input":["a","b"],"encoding_format":"base64"}`, inputs: []embed.Input{{Text: "a"}, {Text: "b"}}, base64: true},
		{name: "token ids", body: `{"input":[101, 7592, 102]}`, inputs: []embed.Input{{IDs: []int32{101, 7592, 102}}}},
		{name: "token id lists", body: `{"input":[[1,2],[3]],"dimensions":32}`, inputs: []embed.Input{{IDs: []int32{1, 2}}, {IDs: []int32{3}}}, dims: 32},
		{name: "user and unknown fields ignored", body: `{"input":"x","user":{"id":1},"extra":true}`, inputs: []embed.Input{{Text: "x"}}},
		{name: "float format", body: `{"input":"x","encoding_format":"float"}`, inputs: []embed.Input{{Text: "x"}}},
		{name: "missing input", body: `{"model":"m"}`, param: "input"},
		{name: "null input", body: `{"input":null}`, param: "input"},
		{name: "empty string", body: `{"input":""}`, param: "input"},
		{name: "empty list", body: `{"input":[]}`, param: "input"},
		{name: "empty string item", body: `{"input":["a",""]}`, param: "input[1]"},
		{name: "mixed list", body: `{"input":["a",3]}`, param: "input[1]"},
		{name: "mixed ids", body: `{"input":[1,"a"]}`, param: "input"},
		{name: "empty id list", body: `{"input":[[1],[]]}`, param: "input[1]"},
		{name: "nested mixed", body: `{"input":[[1],2]}`, param: "input[1]"},
		{name: "negative id", body: `{"input":[1,-2]}`, param: "input"},
		{name: "fractional id", body: `{"input":[1.5]}`, param: "input"},
		{name: "id over int32", body: `{"input":[4294967296]}`, param: "input"},
		{name: "number input", body: `{"input":7}`, param: "input"},
		{name: "object input", body: `{"input":{"text":"a"}}`, param: "input"},
		{name: "bad format", body: `{"input":"a","encoding_format":"int8"}`, param: "encoding_format"},
		{name: "format wrong type", body: `{"input":"a","encoding_format":1}`, param: "encoding_format"},
		{name: "zero dimensions", body: `{"input":"a","dimensions":0}`, param: "dimensions"},
		{name: "dimensions wrong type", body: `{"input":"a","dimensions":"64"}`, param: "dimensions"},
		{name: "not an object", body: `["a"]`, param: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeEmbeddings([]byte(tc.body))
			if tc.param != "" || tc.inputs == nil {
				if err == nil {
					t.Fatalf("decoded %+v, want a 400", req)
				}
				ae := statusOf(err)
				if ae.status != 400 || ae.param != tc.param {
					t.Fatalf("error %d param %q (%v), want 400 naming %q", ae.status, ae.param, err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(req.inputs) != fmt.Sprint(tc.inputs) || req.base64 != tc.base64 || req.dimensions != tc.dims {
				t.Fatalf("decoded %+v, want inputs %v base64 %v dimensions %d", req, tc.inputs, tc.base64, tc.dims)
			}
		})
	}
}

// FuzzDecodeEmbeddings: any body either decodes to a usable request (at
// least one input, each a non-empty text or a non-empty list of
// non-negative ids) or is a 4xx, never a panic or a 5xx.
func FuzzDecodeEmbeddings(f *testing.F) {
	for _, s := range []string{`{"input":"a"}`, `{"input":["a","b"],"encoding_format":"base64"}`, `{"input":[1,2]}`,
		`{"input":[[1],[2,3]],"dimensions":8}`, `{"input":[]}`, `{"input":[[]]}`, `{"input":[1e3]}`, `{"input":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeEmbeddings(body)
		if err != nil {
			if st := statusOf(err).status; st < 400 || st >= 500 {
				t.Fatalf("status %d for %q: %v", st, body, err)
			}
			return
		}
		if len(req.inputs) == 0 || len(req.inputs) > maxEmbeddingInputs || req.dimensions < 0 {
			t.Fatalf("accepted %q as %+v", body, req)
		}
		for i, in := range req.inputs {
			if in.Text == "" && len(in.IDs) == 0 {
				t.Fatalf("input %d of %q is empty", i, body)
			}
			for _, id := range in.IDs {
				if id < 0 {
					t.Fatalf("input %d of %q has id %d", i, body, id)
				}
			}
		}
	})
}

func TestShortenAndBase64(t *testing.T) {
	v := []float32{3, 4, 12, -84}
	for _, tc := range []struct {
		dims int
		want []float32
	}{
		{1, []float32{1}},
		{2, []float32{0.6, 0.8}},
		{3, []float32{3.0 / 13, 4.0 / 13, 12.0 / 13}},
	} {
		t.Run(fmt.Sprint(tc.dims), func(t *testing.T) {
			got := shorten(v, tc.dims)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("shorten(%v, %d) = %v, want %v", v, tc.dims, got, tc.want)
			}
			if back, err := decodeBase64Floats(base64Floats(got)); err != nil || fmt.Sprint(back) != fmt.Sprint(got) {
				t.Fatalf("base64 round trip gave %v (%v), want %v", back, err, got)
			}
		})
	}
}

// decodeBase64Floats is what OpenAI's clients do with a base64 embedding.
func decodeBase64Floats(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return nil, fmt.Errorf("bad base64 embedding %q: %v", s, err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

var (
	minilmOnce sync.Once
	minilm     *embed.Model
	minilmDir  string
	minilmErr  error
)

// miniLM loads all-MiniLM-L6-v2 from `make data` once for the package.
func miniLM(t *testing.T) (*embed.Model, string) {
	t.Helper()
	dir := testenv.DataFile(t, "all-minilm-l6-v2/modules.json")
	mlxtest.Need(t)
	minilmOnce.Do(func() {
		minilmDir = filepath.Dir(dir)
		minilm, minilmErr = embed.Load(minilmDir)
	})
	if minilmErr != nil {
		t.Fatalf("cannot load all-MiniLM-L6-v2: %v", minilmErr)
	}
	return minilm, minilmDir
}

// direct is what `mlxgo embed` computes for texts (models/embed, defaults).
func direct(t *testing.T, m *embed.Model, inputs []embed.Input) [][]float32 {
	t.Helper()
	res, err := m.Embed(context.Background(), inputs, embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Embeddings
}

type embeddingsReply struct {
	Object string
	Model  string
	Data   []struct {
		Object    string
		Index     int
		Embedding json.RawMessage
	}
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}
	XMLXGO map[string]any `json:"x_mlxgo"`
}

// vectors reads each item's embedding, float list or base64.
func (r embeddingsReply) vectors() ([][]float32, error) {
	out := make([][]float32, len(r.Data))
	for i, d := range r.Data {
		if d.Index != i || d.Object != "embedding" {
			return nil, fmt.Errorf("data[%d] is index %d object %q", i, d.Index, d.Object)
		}
		var s string
		err := json.Unmarshal(d.Embedding, &out[i])
		if json.Unmarshal(d.Embedding, &s) == nil {
			out[i], err = decodeBase64Floats(s)
		}
		if err != nil {
			return nil, fmt.Errorf("data[%d].embedding: %v", i, err)
		}
	}
	return out, nil
}

func (r embeddingsReply) mustVectors(t *testing.T) [][]float32 {
	t.Helper()
	v, err := r.vectors()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameBits(a, b [][]float32) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d vectors, want %d", len(a), len(b))
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return fmt.Errorf("vector %d has %d values, want %d", i, len(a[i]), len(b[i]))
		}
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return fmt.Errorf("vector %d value %d: %v, want %v", i, j, a[i][j], b[i][j])
			}
		}
	}
	return nil
}

// TestEmbeddingsEndpoint runs a real server on loopback with a chat model
// stand-in and all-MiniLM-L6-v2 beside it: vectors are bit-identical to
// models/embed's (what `mlxgo embed` prints), in float and base64, for text
// and token-id inputs, and bad requests are 400s naming the field.
func TestEmbeddingsEndpoint(t *testing.T) {
	m, dir := miniLM(t)
	url, _ := startServer(t, Config{Embeddings: NewEmbeddings(m, dir, "all-minilm-l6-v2", "test")})
	texts := []string{"A cat sits on the mat.", "Ein Hund läuft durch den Park, schnell und fröhlich.", "短い文。", "ok"}
	inputs := make([]embed.Input, len(texts))
	var idLists [][]int32
	tokens := 0
	for i, s := range texts {
		inputs[i] = embed.Input{Text: s}
		ids, err := m.Tokenize(i, inputs[i], embed.Options{})
		if err != nil {
			t.Fatal(err)
		}
		idLists, tokens = append(idLists, ids), tokens+len(ids)
	}
	want := direct(t, m, inputs)
	textsJSON, _ := json.Marshal(texts)
	idsJSON, _ := json.Marshal(idLists)
	one, _ := json.Marshal(idLists[1])

	for _, tc := range []struct {
		name, body string
		want       [][]float32
		tokens     int
	}{
		{"strings float", `{"input":` + string(textsJSON) + `,"model":"all-minilm-l6-v2"}`, want, tokens},
		{"strings base64", `{"input":` + string(textsJSON) + `,"encoding_format":"base64"}`, want, tokens},
		{"one string", `{"input":"ok"}`, want[3:], len(idLists[3])},
		{"token id lists", `{"input":` + string(idsJSON) + `}`, want, tokens},
		{"one token id list base64", `{"input":` + string(one) + `,"encoding_format":"base64"}`, want[1:2], len(idLists[1])},
		{"full dimensions", `{"input":"ok","dimensions":384}`, want[3:], len(idLists[3])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/embeddings", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			var r embeddingsReply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if err := sameBits(r.mustVectors(t), tc.want); err != nil {
				t.Fatalf("vectors differ from models/embed's: %v", err)
			}
			if r.Object != "list" || r.Model != "all-minilm-l6-v2" || r.Usage.PromptTokens != tc.tokens || r.Usage.TotalTokens != tc.tokens {
				t.Fatalf("object %q model %q usage %+v, want list, all-minilm-l6-v2, %d tokens", r.Object, r.Model, r.Usage, tc.tokens)
			}
			if fp, _ := r.XMLXGO["artifact_fingerprint"].(string); len(fp) != 64 || r.XMLXGO["pooling"] != "mean" {
				t.Fatalf("x_mlxgo %v: want a sha256 fingerprint and mean pooling", r.XMLXGO)
			}
		})
	}

	long := strings.Repeat("word ", 600)
	for _, tc := range []struct {
		name, body, param string
		status            int
	}{
		{"too long names the input", `{"input":["fine","` + long + `"]}`, "input[1]", 400},
		{"id outside the vocabulary", `{"input":[[101,30522,102]]}`, "input[0]", 400},
		{"dimensions on a model without MRL", `{"input":"a","dimensions":128}`, "dimensions", 400},
		{"empty list", `{"input":[]}`, "input", 400},
		{"malformed JSON", `{"input":`, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/embeddings", tc.body)
			var e errorBody
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("status %d, body %s: %v", status, b, err)
			}
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if status != tc.status || param != tc.param || e.Error.Message == "" {
				t.Fatalf("status %d param %q (%s), want %d naming %q", status, param, e.Error.Message, tc.status, tc.param)
			}
		})
	}
}

// TestEmbeddingsRoutesByModelKind: a chat-only server answers
// /v1/embeddings with 404 naming its model; an embedding-only server serves
// embeddings and answers completions with 404 naming its model.
func TestEmbeddingsRoutesByModelKind(t *testing.T) {
	chatOnly, _ := startServer(t, Config{Model: Model{ID: "chatty"}})
	if status, _, b := post(t, chatOnly+"/v1/embeddings", `{"input":"a"}`); status != 404 || !strings.Contains(string(b), "chatty is not an embedding model") {
		t.Fatalf("chat-only server: %d %s, want 404 naming the model", status, b)
	}
	m, dir := miniLM(t)
	e := NewEmbeddings(m, dir, "minilm", "test")
	url, _ := startServer(t, Config{Model: Model{ID: e.ID, Runner: EmbeddingOnlyRunner{ID: e.ID}}, Embeddings: e})
	if status, _, b := post(t, url+"/v1/embeddings", `{"input":"a"}`); status != 200 {
		t.Fatalf("embeddings on an embedding-only server: %d %s", status, b)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"hi","max_tokens":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`},
	} {
		status, _, b := post(t, url+c.path, c.body)
		if status != 404 || !strings.Contains(string(b), "minilm is an embedding model") {
			t.Fatalf("%s on an embedding-only server: %d %s, want 404 naming the model", c.path, status, b)
		}
	}
}

// TestEmbeddingsMatryoshka: on a Qwen3-Embedding-shaped model (MRL), a
// `dimensions` request gives normalize(full[:d]); more than the model has
// is a 400 naming dimensions.
func TestEmbeddingsMatryoshka(t *testing.T) {
	testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json")
	mlxtest.Need(t)
	py := testenv.Python(t)
	dir := filepath.Join(t.TempDir(), "qwen3-tiny")
	script := filepath.Join(testenv.RepoRoot(), "models", "embed", "testdata", "reference.py")
	if out, err := exec.Command(py, script, "qwen3-model", dir).CombinedOutput(); err != nil {
		t.Fatalf("reference.py qwen3-model: %v\n%s", err, out)
	}
	m, err := embed.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e := NewEmbeddings(m, dir, "qwen3-tiny", "test")
	if !e.Matryoshka {
		t.Fatal("a qwen3 embedding model must allow dimensions")
	}
	url, _ := startServer(t, Config{Embeddings: e})
	full := direct(t, m, []embed.Input{{Text: "A cat sits."}})[0]
	status, _, b := post(t, url+"/v1/embeddings", `{"input":"A cat sits.","dimensions":16}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r embeddingsReply
	json.Unmarshal(b, &r)
	got := r.mustVectors(t)
	if err := sameBits(got, [][]float32{shorten(full, 16)}); err != nil {
		t.Fatalf("dimensions 16: %v", err)
	}
	var ss float64
	for _, x := range got[0] {
		ss += float64(x) * float64(x)
	}
	if math.Abs(ss-1) > 1e-6 {
		t.Fatalf("shortened vector has squared norm %v, want 1", ss)
	}
	if status, _, b := post(t, url+"/v1/embeddings", fmt.Sprintf(`{"input":"a","dimensions":%d}`, m.Dims+1)); status != 400 || !strings.Contains(string(b), `"param":"dimensions"`) {
		t.Fatalf("dimensions over the model's: %d %s", status, b)
	}
}

// TestEmbeddingsOpenAIClient runs server/testdata/openai_embeddings.py, the
// official openai client's embeddings.create, against all-MiniLM-L6-v2: its
// vectors (float and base64) must be models/embed's bits.
func TestEmbeddingsOpenAIClient(t *testing.T) {
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import openai").Run(); err != nil {
		testenv.Missing(t, "the openai package in .venv", "make venv")
	}
	m, dir := miniLM(t)
	url, _ := startServer(t, Config{APIKey: "test-key", Embeddings: NewEmbeddings(m, dir, "all-minilm-l6-v2", "test")})
	texts := []string{"The quick brown fox.", "Une phrase en français.", "ok"}
	inputs := make([]embed.Input, len(texts))
	for i, s := range texts {
		inputs[i] = embed.Input{Text: s}
	}
	want := map[string]any{"texts": texts, "vectors": direct(t, m, inputs)}
	ids, err := m.Tokenize(0, inputs[0], embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want["ids"] = ids
	ref := filepath.Join(t.TempDir(), "want.json")
	b, _ := json.Marshal(want)
	if err := os.WriteFile(ref, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_embeddings.py")
	cmd := exec.Command(py, script, url+"/v1", "test-key", ref)
	cmd.Env = append(os.Environ(), "OPENAI_LOG=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("openai client checks failed: %v", err)
	}
}

// TestEmbeddingsBesideGeneration sends embedding requests while a greedy
// chat completion runs on SmolLM2: both are jobs of the one engine (the
// embeddings run between the batch's steps), so the vectors are still
// models/embed's bits and the completion's text equals the text it gives
// alone. The queue has room for all seven requests: embeddings count
// against --max-queue (TestEmbeddingsQueueBound).
func TestEmbeddingsBesideGeneration(t *testing.T) {
	lm, tk := smollm2(t)
	m, dir := miniLM(t)
	url, _ := startServer(t, Config{MaxQueue: 8, Model: NewMLXModel(lm, tk, "smollm2", "test", 0), Embeddings: NewEmbeddings(m, dir, "all-minilm-l6-v2", "test")})
	chatBody := `{"messages":[{"role":"user","content":"Count to five."}],"max_tokens":8}`
	text := func() string {
		status, b, err := postQuiet(url+"/v1/chat/completions", chatBody)
		if err != nil || status != 200 {
			t.Errorf("chat: %d %s %v", status, b, err)
			return ""
		}
		var r chatReply
		json.Unmarshal(b, &r)
		return r.Choices[0].Message.Content
	}
	alone := text()
	want := direct(t, m, []embed.Input{{Text: "A cat sits on the mat."}, {Text: "ok"}})
	var wg sync.WaitGroup
	var together string
	wg.Add(1)
	go func() { defer wg.Done(); together = text() }()
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, b, err := postQuiet(url+"/v1/embeddings", `{"input":["A cat sits on the mat.","ok"]}`)
			if err != nil || status != 200 {
				errs <- fmt.Errorf("embeddings: %d %s %v", status, b, err)
				return
			}
			var r embeddingsReply
			if err := json.Unmarshal(b, &r); err != nil {
				errs <- err
				return
			}
			got, err := r.vectors()
			if err == nil {
				err = sameBits(got, want)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if alone == "" || together != alone {
		t.Fatalf("greedy text with concurrent embeddings %q, alone %q", together, alone)
	}
}

// postQuiet is post for goroutines other than the test's: it returns errors
// instead of failing the test.
func postQuiet(url, body string) (int, []byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
