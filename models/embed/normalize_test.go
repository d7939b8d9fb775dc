package embed_test

import (
	"context"
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/embed"
)

// TestNormalizeFollowsPipeline: a pipeline without a Normalize module gives
// the pooled vector as is (sentence-transformers runs no Normalize), and
// NoNormalize turns a Normalize module off; with both on the norm is 1.
func TestNormalizeFollowsPipeline(t *testing.T) {
	dir := testenv.DataFile(t, "all-minilm-l6-v2")
	mlxtest.Need(t)
	m, err := embed.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := []embed.Input{{Text: "The quick brown fox jumps over the lazy dog."}}
	run := func(o embed.Options) ([]float32, float64) {
		t.Helper()
		r, err := m.Embed(context.Background(), in, o)
		if err != nil {
			t.Fatal(err)
		}
		var ss float64
		for _, x := range r.Embeddings[0] {
			ss += float64(x) * float64(x)
		}
		return r.Embeddings[0], math.Sqrt(ss)
	}
	_, n := run(embed.Options{})
	if math.Abs(n-1) > 1e-6 {
		t.Fatalf("with a Normalize module: norm %v, want 1", n)
	}
	raw, rawNorm := run(embed.Options{NoNormalize: true})
	if math.Abs(rawNorm-1) < 1e-3 {
		t.Fatalf("NoNormalize: norm %v, want the pooled vector's (not 1)", rawNorm)
	}
	m.Pipeline.Normalize = false
	got, _ := run(embed.Options{})
	for i := range got {
		if got[i] != raw[i] {
			t.Fatalf("no Normalize module: element %d is %v, want the pooled %v", i, got[i], raw[i])
		}
	}
}
