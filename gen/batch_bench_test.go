package gen

import (
	"context"
	"fmt"
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
