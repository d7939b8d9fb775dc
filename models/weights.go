package models

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
)

// tensorSource makes one named tensor into an MLX array on demand, so that
// only the tensors a model uses are copied into MLX.
type tensorSource struct {
	shape []int
	dtype string // MLX dtype name
	load  func() (*mlx.Array, error)
}

// weightSet is the named tensors of a checkpoint as the architecture code
// takes them: it records the first error (so builders read like the module
// tree), which tensors were used (mlx-lm loads strictly: an unused tensor is
// an error), and every array made, for Close.
type weightSet struct {
	src     map[string]tensorSource
	used    map[string]bool
	dropped map[string]bool
	arrays  []*mlx.Array
	err     error
	quant   *Quantization
	// pack: repack quantized linear weights for mlxgo's CPU kernels, which
	// run when they are selected and the default device is the CPU.
	pack bool
}

func newWeightSet(src map[string]tensorSource, q *Quantization) *weightSet {
	return &weightSet{src: src, used: map[string]bool{}, dropped: map[string]bool{}, quant: q, pack: mlx.CPUPacking()}
}

func (ws *weightSet) has(name string) bool {
	_, ok := ws.src[name]
	return ok && !ws.dropped[name]
}

func (ws *weightSet) shape(name string) ([]int, bool) {
	s, ok := ws.src[name]
	if !ok || ws.dropped[name] {
		return nil, false
	}
	return s.shape, true
}

// drop removes tensors the way an mlx-lm sanitize() pops them.
func (ws *weightSet) drop(match func(name string) bool) {
	for name := range ws.src {
		if match(name) {
			ws.dropped[name] = true
		}
	}
}

func (ws *weightSet) fail(err error) {
	if ws.err == nil {
		ws.err = err
	}
}

// get returns the named tensor as an array owned by the model, checking its
// shape when want is given (-1 matches any size).
func (ws *weightSet) get(name string, want ...int) *mlx.Array {
	if ws.err != nil {
		return nil
	}
	s, ok := ws.src[name]
	if !ok || ws.dropped[name] {
		ws.fail(fmt.Errorf("cannot find weight %s", name))
		return nil
	}
	if want != nil && !shapeMatches(s.shape, want) {
		ws.fail(fmt.Errorf("weight %s has shape %v, want %v", name, s.shape, want))
		return nil
	}
	a, err := s.load()
	if err == nil {
		err = a.Err()
	}
	if err != nil {
		ws.fail(fmt.Errorf("cannot load weight %s: %w", name, err))
		return nil
	}
	detach(a)
	ws.used[name] = true
	ws.arrays = append(ws.arrays, a)
	return a
}

// keepArray hands an array computed at load time (1 + norm weight, rope
// frequencies) to the model so Close frees it.
func (ws *weightSet) keepArray(a *mlx.Array) *mlx.Array {
	if ws.err != nil {
		return a
	}
	if err := a.Err(); err != nil {
		ws.fail(err)
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

// finish reports the first error or, like mlx-lm's strict load_weights,
// the tensors the checkpoint has and the model does not use.
func (ws *weightSet) finish() error {
	if ws.err != nil {
		return ws.err
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

// release frees arrays the set made that the model no longer needs.
func (ws *weightSet) release(arrs ...*mlx.Array) {
	for _, a := range arrs {
		if i := slices.Index(ws.arrays, a); i >= 0 {
			ws.arrays = slices.Delete(ws.arrays, i, i+1)
		}
		a.Free()
	}
}

// free releases every array the set made.
func (ws *weightSet) free() {
	for _, a := range ws.arrays {
		a.Free()
	}
	ws.arrays = nil
}

// detach takes a weight out of the caller's scope: weights live until Close.
func detach(a *mlx.Array) { mlx.Detach(a) }
