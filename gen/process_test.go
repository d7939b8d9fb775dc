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
