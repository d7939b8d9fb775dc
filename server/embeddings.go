package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/embed"
)

// maxEmbeddingInputs is OpenAI's bound on inputs per embeddings request.
const maxEmbeddingInputs = 2048

// Embeddings is the embedding model behind POST /v1/embeddings.
type Embeddings struct {
	ID    string // the name responses carry
	Model *embed.Model
	// Matryoshka says whether the model was trained so that a prefix of
	// its vector is itself an embedding; only then may `dimensions` cut it.
	Matryoshka bool
	// BatchSize is inputs per forward pass (0: mlxgo embed's default, 32).
	BatchSize   int
	Fingerprint func() (string, error)
	// Composition is the fixed part of every embeddings composition.
	Composition Composition
}

// NewEmbeddings describes an embedding model loaded from dir for the server.
// runtime names mlxgo's version.
//
// Matryoshka truncation is allowed for Qwen3-Embedding-style decoder models,
// whose model card documents MRL (any output size from 32 up); BERT-family
// sentence-transformers models such as all-MiniLM-L6-v2 were not trained
// for it, and a cut vector would be a worse embedding that looks valid.
func NewEmbeddings(m *embed.Model, dir, id, runtime string) *Embeddings {
	art := &models.Artifact{Files: embeddingFiles(dir)}
	contract := "L3: cosine >= 0.99999 and max abs diff <= 1e-5 per vector against an independent numpy float32 " +
		"sentence-transformers pipeline (models/embed parity test)"
	if m.Kind != "bert" {
		contract = "L1: hidden states bit-identical to mlx-lm's Model.model on the same libmlx, then pooled and normalized"
		if fastKernels() {
			contract = "L3: " + fastContract + "; hidden states differ from mlx-lm's Model.model's"
		}
	}
	return &Embeddings{
		ID: id, Model: m, Matryoshka: m.Kind == "qwen3",
		Fingerprint: sync.OnceValues(art.Fingerprint),
		Composition: Composition{
			ModelRuntime:     fmt.Sprintf("%s, %s", runtime, mlx.RuntimeDescription()),
			WeightScheme:     fmt.Sprintf("%s embedding model, %d dimensions, up to %d tokens", m.Kind, m.Dims, m.MaxLen),
			KVScheme:         "none (one forward pass, no KV cache)",
			FidelityContract: contract,
		},
	}
}

// embeddingFiles is every file that decides the vectors: config, weights,
// tokenizer and the sentence-transformers modules, sorted.
func embeddingFiles(dir string) []string {
	var files []string
	for _, pat := range []string{"config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json",
		"tokenizer_config.json", "vocab.txt", "modules.json", "sentence_bert_config.json", "*_Pooling/config.json"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat)) // the patterns are valid
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	return files
}

func (s *Server) embeddings() *Embeddings { return s.cfg.Embeddings }

// NotChatModel is the error the completion endpoints give on a server
// whose model is an embedding model. OpenAI answers a model used on the
// wrong endpoint with 404 ("This is not a chat model..."), so clients see
// NotFoundError naming the model rather than a server fault.
func NotChatModel(id string) error {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_supported",
		message: fmt.Sprintf("model %s is an embedding model: it serves only /v1/embeddings", id)}
}

// EmbeddingOnlyRunner is the Runner of a server started with an embedding
// model alone: every completion execution is refused with NotChatModel.
// Embeddings need no row: they are tasks of the same engine.
type EmbeddingOnlyRunner struct{ ID string }

// MaxRows implements Runner: one, the serial mechanism, never used.
func (r EmbeddingOnlyRunner) MaxRows() int { return 1 }

// Add implements Runner: it refuses every completion.
func (r EmbeddingOnlyRunner) Add(context.Context, []int32, gen.Options, *uint64, func(int32) error, func(Result, error)) error {
	return NotChatModel(r.ID)
}

// Step, Rows, Decoding and Abort implement Runner: there are never rows.
func (EmbeddingOnlyRunner) Step() error   { return nil }
func (EmbeddingOnlyRunner) Rows() int     { return 0 }
func (EmbeddingOnlyRunner) Decoding() int { return 0 }
func (EmbeddingOnlyRunner) Abort(error)   {}

// embedTask is one /v1/embeddings request as a job of the engine: one
// forward pass of up to BatchSize inputs per engine iteration, in
// embed.Model.Embed's order (longest first), so the vectors are exactly
// those one Embed call gives.
type embedTask struct {
	m      *embed.Model
	opts   embed.Options
	inputs []embed.Input // token ids
	order  []int         // input indices, longest first
	next   int           // the first index of order not yet embedded
	res    embed.Result  // filled as batches finish
}

func newEmbedTask(m *embed.Model, inputs []embed.Input, opts embed.Options) *embedTask {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 32
	}
	t := &embedTask{m: m, opts: opts, inputs: inputs, order: make([]int, len(inputs)),
		res: embed.Result{Embeddings: make([][]float32, len(inputs))}}
	for i := range t.order {
		t.order[i] = i
	}
	sort.SliceStable(t.order, func(a, b int) bool { return len(inputs[t.order[a]].IDs) > len(inputs[t.order[b]].IDs) })
	return t
}

// step implements task: the next batch of inputs.
func (t *embedTask) step(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	batch := t.order[t.next:min(t.next+t.opts.BatchSize, len(t.order))]
	in := make([]embed.Input, len(batch))
	for j, i := range batch {
		in[j] = t.inputs[i]
	}
	// Embed runs the batch inside mlx.Do; given inputs sorted longest
	// first, its own stable sort keeps them as they are.
	r, err := t.m.Embed(ctx, in, t.opts)
	if err != nil {
		return true, err
	}
	for j, i := range batch {
		t.res.Embeddings[i] = r.Embeddings[j]
	}
	t.res.Tokens += r.Tokens
	t.next += len(batch)
	return t.next == len(t.order), nil
}

// embeddingRequest is a validated /v1/embeddings body.
type embeddingRequest struct {
	inputs     []embed.Input
	base64     bool
	dimensions int // 0: the model's own
}

type embeddingBody struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           json.RawMessage `json:"user"` // ignored, as OpenAI's own servers use it only for abuse tracking
}

// decodeEmbeddings parses and validates a /v1/embeddings body: input is a
// string, a list of strings, a list of token ids or a list of such lists.
func decodeEmbeddings(data []byte) (*embeddingRequest, error) {
	var b embeddingBody
	if err := unmarshalObject(data, &b); err != nil {
		return nil, err
	}
	req := &embeddingRequest{}
	if f := b.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			req.base64 = true
		default:
			return nil, invalidf("encoding_format", "encoding_format must be \"float\" or \"base64\", not %q", *f)
		}
	}
	if d := b.Dimensions; d != nil {
		if *d < 1 {
			return nil, invalidf("dimensions", "dimensions must be at least 1")
		}
		req.dimensions = *d
	}
	var err error
	if req.inputs, err = decodeInput(b.Input); err != nil {
		return nil, err
	}
	return req, nil
}

func decodeInput(raw json.RawMessage) ([]embed.Input, error) {
	t := bytes.TrimSpace(raw)
	if isNull(t) {
		return nil, invalidf("input", "input is required: a string, a list of strings, or token ids")
	}
	if t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, invalidf("input", "input is not a valid JSON string: %v", err)
		}
		if s == "" {
			return nil, invalidf("input", "input must not be an empty string")
		}
		return []embed.Input{{Text: s}}, nil
	}
	var items []json.RawMessage
	if t[0] != '[' || json.Unmarshal(t, &items) != nil {
		return nil, invalidf("input", "input must be a string, a list of strings, a list of token ids or a list of token-id lists")
	}
	switch {
	case len(items) == 0:
		return nil, invalidf("input", "input must not be an empty list")
	case len(items) > maxEmbeddingInputs:
		return nil, invalidf("input", "input has %d items, more than the limit of %d", len(items), maxEmbeddingInputs)
	}
	switch first := bytes.TrimSpace(items[0]); {
	case len(first) > 0 && first[0] == '"':
		out := make([]embed.Input, len(items))
		for i, it := range items {
			if json.Unmarshal(it, &out[i].Text) != nil || bytes.TrimSpace(it)[0] != '"' {
				return nil, invalidf(fmt.Sprintf("input[%d]", i), "input[%d] must be a string like the other items", i)
			}
			if out[i].Text == "" {
				return nil, invalidf(fmt.Sprintf("input[%d]", i), "input[%d] must not be an empty string", i)
			}
		}
		return out, nil
	case len(first) > 0 && first[0] == '[':
		out := make([]embed.Input, len(items))
		for i, it := range items {
			ids, err := decodeTokenIDs(it, fmt.Sprintf("input[%d]", i))
			if err != nil {
				return nil, err
			}
			out[i].IDs = ids
		}
		return out, nil
	default:
		// One list of token ids.
		ids, err := decodeTokenIDs(t, "input")
		if err != nil {
			return nil, err
		}
		return []embed.Input{{IDs: ids}}, nil
	}
}

// decodeTokenIDs reads a non-empty JSON list of integers that fit int32 and
// are not negative; name is the field in errors.
func decodeTokenIDs(raw json.RawMessage, name string) ([]int32, error) {
	t := bytes.TrimSpace(raw)
	var nums []json.RawMessage
	if len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &nums) != nil {
		return nil, invalidf(name, "%s must be a list of token ids", name)
	}
	if len(nums) == 0 {
		return nil, invalidf(name, "%s must not be an empty list", name)
	}
	ids := make([]int32, len(nums))
	for j, n := range nums {
		v, err := strconv.ParseInt(string(bytes.TrimSpace(n)), 10, 32)
		if err != nil || v < 0 {
			return nil, invalidf(name, "%s[%d] must be a token id (a non-negative integer), not %s", name, j, bytes.TrimSpace(n))
		}
		ids[j] = int32(v)
	}
	return ids, nil
}

// embeddingData is one item of the response's data list.
type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32 or a base64 string
}

// embeddingComposition is x_mlxgo for an embeddings request: the
// execution composition plus the request features that shaped the vectors.
type embeddingComposition struct {
	Composition
	Pooling        string `json:"pooling"`
	Normalized     bool   `json:"normalized"`
	Dimensions     int    `json:"dimensions"`
	EncodingFormat string `json:"encoding_format"`
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	e := s.embeddings()
	if e == nil {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_supported",
			message: fmt.Sprintf("model %s is not an embedding model: start mlxgo serve with --embed-model PATH to serve /v1/embeddings", s.cfg.Model.ID)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := decodeEmbeddings(body)
	if err != nil {
		writeError(w, err)
		return
	}
	dims := e.Model.Dims
	if d := req.dimensions; d != 0 && d != dims {
		switch {
		case !e.Matryoshka:
			writeError(w, unsupported("dimensions", fmt.Sprintf("model %s gives %d-dimensional vectors and was not trained for shortening them", e.ID, dims)))
			return
		case d > dims:
			writeError(w, invalidf("dimensions", "dimensions %d is more than the model's %d", d, dims))
			return
		}
		dims = d
	}
	// Tokenize here, off the executor, so every input error is a 400 naming
	// the input before any MLX work starts.
	opts := embed.Options{BatchSize: e.BatchSize}
	inputs := make([]embed.Input, len(req.inputs))
	for i, in := range req.inputs {
		ids, err := e.Model.Tokenize(i, in, opts)
		if err != nil {
			writeError(w, inputError(i, err))
			return
		}
		inputs[i] = embed.Input{IDs: ids}
	}
	ctx := r.Context()
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	// A job of the engine's one bounded queue (a 429 when it is full): its
	// batches run between the batch's steps.
	et := newEmbedTask(e.Model, inputs, opts)
	j := &job{ctx: ctx, task: et, events: make(chan event, 1), queued: time.Now(), m: s.m}
	if err := s.eng.submit(j); err != nil {
		writeError(w, err)
		return
	}
	for ev := j.next(); ; ev = j.next() {
		if ev.done {
			err = ev.err
			break
		}
	}
	res := &et.res
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() == nil {
			err = errTimeout
		}
		writeError(w, err)
		return
	}
	data := make([]embeddingData, len(res.Embeddings))
	for i, v := range res.Embeddings {
		if dims < len(v) {
			v = shorten(v, dims)
		}
		data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.base64 {
			data[i].Embedding = base64Floats(v)
		}
	}
	c := e.Composition
	c.ArtifactFingerprint, _ = e.Fingerprint()
	c.Scheduling, c.BatchRows = "serial", min(len(inputs), e.BatchSize)
	c.Sampling = "none (embedding)"
	format := "float"
	if req.base64 {
		format = "base64"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": e.ID,
		"usage": map[string]int{"prompt_tokens": res.Tokens, "total_tokens": res.Tokens},
		"x_mlxgo": embeddingComposition{Composition: c, Pooling: string(e.Model.Pipeline.Pooling),
			Normalized: true, Dimensions: dims, EncodingFormat: format},
	})
}

// inputError is a 400 naming the input an embed error is about, as
// input[i] even for a lone string (it is item 0 of the response's data).
func inputError(i int, err error) error {
	name := fmt.Sprintf("input[%d]", i)
	var tooLong *embed.TooLongError
	if errors.As(err, &tooLong) {
		e := invalidf(name, "%s has %d tokens, more than the model's maximum of %d (inputs are never truncated)", name, tooLong.Tokens, tooLong.Max)
		e.code = "context_length_exceeded"
		return e
	}
	return invalidf(name, "cannot embed %s: %v", name, err)
}

// shorten is Matryoshka truncation: the first dims values, L2-normalized
// again (Qwen3-Embedding's recipe: normalize(v[:dims])), summed in float64.
func shorten(v []float32, dims int) []float32 {
	out := append([]float32(nil), v[:dims]...)
	var ss float64
	for _, x := range out {
		ss += float64(x) * float64(x)
	}
	norm := max(math.Sqrt(ss), 1e-12)
	for i, x := range out {
		out[i] = float32(float64(x) / norm)
	}
	return out
}

// base64Floats is OpenAI's base64 encoding: the little-endian float32 bytes.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
