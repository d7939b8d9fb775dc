package embed_test

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/embed"
)

// TestQwen3Parity: a tiny random-weight qwen3 model in Qwen3-Embedding's
// shape (last-token pooling, Normalize) against mlx-lm's own Model.model on
// the same libmlx. Run alone, every vector must be the same bits; in padded
// batches, within the bound.
func TestQwen3Parity(t *testing.T) {
	testenv.DataFile(t, "tokenizers/qwen3/tokenizer.json")
	mlxtest.Need(t)
	model := reference(t, "qwen3-tiny", "qwen3-model")
	cpath, lines := corpus(t)
	// 64 lines: the tiny model is fast, but the reference runs one at a time.
	sub := make([]string, 0, 64)
	for i := 0; i < len(lines) && len(sub) < 64; i += len(lines) / 64 {
		sub = append(sub, lines[i])
	}
	subPath := cpath + ".qwen3"
	if err := os.WriteFile(subPath, []byte(strings.Join(sub, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := embed.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Pipeline.Pooling != embed.PoolLast || m.MaxLen != 128 {
		t.Fatalf("pipeline %+v, max length %d: want last-token pooling, 128", m.Pipeline, m.MaxLen)
	}
	for _, tc := range []struct{ name, instruction string }{
		{"plain", ""},
		{"instruction", "Given a web search query, retrieve relevant passages that answer the query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"qwen3", model, subPath}
			out := "qwen3-" + tc.name + ".json"
			if tc.instruction != "" {
				args = []string{"qwen3", "--instruction", tc.instruction, model, subPath}
			}
			ref := readRef(t, reference(t, out, args...))
			opts := embed.Options{Truncate: true, Instruction: tc.instruction}
			inputs := make([]embed.Input, len(sub))
			for i, s := range sub {
				inputs[i] = embed.Input{Text: s}
				ids, err := m.Tokenize(i, inputs[i], opts)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, ref.IDs[i]) {
					t.Fatalf("input %d: ids differ from tokenizers' (%d vs %d ids)", i, len(ids), len(ref.IDs[i]))
				}
			}
			opts.BatchSize = 1
			single, err := m.Embed(context.Background(), inputs, opts)
			if err != nil {
				t.Fatal(err)
			}
			diffBits := 0
			for i := range single.Embeddings {
				for j, x := range single.Embeddings[i] {
					if math.Float32bits(x) != math.Float32bits(ref.Embeddings[i][j]) {
						diffBits++
					}
				}
			}
			if diffBits > 0 {
				t.Errorf("%d values differ from mlx-lm's bits (want 0)", diffBits)
			}
			c, d := within(t, "single vs mlx-lm", single.Embeddings, ref.Embeddings)
			t.Logf("batch 1 vs mlx-lm: %d differing values, worst cosine %.9f, max abs diff %.3g", diffBits, c, d)
			opts.BatchSize = 16
			batched, err := m.Embed(context.Background(), inputs, opts)
			if err != nil {
				t.Fatal(err)
			}
			c, d = within(t, "batch 16 vs mlx-lm", batched.Embeddings, ref.Embeddings)
			t.Logf("batch 16 vs mlx-lm: worst cosine %.9f, max abs diff %.3g", c, d)
		})
	}
}
