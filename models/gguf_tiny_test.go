package models_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models"
)

var tinyGGUFMu sync.Mutex

// tinyGGUF returns the GGUF form of an oracle tiny model, written by
// models/testdata/oracle/tiny_gguf.py (make oracle) when absent.
func tinyGGUF(t *testing.T, name string) (dir, file string) {
	t.Helper()
	dir = filepath.Join(oracleDir(), "models", name)
	file = filepath.Join(oracleDir(), "gguf", name+".gguf")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		testenv.Missing(t, "oracle tiny model "+dir, "make oracle")
	}
	writeTinyGGUF(t, file)
	return dir, file
}

// writeTinyGGUF runs tiny_gguf.py, which writes every file, when file is
// missing (a checkout older than the file's architecture has the others).
func writeTinyGGUF(t *testing.T, file string) {
	t.Helper()
	tinyGGUFMu.Lock()
	defer tinyGGUFMu.Unlock()
	if _, err := os.Stat(file); err != nil {
		cmd := exec.Command(testenv.Python(t), filepath.Join(testenv.RepoRoot(), "models", "testdata", "oracle", "tiny_gguf.py"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cannot write the tiny GGUF files: %v\n%s", err, out)
		}
	}
	if _, err := os.Stat(file); err != nil {
		testenv.Missing(t, "tiny GGUF "+file, "make oracle")
	}
}

// TestGGUFArchitecturesEqualSafetensors loads each tiny float32 model twice,
// from its safetensors directory (L1 with mlx-lm) and from the GGUF file
// llama.cpp's converter would write for it (names, metadata, llama's rope
// permutation, gemma's 1+w norms, phi3's fused projections and rope factor
// tensors, qwen3moe's stacked experts), and requires bit-identical logits over a
// prefill longer than gemma3's sliding window and 8 decode steps. mlx-lm
// 0.32.2 cannot load GGUF files of these architectures, so this is the
// oracle for the GGUF mapping: the same model as the one mlx-lm runs.
func TestGGUFArchitecturesEqualSafetensors(t *testing.T) {
	for _, name := range []string{"llama-f32", "llama_tied-f32", "qwen2-f32", "qwen3-f32", "gemma3_text-f32", "phi3-f32", "qwen3_moe-f32", "minicpm-f32"} {
		t.Run(name, func(t *testing.T) {
			dir, file := tinyGGUF(t, name)
			equalLoads(t, dir, file)
		})
	}
}

// TestGGUFQuantizedExpertsEqualMLXReader loads the tiny qwen3_moe as a Q8_0
// GGUF with Q4_0 expert stacks (3-D quantized tensors) and as the MLX
// directory of MLX's own GGUF reader's arrays of that file (mx.load,
// tiny_gguf.py): bit-identical logits, so the stacked experts are
// converted as MLX converts them and run through gather_qmm the same way.
func TestGGUFQuantizedExpertsEqualMLXReader(t *testing.T) {
	tinyGGUF(t, "qwen3_moe-f32")
	dir := filepath.Join(oracleDir(), "gguf", "qwen3_moe-q8_0")
	file := dir + ".gguf"
	writeTinyGGUF(t, filepath.Join(dir, "model.safetensors"))
	if info := equalLoads(t, dir, file); !strings.Contains(info.Quantization, "override") {
		t.Fatalf("quantization %q: want 8-bit with the 4-bit experts as overrides", info.Quantization)
	}
}

// equalLoads requires the safetensors directory and the GGUF file to give
// the same model: the same info and bit-identical logits over a 24-token
// prefill and 8 greedy decode steps.
func equalLoads(t *testing.T, dir, file string) (info models.Info) {
	t.Helper()
	mlxtest.Do(t, func() error {
		st, err := models.Load(dir, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer st.Close()
		gg, err := models.Load(file, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer gg.Close()
		si, gi := st.Info(), gg.Info()
		info = gi
		if si.ModelType != gi.ModelType || si.VocabSize != gi.VocabSize || si.NumLayers != gi.NumLayers ||
			si.ContextLength != gi.ContextLength || si.Dtype != gi.Dtype || si.Quantization != gi.Quantization ||
			gi.Format != "gguf" {
			return fmt.Errorf("info: safetensors %+v, gguf %+v", si, gi)
		}
		a, b := newStepper(st), newStepper(gg)
		defer a.close()
		defer b.close()
		in := make([]int32, 24)
		for i := range in {
			in[i] = int32((i*37 + 11) % si.VocabSize)
		}
		for step := range 9 {
			ra, err := a.step(in)
			if err != nil {
				return err
			}
			rb, err := b.step(in)
			if err != nil {
				return err
			}
			for i := range ra {
				if math.Float32bits(ra[i]) != math.Float32bits(rb[i]) {
					return fmt.Errorf("step %d: logit %d is %v from GGUF, %v from safetensors", step, i, rb[i], ra[i])
				}
			}
			in = []int32{int32(argmax(ra))}
		}
		return nil
	})
	return info
}
