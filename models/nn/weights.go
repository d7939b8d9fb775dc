// Package nn holds what every architecture package builds its model from:
// the checkpoint's weights as one loader reads them for every model family
// (Weights: safetensors or GGUF, strict about unused tensors, quantized per
// module), and the layers mlx-lm's nn gives its models (Linear, Embedding,
// RoPE). It must never hold one architecture's choices: those live in that
// architecture's package (models/llama, models/qwen3, ...).
//
// Everything that touches MLX runs on the executor (inside mlx.Do). Weights
// are detached from scopes and freed by Weights.Free.
package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// Tensor makes one named tensor into an MLX array on demand, so that
// only the tensors a model uses are copied into MLX.
type Tensor struct {
	Shape []int
	Dtype string // MLX dtype name
	Load  func() (*mlx.Array, error)
}

// Weights is the named tensors of a checkpoint as the architecture code
// takes them: it records the first error (so builders read like the module
// tree), which tensors were used (mlx-lm loads strictly: an unused tensor is
// an error), and every array made, for Free.
type Weights struct {
	// GGUF: the tensors come from a GGUF file, with llama.cpp's converter's
	// conventions (gemma's norms stored as 1 + weight, say).
	GGUF bool

	src     map[string]Tensor
	used    map[string]bool
	dropped map[string]bool
	arrays  []*mlx.Array
	err     error
	quant   *Quantization
	// pack: repack quantized linear weights for mlxgo's CPU kernels, which
	// run when they are selected and the default device is the CPU.
	pack bool
	// adapters: the LoRA adapters linear layers take (SetAdapters); nil: none.
	adapters *Adapters
	// cast, when cast.set, is the dtype every floating-point tensor is
	// taken as (CastTo).
	cast struct {
		set bool
		dt  mlx.Dtype
	}
}

// CastTo makes Get return every floating-point tensor (weights, quantization
// scales and biases, norms) as dt: mlx-lm's model.set_dtype(dt) after
// load, so a sanitize()'s rewrites (Transform, Stack) run on the stored
// dtype first, as they do there. Integer tensors (packed quantized weights)
// are left as they are.
func (ws *Weights) CastTo(dt mlx.Dtype) {
	ws.cast.set, ws.cast.dt = true, dt
}

// NewWeights takes the tensors of a checkpoint and its quantization (nil:
// none; see moduleQuant).
func NewWeights(src map[string]Tensor, q *Quantization) *Weights {
	return &Weights{src: src, used: map[string]bool{}, dropped: map[string]bool{}, quant: q, pack: mlx.CPUPacking()}
}

// Safetensors is the tensors of a safetensors set as Weights reads them. MLX
// copies each tensor's bytes when it is loaded, and the mapped pages are
// released then rather than when the whole model is built; the set must stay
// open until the model is.
func Safetensors(set *safetensors.Set) map[string]Tensor {
	src := map[string]Tensor{}
	for _, name := range set.Names() {
		t, _ := set.Tensor(name)
		dt := t.DType.MLX()
		src[name] = Tensor{Shape: t.Shape, Dtype: dt, Load: func() (*mlx.Array, error) {
			if dt == "" {
				return nil, fmt.Errorf("tensor dtype %s is not supported", t.DType)
			}
			d, err := mlx.ParseDtype(dt)
			if err != nil {
				return nil, err
			}
			a := mlx.FromBytes(t.Data, d, t.Shape...)
			set.Release(name)
			return a, nil
		}}
	}
	return src
}

// Rename re-keys every tensor by name(old), before any is taken (BERT's "bert." prefix, say), and the quantization's per-module entries
// by the same function: name edits prefixes, so it maps module paths as it
// maps the tensor names under them.
func (ws *Weights) Rename(name func(string) string) {
	src := make(map[string]Tensor, len(ws.src))
	for k, t := range ws.src {
		src[name(k)] = t
	}
	dropped := make(map[string]bool, len(ws.dropped))
	for k := range ws.dropped {
		dropped[name(k)] = true
	}
	ws.src, ws.dropped = src, dropped
	if ws.quant != nil && len(ws.quant.Modules) > 0 {
		q := *ws.quant
		q.Modules = make(map[string]*mlx.Quant, len(ws.quant.Modules))
		for k, m := range ws.quant.Modules {
			q.Modules[name(k)] = m
		}
		ws.quant = &q
	}
}

// Err is the first error met taking weights.
func (ws *Weights) Err() error { return ws.err }

// Has reports whether the checkpoint has a tensor of that name (not dropped).
func (ws *Weights) Has(name string) bool {
	_, ok := ws.src[name]
	return ok && !ws.dropped[name]
}

// Shape is a tensor's shape, without loading it.
func (ws *Weights) Shape(name string) ([]int, bool) {
	s, ok := ws.src[name]
	if !ok || ws.dropped[name] {
		return nil, false
	}
	return s.Shape, true
}

// Drop removes tensors the way an mlx-lm sanitize() pops them.
func (ws *Weights) Drop(match func(name string) bool) {
	for name := range ws.src {
		if match(name) {
			ws.dropped[name] = true
		}
	}
}

// Fail records err unless an error is recorded already.
func (ws *Weights) Fail(err error) {
	if ws.err == nil {
		ws.err = err
	}
}

// Get returns the named tensor as an array owned by the model, checking its
// shape when want is given (-1 matches any size).
func (ws *Weights) Get(name string, want ...int) *mlx.Array {
	if ws.err != nil {
		return nil
	}
	s, ok := ws.src[name]
	if !ok || ws.dropped[name] {
		ws.Fail(fmt.Errorf("cannot find weight %s", name))
		return nil
	}
	if want != nil && !shapeMatches(s.Shape, want) {
		ws.Fail(fmt.Errorf("weight %s has shape %v, want %v", name, s.Shape, want))
		return nil
	}
	a, err := s.Load()
	if err == nil {
		err = a.Err()
	}
	if err == nil && ws.cast.set && a.Dtype().IsFloat() && a.Dtype() != ws.cast.dt {
		// Evaluated now, so the stored tensor's memory goes before the
		// next is loaded rather than at the first step.
		c := mlx.AsType(a, ws.cast.dt)
		err = mlx.Eval(c)
		a.Free()
		a = c
	}
	if err != nil {
		ws.Fail(fmt.Errorf("cannot load weight %s: %w", name, err))
		return nil
	}
	detach(a)
	ws.used[name] = true
	ws.arrays = append(ws.arrays, a)
	return a
}

// Keep hands an array computed at load time (1 + norm weight, rope
// frequencies) to the model so Close frees it.
func (ws *Weights) Keep(a *mlx.Array) *mlx.Array {
	if ws.err != nil {
		return a
	}
	if err := a.Err(); err != nil {
		ws.Fail(err)
		return a
	}
	detach(a)
	ws.arrays = append(ws.arrays, a)
	return a
}

func shapeMatches(got, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if want[i] >= 0 && got[i] != want[i] {
			return false
		}
	}
	return true
}

// Finish reports the first error or, like mlx-lm's strict load_weights,
// the tensors the checkpoint has and the model does not use.
func (ws *Weights) Finish() error {
	if ws.err != nil {
		return ws.err
	}
	if err := ws.adapters.leftovers(); err != nil {
		return err
	}
	var extra []string
	for name := range ws.src {
		if !ws.used[name] && !ws.dropped[name] {
			extra = append(extra, name)
		}
	}
	return UnusedWeightsError(extra)
}

// UnusedWeightsError is nil for no names, else an error naming (up to five
// of) the checkpoint's weights no layer took, like mlx-lm's strict
// load_weights: a checkpoint of another variant must not load silently.
func UnusedWeightsError(names []string) error {
	if len(names) == 0 {
		return nil
	}
	names = slices.Sorted(slices.Values(names))
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return fmt.Errorf("checkpoint has weights the model does not use: %s", strings.Join(names, ", "))
}

// Release frees arrays the set made that the model no longer needs.
func (ws *Weights) Release(arrs ...*mlx.Array) {
	for _, a := range arrs {
		if i := slices.Index(ws.arrays, a); i >= 0 {
			ws.arrays = slices.Delete(ws.arrays, i, i+1)
		}
		a.Free()
	}
}

// Free releases every array the set made.
func (ws *Weights) Free() {
	for _, a := range ws.arrays {
		a.Free()
	}
	ws.arrays = nil
}

// detach takes a weight out of the caller's scope: weights live until Close.
func detach(a *mlx.Array) { mlx.Detach(a) }

// Stack makes the tensors srcs one tensor dst, stacked along a new first
// axis, the way a sanitize() replaces them with mx.stack (mixture-of-experts
// checkpoints with one tensor per expert); srcs are popped. Nothing is
// loaded until dst is taken.
func (ws *Weights) Stack(dst string, srcs []string) {
	if ws.err != nil {
		return
	}
	if len(srcs) == 0 {
		ws.Fail(fmt.Errorf("cannot make %s of no tensors", dst))
		return
	}
	parts := make([]Tensor, len(srcs))
	for i, name := range srcs {
		t, ok := ws.src[name]
		if !ok || ws.dropped[name] {
			ws.Fail(fmt.Errorf("cannot find weight %s", name))
			return
		}
		if i > 0 && (!slices.Equal(t.Shape, parts[0].Shape) || t.Dtype != parts[0].Dtype) {
			ws.Fail(fmt.Errorf("cannot stack %s: %s has shape %v %s, %s %v %s", dst, name, t.Shape, t.Dtype, srcs[0], parts[0].Shape, parts[0].Dtype))
			return
		}
		parts[i] = t
	}
	ws.Drop(func(n string) bool { return slices.Contains(srcs, n) })
	ws.src[dst] = Tensor{Shape: append([]int{len(srcs)}, parts[0].Shape...), Dtype: parts[0].Dtype, Load: func() (*mlx.Array, error) {
		arrs := make([]*mlx.Array, len(parts))
		defer func() {
			for _, a := range arrs {
				if a != nil {
					a.Free()
				}
			}
		}()
		for i, t := range parts {
			a, err := t.Load()
			if err != nil {
				return nil, err
			}
			arrs[i] = a
		}
		out := mlx.Stack(arrs, 0)
		return out, mlx.Eval(out)
	}}
}

// Transform replaces each tensor match picks by f of it, the way a
// sanitize() rewrites a tensor in place (a moved axis, say); match returns
// the new shape. Nothing is loaded until the tensor is taken.
func (ws *Weights) Transform(match func(name string, shape []int) ([]int, bool), f func(*mlx.Array) *mlx.Array) {
	for name, t := range ws.src {
		if ws.dropped[name] {
			continue
		}
		shape, ok := match(name, t.Shape)
		if !ok {
			continue
		}
		load := t.Load
		ws.src[name] = Tensor{Shape: shape, Dtype: t.Dtype, Load: func() (*mlx.Array, error) {
			a, err := load()
			if err != nil {
				return nil, err
			}
			defer a.Free()
			out := f(a)
			return out, mlx.Eval(out)
		}}
	}
}

// Split replaces src by len(dsts) equal parts along axis (negative counts
// from the end), the way a sanitize() slices a fused tensor (a mixture of
// experts' gate_up_proj into gate and up); src is popped. Nothing is
// loaded until a part is taken.
//
// Each part is a contiguous copy (mx.contiguous), never a strided view of
// src: on a GPU the layout picks MLX's kernel, and the sorted gather_mm of
// MLX 0.32.4's CUDA backend (a CUTLASS grouped GEMM) takes an expert's
// offset from the part's shape, not its stride, so a view computes with the
// wrong experts (4.8 off on the tiny shapes, testdata/gpu/moe_probe.py).
// mlx-lm's gemma4 sanitize copies too; its qwen3_5_moe keeps the slices and
// so computes a Hugging Face checkpoint's prefill wrongly there (README,
// "The CUDA pack"). On the CPU both layouts give the same bits.
func (ws *Weights) Split(src string, axis int, dsts ...string) {
	if ws.err != nil {
		return
	}
	t, ok := ws.src[src]
	if !ok || ws.dropped[src] {
		ws.Fail(fmt.Errorf("cannot find weight %s", src))
		return
	}
	if axis < 0 {
		axis += len(t.Shape)
	}
	if axis < 0 || axis >= len(t.Shape) || len(dsts) == 0 || t.Shape[axis]%len(dsts) != 0 {
		ws.Fail(fmt.Errorf("cannot split %s of shape %v into %d parts along axis %d", src, t.Shape, len(dsts), axis))
		return
	}
	ws.dropped[src] = true
	n := t.Shape[axis] / len(dsts)
	for i, dst := range dsts {
		shape := slices.Clone(t.Shape)
		shape[axis] = n
		ws.src[dst] = Tensor{Shape: shape, Dtype: t.Dtype, Load: func() (*mlx.Array, error) {
			a, err := t.Load()
			if err != nil {
				return nil, err
			}
			defer a.Free()
			out := splitPart(a, axis, i, n)
			return out, mlx.Eval(out)
		}}
	}
}

// splitPart is part i (n wide along axis) of a, copied out.
func splitPart(a *mlx.Array, axis, i, n int) *mlx.Array {
	start, stop := make([]int, a.Ndim()), a.Shape()
	start[axis], stop[axis] = i*n, (i+1)*n
	view := mlx.Slice(a, start, stop)
	defer view.Free()
	return mlx.Contiguous(view)
}
