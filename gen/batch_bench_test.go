package gen

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// BenchmarkBatchDecode times one decode Step of B rows of the default model
// (SmolLM2-135M Q4_1, 64-token prompts, greedy) against Generate's decode of
// one stream: ms per step and aggregate tokens per second. Run it alone:
//
//	go test ./gen/ -run '^$' -bench BatchDecode -benchtime 64x
func BenchmarkBatchDecode(b *testing.B) {
	path := testenv.DataFile(b, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	mlxtest.Need(b)
	var m models.Model
	if err := mlx.Do(func() (err error) { m, err = models.Load(path, models.LoadOptions{}); return err }); err != nil {
		b.Fatal(err)
	}
	defer mlx.Do(m.Close)
	vocab := m.Info().VocabSize
	prompt := func(i int) []int32 {
		p := make([]int32, 64)
		for j := range p {
			p[j] = int32((j*7919 + i*104729 + 1) % vocab)
		}
		return p
	}
	b.Run("generate", func(b *testing.B) {
		var st Stats
		err := mlx.Do(func() (err error) {
			st, err = Generate(context.Background(), m, prompt(0), Options{MaxTokens: b.N + 1, VocabSize: vocab}, func(int32) error { return nil })
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.DecodeDuration.Milliseconds())/float64(b.N), "ms/step")
		b.ReportMetric(st.DecodeTPS(), "tok/s")
	})
	for _, rows := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			var took time.Duration
			err := mlx.Do(func() error {
				batch := NewBatch(m.(RowModel))
				defer batch.Close()
				for i := range rows {
					err := batch.Add(Row{Prompt: prompt(i), Options: Options{MaxTokens: 1 << 30, VocabSize: vocab},
						Done: func(_ Stats, c []kv.Cache, _ error) { kv.FreeAll(c) }})
					if err != nil {
						return err
					}
				}
				for batch.Decoding() < rows { // every prompt in
					if err := batch.Step(); err != nil {
						return err
					}
				}
				start := time.Now()
				for range b.N {
					if err := batch.Step(); err != nil {
						return err
					}
				}
				took = time.Since(start)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			step := took.Seconds() / float64(b.N)
			b.ReportMetric(step*1000, "ms/step")
			b.ReportMetric(float64(rows)/step, "tok/s")
		})
	}
}

// BenchmarkGenerateHost splits what one row's decode step costs around the
// model (on the GPU the 1B shape's generate ran at 0.72x of the bare loop,
// 2026-12-04): "loop" is generate_step's pipelined loop with argmax only,
// "logprobs" adds the log-softmax and evaluates it with the token (what
// generate_step computes), "generate" is Generate itself. Same model, same
// prompt, b.N tokens each. MLXGO_BENCH_MODEL picks the model (default:
// SmolLM2 Q4_1), MLXGO_BENCH_PROMPT_TOKENS the prompt's length (default 32;
// the GPU bench's is 512):
//
//	MLXGO_BENCH_MODEL=DIR go test ./gen/ -run '^$' -bench GenerateHost -benchtime 200x
func BenchmarkGenerateHost(b *testing.B) {
	path := os.Getenv("MLXGO_BENCH_MODEL")
	if path == "" {
		path = testenv.DataFile(b, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	mlxtest.Need(b)
	var m models.Model
	if err := mlx.Do(func() (err error) { m, err = models.Load(path, models.LoadOptions{}); return err }); err != nil {
		b.Fatal(err)
	}
	defer mlx.Do(m.Close)
	vocab := m.Info().VocabSize
	n := 32
	if v := os.Getenv("MLXGO_BENCH_PROMPT_TOKENS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("MLXGO_BENCH_PROMPT_TOKENS=%q: want a positive number", v)
		}
	}
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32((100 + 37*i) % vocab)
	}
	loop := func(b *testing.B, logprobs bool) {
		err := mlx.Do(func() error {
			caches := m.NewCaches(kv.Options{})
			defer kv.FreeAll(caches)
			step := func(in *mlx.Array) []*mlx.Array {
				s := mlx.NewScope()
				defer s.Close()
				logits := m.Forward(mlx.Reshape(in, 1, in.Size()), caches)
				l, v := logits.Dim(1), logits.Dim(2)
				last := mlx.Reshape(mlx.Slice(logits, []int{0, l - 1, 0}, []int{1, l, v}), 1, v)
				out := []*mlx.Array{last}
				if logprobs {
					out[0] = mlx.Subtract(last, mlx.LogSumExp(last, nil, true))
				}
				y := mlx.Argmax(out[0], -1, false)
				out = append([]*mlx.Array{y}, out...)
				if !logprobs {
					out = out[:1]
				}
				mlx.Detach(out...)
				return out
			}
			free := func(as []*mlx.Array) {
				for _, a := range as {
					a.Free()
				}
			}
			cur := step(mlx.FromSlice(prompt, len(prompt)))
			if err := mlx.AsyncEval(cur...); err != nil {
				return err
			}
			if _, err := mlx.ToSlice[uint32](cur[0]); err != nil {
				return err
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				next := step(cur[0])
				if err := mlx.AsyncEval(next...); err != nil {
					return err
				}
				if _, err := mlx.ToSlice[uint32](cur[0]); err != nil {
					return err
				}
				free(cur)
				cur = next
			}
			_, err := mlx.ToSlice[uint32](cur[0])
			free(cur)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tok/s")
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("loop", func(b *testing.B) { loop(b, false) })
	b.Run("logprobs", func(b *testing.B) { loop(b, true) })
	b.Run("generate", func(b *testing.B) {
		var st Stats
		err := mlx.Do(func() (err error) {
			st, err = Generate(context.Background(), m, prompt, Options{MaxTokens: b.N + 1, VocabSize: vocab}, func(int32) error { return nil })
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(st.DecodeTPS(), "tok/s")
	})
}
