package gen

import (
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestFrequencyPenaltyRoundsEachSubtract shows why the frequency penalty is
// applied in rounds: subtracting the penalty k times (rounding each time, as
// MLX's scatter_add does) and subtracting k*penalty once give different bits
// for some logits in every float dtype, so the oracle comparison in
// TestSamplerMatchesMLXLM distinguishes the two. In every dtype, tokens
// outside the window must be untouched and a token seen once must equal the
// presence penalty's result.
func TestFrequencyPenaltyRoundsEachSubtract(t *testing.T) {
	mlxtest.Need(t)
	for _, tc := range []struct{ dtype string }{{"float32"}, {"bfloat16"}, {"float16"}} {
		t.Run(tc.dtype, func(t *testing.T) {
			const vocab, penalty, window = 1000, 0.3, 64
			var rounds, naive, presence, orig []float32
			var counts map[int32]int
			mlxtest.Do(t, func() error {
				dt, err := mlx.ParseDtype(tc.dtype)
				if err != nil {
					return err
				}
				// Many logits near 40 (coarse bf16/f16 spacing) so rounding shows.
				x := mlx.Add(mlx.Normal([]int{1, vocab}, dt, 0, 4, mlx.Key(3)), mlx.Scalar(40, dt))
				tokens := mlx.FromSlice(dupTokens, len(dupTokens))
				counts = map[int32]int{}
				for _, id := range dupTokens[max(0, len(dupTokens)-window):] {
					counts[id]++
				}
				kArr := make([]float32, vocab)
				for id, k := range counts {
					kArr[id] = float32(k)
				}
				ks := mlx.AsType(mlx.FromSlice(kArr, 1, vocab), dt)
				fp := &frequencyPenalty{penalty: penalty, context: window}
				pp := &presencePenalty{penalty: penalty, context: window}
				p := mlx.ScalarLike(penalty, x)
				for _, step := range []struct {
					dst *[]float32
					a   *mlx.Array
				}{
					{&rounds, fp.Process(tokens, x)},
					{&naive, mlx.Subtract(x, mlx.Multiply(ks, p))},
					{&presence, pp.Process(tokens, x)},
					{&orig, x},
				} {
					if *step.dst, err = step.a.Float32s(); err != nil {
						return err
					}
				}
				return nil
			})
			differ := 0
			for id := range orig {
				k := counts[int32(id)]
				switch {
				case k == 0 && math.Float32bits(rounds[id]) != math.Float32bits(orig[id]):
					t.Fatalf("token %d is outside the window but changed: %v -> %v", id, orig[id], rounds[id])
				case k == 1 && math.Float32bits(rounds[id]) != math.Float32bits(presence[id]):
					t.Fatalf("token %d seen once: %v, presence penalty gives %v", id, rounds[id], presence[id])
				case k > 1 && !(rounds[id] < orig[id]):
					t.Fatalf("token %d seen %d times was not penalized: %v -> %v", id, k, orig[id], rounds[id])
				}
				if rounds[id] != naive[id] {
					differ++
				}
			}
			if differ == 0 {
				t.Fatal("k rounded subtracts equal one k*penalty subtract everywhere: the duplicates prove nothing")
			}
			t.Logf("%d logits differ from a single k*penalty subtract", differ)
		})
	}
}

// BenchmarkPenalties is one processor call on bf16 logits of SmolLM2's
// vocabulary: the presence penalty (one round) against the frequency
// penalty over its default window and a long one (a round per position).
func BenchmarkPenalties(b *testing.B) {
	mlxtest.Need(b)
	for _, bc := range []struct {
		name string
		p    LogitsProcessor
	}{
		{"presence-20", &presencePenalty{penalty: 0.5, context: 20}},
		{"frequency-20", &frequencyPenalty{penalty: 0.5, context: 20}},
		{"frequency-256", &frequencyPenalty{penalty: 0.5, context: 256}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mlxtest.Do(b, func() error {
				x := mlx.Normal([]int{1, 49152}, mlx.BFloat16, 0, 4, mlx.Key(1))
				toks := make([]int32, bc.p.Context())
				for i := range toks {
					toks[i] = int32(i * 7 % 50) // repeats, as generated text has
				}
				tk := mlx.FromSlice(toks, len(toks))
				if err := mlx.Eval(x, tk); err != nil {
					return err
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					s := mlx.NewScope()
					err := mlx.Eval(bc.p.Process(tk, x))
					s.Close()
					if err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}
