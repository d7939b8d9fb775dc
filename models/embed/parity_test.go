package embed_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/embed"
)

// refDir is where reference.py's outputs live, keyed by the script's hash so
// that a changed script regenerates them (they are never committed).
func refDir(t *testing.T) string {
	t.Helper()
	script := filepath.Join(testenv.RepoRoot(), "models", "embed", "testdata", "reference.py")
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	return filepath.Join(testenv.RepoRoot(), ".cache", "embed", hex.EncodeToString(sum[:6]))
}

var refMu sync.Mutex

// reference runs reference.py args... unless out already exists.
func reference(t *testing.T, out string, args ...string) string {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	dir := refDir(t)
	p := filepath.Join(dir, out)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	py := testenv.Python(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testenv.RepoRoot(), "models", "embed", "testdata", "reference.py")
	tmp := p + ".tmp"
	cmd := exec.Command(py, append(append([]string{script}, args...), tmp)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reference.py %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func corpus(t *testing.T) (string, []string) {
	p := reference(t, "corpus.txt", "corpus")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

type refResult struct {
	IDs        [][]int32   `json:"ids"`
	Embeddings [][]float32 `json:"embeddings"`
}

func readRef(t *testing.T, p string) refResult {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var r refResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("cannot parse %s: %v", p, err)
	}
	return r
}

// compare returns the cosine similarity and the max abs difference.
func compare(a, b []float32) (cos, maxAbs float64) {
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot, na, nb = dot+x*y, na+x*x, nb+y*y
		maxAbs = max(maxAbs, math.Abs(x-y))
	}
	return dot / math.Sqrt(na*nb), maxAbs
}

// within checks every vector of got against want at the bar.
func within(t *testing.T, what string, got, want [][]float32) (worstCos, worstAbs float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d vectors, want %d", what, len(got), len(want))
	}
	worstCos = 1
	for i := range got {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: vector %d has %d dims, want %d", what, i, len(got[i]), len(want[i]))
		}
		c, d := compare(got[i], want[i])
		worstCos, worstAbs = min(worstCos, c), max(worstAbs, d)
		if c < 0.99999 || d > 1e-5 {
			t.Errorf("%s: vector %d: cosine %.8f, max abs diff %.3g (bar: >= 0.99999, <= 1e-5)", what, i, c, d)
		}
	}
	return worstCos, worstAbs
}

func TestBERTParity(t *testing.T) {
	dir := testenv.DataFile(t, "all-minilm-l6-v2")
	mlxtest.Need(t)
	cpath, lines := corpus(t)
	ref := readRef(t, reference(t, "bert.json", "bert", dir, cpath))
	if len(lines) < 500 || len(ref.Embeddings) != len(lines) {
		t.Fatalf("corpus of %d lines, reference of %d vectors: want >= 500 of each", len(lines), len(ref.Embeddings))
	}
	m, err := embed.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Pipeline.Pooling != embed.PoolMean || !m.Pipeline.Normalize || m.MaxLen != 256 {
		t.Errorf("pipeline %+v, max length %d: want mean pooling, Normalize, 256", m.Pipeline, m.MaxLen)
	}
	// Some lines run past max_seq_length: truncation must cut them where
	// tokenizers' enable_truncation does (the reference's ids).
	opts := embed.Options{Truncate: true}
	inputs := make([]embed.Input, len(lines))
	longest, cut := 0, 0
	for i, s := range lines {
		inputs[i] = embed.Input{Text: s}
		ids, err := m.Tokenize(i, inputs[i], opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Tokenize(i, inputs[i], embed.Options{}); err != nil {
			var tl *embed.TooLongError
			if !errors.As(err, &tl) || tl.Index != i || len(ids) != 256 {
				t.Fatalf("line %d: untruncated tokenize: %v (truncated to %d ids)", i+1, err, len(ids))
			}
			cut++
		}
		if !slices.Equal(ids, ref.IDs[i]) {
			t.Fatalf("line %d: ids %v, tokenizers gives %v", i+1, ids, ref.IDs[i])
		}
		longest = max(longest, len(ids))
	}
	// Mixed lengths are what makes padding matter.
	if longest < 100 {
		t.Fatalf("longest corpus line has %d tokens; want >= 100 so that batches pad", longest)
	}
	t.Logf("%d lines, longest %d tokens, %d truncated", len(lines), longest, cut)
	// The whole corpus in padded batches of 32 against the reference, which
	// ran every sentence alone: this is also the padding bar. MLX's CPU
	// matmul is slow on Linux, so single-input and odd batch sizes run on a
	// slice of the corpus holding its longest and shortest lines.
	full, err := m.Embed(context.Background(), inputs, embed.Options{Truncate: true, BatchSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	c, d := within(t, "batch 32 vs numpy reference", full.Embeddings, ref.Embeddings)
	t.Logf("batch 32: worst cosine %.9f, worst max abs diff %.3g over %d vectors", c, d, len(lines))
	sub := subset(inputs, 24)
	for _, bs := range []int{1, 5} {
		t.Run(fmt.Sprintf("batch%d", bs), func(t *testing.T) {
			r, err := m.Embed(context.Background(), pick(inputs, sub), embed.Options{Truncate: true, BatchSize: bs})
			if err != nil {
				t.Fatal(err)
			}
			c, d := within(t, "vs batch 32", r.Embeddings, pick(full.Embeddings, sub))
			t.Logf("batch %d vs batch 32: worst cosine %.9f, worst max abs diff %.3g", bs, c, d)
			c, d = within(t, "vs numpy reference", r.Embeddings, pick(ref.Embeddings, sub))
			t.Logf("batch %d vs reference: worst cosine %.9f, worst max abs diff %.3g", bs, c, d)
		})
	}
}

// subset is n indices spread over inputs: every len/n-th, so that lengths mix.
func subset(inputs []embed.Input, n int) []int {
	var out []int
	for i := 0; i < len(inputs); i += max(1, len(inputs)/n) {
		out = append(out, i)
	}
	return out
}

func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = xs[i]
	}
	return out
}
