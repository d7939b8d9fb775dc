package models_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// TestQwen3MoEPerExpertWeights: a Hugging Face checkpoint stores one tensor
// per expert (mlp.experts.E.up_proj.weight ...); qwen3_moe's sanitize stacks
// them into switch_mlp, so the same weights written that way give the same
// logits bit for bit.
func TestQwen3MoEPerExpertWeights(t *testing.T) {
	mlxtest.Need(t)
	src := tinyModel(t, "qwen3_moe-f32")
	dst := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dst, "config.json"), cfg, 0o644))
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	must(t, err)
	defer f.Close()
	header := map[string]any{}
	var data []byte
	add := func(name string, dt safetensors.DType, shape []int, b []byte) {
		header[name] = map[string]any{"dtype": string(dt), "shape": shape, "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	split := 0
	for _, ti := range f.Tensors {
		b := f.Data(ti)
		pre, rest, ok := strings.Cut(ti.Name, ".switch_mlp.")
		if !ok {
			add(ti.Name, ti.DType, ti.Shape, b)
			continue
		}
		n := len(b) / ti.Shape[0]
		for e := range ti.Shape[0] {
			add(fmt.Sprintf("%s.experts.%d.%s", pre, e, rest), ti.DType, ti.Shape[1:], b[e*n:(e+1)*n])
		}
		split++
	}
	if split == 0 {
		t.Fatal("the tiny model has no switch_mlp tensors")
	}
	hdr, err := json.Marshal(header)
	must(t, err)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	file := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), hdr...)
	must(t, os.WriteFile(filepath.Join(dst, "model.safetensors"), append(file, data...), 0o644))

	mlxtest.Do(t, func() error {
		var logits [][]float32
		for _, dir := range []string{src, dst} {
			m, err := models.Load(dir, models.LoadOptions{})
			if err != nil {
				return err
			}
			v, err := m.Forward(mlx.FromSlice(rowIDs(40, 0, 512), 1, 40), nil).Float32s()
			m.Close()
			if err != nil {
				return err
			}
			logits = append(logits, v)
		}
		if d := maxAbsDiff(logits[0], logits[1]); d != 0 {
			return fmt.Errorf("per-expert weights: max abs diff %g against the stacked ones, want 0", d)
		}
		return nil
	})
}
