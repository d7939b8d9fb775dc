package models_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// oracleCase is one entry of the oracle's cases/index.json (logits.py).
type oracleCase struct {
	File             string            `json:"file"`
	Model            string            `json:"model"`
	ModelFiles       map[string]string `json:"model_files"`
	LogitsDtype      string            `json:"logits_dtype"`
	PrefillChunks    []int             `json:"prefill_chunks"`
	Steps            int               `json:"steps"`
	KVBits           *int              `json:"kv_bits"`
	KVGroupSize      int               `json:"kv_group_size"`
	QuantizedKVStart int               `json:"quantized_kv_start"`
	MaxKVSize        *int              `json:"max_kv_size"`
	SourceGGUF       string            `json:"source_gguf"`
	// Dtype is the dtype the oracle cast the model to after loading
	// (model.set_dtype), what --dtype does; empty: the checkpoint's.
	Dtype string `json:"dtype"`
	// Unsupported is MLX's own error for a case it cannot evaluate on the
	// oracle's device (logits.py records it on a GPU only), at model call
	// FailedCall (1-based); the fixture then holds the prompt alone.
	Unsupported string `json:"unsupported"`
	FailedCall  int    `json:"failed_call"`
	Calls       []struct {
		Tokens int `json:"tokens"`
		// Offset is nil where no mlx-lm cache counts tokens (a pipeline
		// stage of linear layers only: ArraysCache has no offset).
		Offset *int     `json:"offset"`
		Caches []string `json:"caches"`
	} `json:"calls"`
	// RankCalls is a pipeline case's Calls of every rank, rank 0's first
	// (each stage keeps caches for its own layers only).
	RankCalls []json.RawMessage `json:"rank_calls"`
}

func oracleDir() string {
	if d := os.Getenv("MLXGO_ORACLE_DIR"); d != "" {
		return d
	}
	return filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
}

var fixturesOnce sync.Once

// readCases reads an oracle script's index.json: its cases, which must be
// there (what and hint say which fixtures and how they are made) and not
// none.
func readCases[C any](t *testing.T, index, what, hint string) map[string]C {
	t.Helper()
	data, err := os.ReadFile(index)
	if err != nil {
		testenv.Missing(t, what+" "+index, hint)
	}
	var idx struct {
		Cases map[string]C `json:"cases"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("cannot parse %s: %v", index, err)
	}
	if len(idx.Cases) == 0 {
		t.Fatalf("%s lists no cases", index)
	}
	return idx.Cases
}

// oracleCases returns the fixtures, generating them with the oracle scripts
// when absent (they are never committed).
func oracleCases(t *testing.T) map[string]oracleCase {
	t.Helper()
	index := filepath.Join(oracleDir(), "cases", "index.json")
	fixturesOnce.Do(func() {
		if _, err := os.Stat(index); err == nil {
			return
		}
		py := testenv.Python(t)
		scripts := filepath.Join(testenv.RepoRoot(), "models", "testdata", "oracle")
		run := func(args ...string) {
			cmd := exec.Command(py, args...)
			cmd.Dir = scripts
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cannot generate oracle fixtures (%s): %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		run("make_tiny.py")
		run("logits.py", "--suite")
		if _, err := os.Stat(filepath.Join(testenv.DataDir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")); err == nil {
			run("smollm2_gguf.py")
		}
	})
	return readCases[oracleCase](t, index, "oracle fixtures", "python models/testdata/oracle/make_tiny.py && python models/testdata/oracle/logits.py --suite")
}

// fixture is a case's arrays.
type fixture struct {
	prompt, tokens []int32
	logits         []float32 // [steps+1, vocab]
	vocab          int
}

func readFixture(t *testing.T, path string) fixture {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatalf("cannot open fixture: %v", err)
	}
	defer f.Close()
	get := func(name string) (safetensors.TensorInfo, []byte) {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("fixture %s has no %s", path, name)
		}
		return ti, f.Data(ti)
	}
	var fx fixture
	_, p := get("prompt_ids")
	fx.prompt = bytesAs[int32](p)
	if _, ok := f.Tensor("logits"); !ok {
		return fx // an unsupported case's fixture: the prompt alone
	}
	_, tk := get("tokens")
	fx.tokens = bytesAs[int32](tk)
	li, l := get("logits")
	fx.logits = bytesAs[float32](l)
	fx.vocab = li.Shape[1]
	return fx
}

func bytesAs[T int32 | float32](b []byte) []T {
	out := make([]T, len(b)/4)
	for i := range out {
		u := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		switch p := any(&out[i]).(type) {
		case *int32:
			*p = int32(u)
		case *float32:
			*p = math.Float32frombits(u)
		}
	}
	return out
}

// replayRows feeds m a fixture's calls as generate_step made them: the
// prompt in the oracle's prefill chunks, then the last prompt token and each
// of the oracle's tokens (teacher forcing), one call each; row gets each
// recorded row's last-position logits as float32 (step 0 is the prompt's)
// and the logits' dtype.
func replayRows(m models.Model, caches []kv.Cache, chunks []int, fx fixture, steps int,
	row func(step int, logits []float32, dtype string) error) error {
	forward := func(ids []int32) ([]float32, string, error) {
		s := mlx.NewScope()
		defer s.Close()
		logits := m.Forward(mlx.FromSlice(ids, 1, len(ids)), caches)
		last := mlx.Squeeze(mlx.Slice(logits, []int{0, len(ids) - 1, 0}, []int{1, len(ids), fx.vocab}), 0, 1)
		r, err := mlx.AsType(last, mlx.Float32).Float32s()
		if err != nil {
			return nil, "", err
		}
		return r, logits.Dtype().String(), mlx.Eval(kv.States(caches)...)
	}
	pos := 0
	for _, n := range chunks[:len(chunks)-1] {
		if _, _, err := forward(fx.prompt[pos : pos+n]); err != nil {
			return err
		}
		pos += n
	}
	for step := 0; step <= steps; step++ {
		in := fx.prompt[pos:]
		if step > 0 {
			in = fx.tokens[step-1 : step]
		}
		r, dtype, err := forward(in)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := row(step, r, dtype); err != nil {
			return err
		}
	}
	return nil
}

// cacheKind names a cache the way the oracle's trace does.
func cacheKind(c kv.Cache) string {
	switch c.(type) {
	case *kv.KVCache:
		return "KVCache"
	case *kv.Rotating:
		return "RotatingKVCache"
	case *kv.Quantized:
		return "QuantizedKVCache"
	case *kv.Arrays:
		return "ArraysCache"
	}
	return fmt.Sprintf("%T", c)
}

// compareRow reports the first element whose bits differ and the largest
// absolute difference (NaN equal to NaN).
func compareRow(got, want []float32) (first int, maxDiff float64) {
	first = -1
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) == math.Float32bits(w) || (g != g && w != w) {
			continue
		}
		if first < 0 {
			first = i
		}
		maxDiff = math.Max(maxDiff, math.Abs(float64(g)-float64(w)))
	}
	return first, maxDiff
}

// TestL1 replays every oracle case: the same prefill split, the call on
// the last prompt token, then greedy decode fed with the oracle's tokens,
// and requires logits bit-identical to mlx-lm's at every recorded row.
func TestL1(t *testing.T) {
	mlxtest.Need(t)
	cases := oracleCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			runCase(t, c, filepath.Join(oracleDir(), c.Model), true)
		})
		if c.SourceGGUF != "" {
			t.Run(name+"/from-gguf", func(t *testing.T) {
				runCase(t, c, testenv.DataFile(t, c.SourceGGUF), false)
			})
		}
	}
}

func runCase(t *testing.T, c oracleCase, modelPath string, checkFiles bool) {
	fx := readFixture(t, filepath.Join(oracleDir(), "cases", c.File))
	if c.Unsupported != "" {
		// On the CPU only gather_mm's float32-only kernel is expected.
		if os.Getenv("MLXGO_ORACLE_DEVICE") != "gpu" && !strings.Contains(c.Unsupported, "[GatherMM::eval]") {
			t.Fatalf("the oracle could not run this case on the CPU: %s", c.Unsupported)
		}
		runUnsupported(t, c, fx, modelPath)
		return
	}
	if testing.Short() && fx.vocab > 4096 {
		t.Skip("real-size model: skipped with -short")
	}
	if len(fx.tokens) != c.Steps || len(fx.logits) != (c.Steps+1)*fx.vocab {
		t.Fatalf("fixture shapes: %d tokens, %d logits for %d steps x vocab %d", len(fx.tokens), len(fx.logits), c.Steps, fx.vocab)
	}
	opts := kv.Options{KVGroupSize: c.KVGroupSize}
	if c.MaxKVSize != nil {
		opts.MaxKVSize = *c.MaxKVSize
	}
	if c.KVBits != nil {
		opts.KVBits = *c.KVBits
	}
	mlxtest.Do(t, func() error {
		m, err := loadL1(modelPath, models.LoadOptions{Dtype: c.Dtype})
		if err != nil {
			return err
		}
		defer m.Close()
		if checkFiles {
			got, err := m.Info().Artifact.FileDigests()
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, c.ModelFiles) {
				return fmt.Errorf("model files differ from the fixture's: got %v, want %v", got, c.ModelFiles)
			}
		}
		caches := m.NewCaches(opts)
		defer kv.FreeAll(caches)
		call := 0
		// forward runs one call the way generate_step does and returns the
		// last position's logits as float32.
		forward := func(ids []int32) ([]float32, string, error) {
			if call < len(c.Calls) {
				want := c.Calls[call]
				kinds := map[string]bool{}
				for _, cc := range caches {
					kinds[cacheKind(cc)] = true
				}
				var got []string
				for k := range kinds {
					got = append(got, k)
				}
				sort.Strings(got)
				offset := caches[0].Offset()
				if want.Offset != nil {
					offset = *want.Offset
				}
				if want.Tokens != len(ids) || offset != caches[0].Offset() || !reflect.DeepEqual(got, want.Caches) {
					return nil, "", fmt.Errorf("call %d: %d tokens at offset %d with %v, oracle: %d at %d with %v",
						call, len(ids), caches[0].Offset(), got, want.Tokens, offset, want.Caches)
				}
			}
			call++
			s := mlx.NewScope() // one scope per model call, as a decode loop has
			defer s.Close()
			logits := m.Forward(mlx.FromSlice(ids, 1, len(ids)), caches)
			last := mlx.Squeeze(mlx.Slice(logits, []int{0, len(ids) - 1, 0}, []int{1, len(ids), fx.vocab}), 0, 1)
			if err := kv.MaybeQuantize(caches, c.QuantizedKVStart, opts.GroupSize(), opts.KVBits); err != nil {
				return nil, "", err
			}
			row, err := mlx.AsType(last, mlx.Float32).Float32s()
			if err != nil {
				return nil, "", err
			}
			if err := mlx.Eval(kv.States(caches)...); err != nil {
				return nil, "", err
			}
			return row, logits.Dtype().String(), nil
		}
		pos := 0
		for _, n := range c.PrefillChunks[:len(c.PrefillChunks)-1] {
			if _, _, err := forward(fx.prompt[pos : pos+n]); err != nil {
				return err
			}
			pos += n
		}
		if pos != len(fx.prompt)-1 {
			return fmt.Errorf("prefill chunks %v cover %d of %d prompt tokens", c.PrefillChunks, pos, len(fx.prompt))
		}
		var lastLive int64
		var lastKinds string
		for step := 0; step <= c.Steps; step++ {
			in := fx.prompt[pos:]
			if step > 0 {
				in = fx.tokens[step-1 : step]
			}
			row, dtype, err := forward(in)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if dtype != c.LogitsDtype {
				return fmt.Errorf("logits dtype %s, oracle %s", dtype, c.LogitsDtype)
			}
			want := fx.logits[step*fx.vocab : (step+1)*fx.vocab]
			if i, d := compareRow(row, want); i >= 0 {
				return fmt.Errorf("row %d (step %d): first difference at vocab index %d: got %v, want %v; max abs diff %g",
					step, step, i, row[i], want[i], d)
			}
			// Decode steps must not accumulate arrays: the caches replace
			// their buffers, everything else dies with the step's scope. The
			// count changes only when the caches switch to quantized ones.
			kinds := cacheKinds(caches)
			if live := mlx.LiveArrays(); step > 0 && kinds == lastKinds && live != lastLive {
				return fmt.Errorf("step %d: %d live arrays, %d after the previous step", step, live, lastLive)
			}
			lastLive, lastKinds = mlx.LiveArrays(), kinds
		}
		return nil
	})
}

// runUnsupported replays a case MLX itself could not evaluate on its device
// (logits.py's unsupported_case): the same prefill split, then greedy decode
// on mlxgo's own tokens, which must stop at the same model call with MLX's
// same error, not run on, hang or crash.
func runUnsupported(t *testing.T, c oracleCase, fx fixture, modelPath string) {
	opts := kv.Options{KVGroupSize: c.KVGroupSize}
	if c.MaxKVSize != nil {
		opts.MaxKVSize = *c.MaxKVSize
	}
	if c.KVBits != nil {
		opts.KVBits = *c.KVBits
	}
	// MLX's message up to the problem shape: the shapes themselves are the
	// same on both sides, but the check must not hinge on their formatting.
	want, _, _ := strings.Cut(c.Unsupported, ":")
	mlxtest.Do(t, func() error {
		m, err := models.Load(modelPath, models.LoadOptions{Dtype: c.Dtype})
		if err != nil {
			return err
		}
		defer m.Close()
		caches := m.NewCaches(opts)
		defer kv.FreeAll(caches)
		call := 0
		forward := func(ids []int32) (int32, error) {
			call++
			s := mlx.NewScope()
			defer s.Close()
			logits := m.Forward(mlx.FromSlice(ids, 1, len(ids)), caches)
			last := mlx.Slice(logits, []int{0, len(ids) - 1, 0}, []int{1, len(ids), logits.Dim(2)})
			if err := kv.MaybeQuantize(caches, c.QuantizedKVStart, opts.GroupSize(), opts.KVBits); err != nil {
				return 0, err
			}
			tok, err := mlx.Argmax(last, -1, false).Int32s()
			if err != nil {
				return 0, err
			}
			return tok[0], mlx.Eval(kv.States(caches)...)
		}
		in := fx.prompt
		for _, n := range c.PrefillChunks[:len(c.PrefillChunks)-1] {
			if _, err := forward(in[:n]); err != nil {
				return checkUnsupported(err, call, c.FailedCall, want)
			}
			in = in[n:]
		}
		for step := 0; step <= c.Steps; step++ {
			tok, err := forward(in)
			if err != nil {
				return checkUnsupported(err, call, c.FailedCall, want)
			}
			in = []int32{tok}
		}
		return fmt.Errorf("mlxgo ran all %d calls of a case MLX stopped at call %d with %q", call, c.FailedCall, c.Unsupported)
	})
}

func checkUnsupported(err error, call, wantCall int, want string) error {
	if call != wantCall || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("call %d failed with %v; MLX failed call %d with %q", call, err, wantCall, want)
	}
	return nil
}

func cacheKinds(caches []kv.Cache) string {
	var b strings.Builder
	for _, c := range caches {
		b.WriteString(cacheKind(c))
		b.WriteByte(' ')
	}
	return b.String()
}
