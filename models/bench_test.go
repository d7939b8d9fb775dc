package models_test

import (
	"os"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// BenchmarkSmolLM2Decode times a plain greedy decode loop on the real
// SmolLM2 GGUF (one forward, argmax and eval per token, one scope per step),
// the loop bench_ref.py times for mlx-lm. Compare side by side with
//
//	.venv/bin/python models/testdata/oracle/bench_ref.py --model .cache/oracle/models/smollm2-q4_1 --prompt-tokens 32
func BenchmarkSmolLM2Decode(b *testing.B) {
	b.Run("sync", func(b *testing.B) { benchDecode(b, false) })
	b.Run("pipelined", func(b *testing.B) { benchDecode(b, true) })
}

// benchDecode runs the loop synchronously (eval each token before building
// the next step) or pipelined like generate_step (build and async_eval step
// n+1 from the lazy token of step n, then read token n).
func benchDecode(b *testing.B, pipelined bool) {
	path := benchModel(b)
	mlxtest.Need(b)
	err := mlx.Do(func() error {
		m, err := models.Load(path, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer m.Close()
		caches := m.NewCaches(kv.Options{})
		defer kv.FreeAll(caches)
		prompt := make([]int32, 32)
		for i := range prompt {
			prompt[i] = int32(100 + 37*i)
		}
		next := func(ids []int32) (int32, error) {
			s := mlx.NewScope()
			defer s.Close()
			logits := m.Forward(mlx.FromSlice(ids, 1, len(ids)), caches)
			l := logits.Dim(1)
			last := mlx.Slice(logits, []int{0, l - 1, 0}, []int{1, l, logits.Dim(2)})
			v, err := mlx.Argmax(last, -1, false).Int32s()
			if err != nil {
				return 0, err
			}
			return v[0], nil
		}
		tok, err := next(prompt)
		if err != nil {
			return err
		}
		b.ResetTimer()
		start := time.Now()
		if pipelined {
			err = decodePipelined(m, caches, tok, b.N)
		} else {
			for i := 0; i < b.N && err == nil; i++ {
				tok, err = next([]int32{tok})
			}
		}
		if err != nil {
			return err
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tok/s")
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// decodePipelined is generate_step's loop: the next step is queued with
// AsyncEval before the current token is read back.
func decodePipelined(m models.Model, caches []kv.Cache, first int32, n int) error {
	step := func(in *mlx.Array) *mlx.Array {
		s := mlx.NewScope()
		defer s.Close()
		logits := m.Forward(in, caches)
		l := logits.Dim(1)
		y := mlx.Reshape(mlx.Argmax(mlx.Slice(logits, []int{0, l - 1, 0}, []int{1, l, logits.Dim(2)}), -1, false), 1, 1)
		mlx.Detach(y) // lives into the next step
		return y
	}
	y := step(mlx.FromSlice([]int32{first}, 1, 1))
	if err := mlx.AsyncEval(y); err != nil {
		return err
	}
	// The token is read as argmax's own uint32: Int32s would add an astype,
	// which the stream runs only after the step queued behind it, and the
	// loop would wait for two steps each time (the GPU run of 2026-12-02
	// measured "pipelined" no faster than "sync" that way).
	for i := 0; i < n; i++ {
		next := step(y)
		if err := mlx.AsyncEval(next); err != nil {
			return err
		}
		if _, err := mlx.ToSlice[uint32](y); err != nil {
			return err
		}
		y.Free()
		y = next
	}
	_, err := mlx.ToSlice[uint32](y)
	y.Free()
	return err
}

// BenchmarkSmolLM2BuildStep times building one decode step's graph on the
// host (Forward for one token, nothing evaluated): the work that must hide
// behind the device's previous step for pipelining to pay, and on a GPU the
// floor under a step's time. Every 32 steps the caches are renewed so the
// unevaluated graph does not grow without bound.
func BenchmarkSmolLM2BuildStep(b *testing.B) {
	path := benchModel(b)
	mlxtest.Need(b)
	err := mlx.Do(func() error {
		m, err := models.Load(path, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer m.Close()
		ids := []int32{100}
		b.ResetTimer()
		for done := 0; done < b.N; {
			caches := m.NewCaches(kv.Options{})
			s := mlx.NewScope()
			for i := 0; i < 32 && done < b.N; i, done = i+1, done+1 {
				mlx.Argmax(m.Forward(mlx.FromSlice(ids, 1, 1), caches), -1, false)
			}
			b.StopTimer()
			s.Close()
			kv.FreeAll(caches)
			b.StartTimer()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchModel is the model the decode benchmarks run: $MLXGO_BENCH_MODEL (a
// model directory or .gguf, e.g. the Llama-shaped models on a GPU machine),
// or the real SmolLM2 GGUF.
func benchModel(b *testing.B) string {
	if p := os.Getenv("MLXGO_BENCH_MODEL"); p != "" {
		return p
	}
	return testenv.DataFile(b, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
}
