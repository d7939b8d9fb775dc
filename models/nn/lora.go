package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
)

// LoRA adapters as mlx-lm 0.32.2 applies them to linear layers
// (mlx_lm/tuner/lora.py LoRALinear, tuner/dora.py DoRALinear): unfused, each
// adapted Linear adds its low-rank update to its own output, op for op as
// LoRALinear.__call__ does, for the rows of the forward pass whose adapter
// it is; fused, the update is folded into the weight at load time as
// LoRALinear.fuse does (mlx_lm.fuse). models/lora reads the adapters' files
// and decides which modules each adapts.

// AdapterSource is one adapter as Weights applies it.
type AdapterSource struct {
	Name  string
	Scale float64 // lora_parameters.scale
	DoRA  bool    // fine_tune_type "dora"
	// Adapts is linear_to_lora_layers's choice: whether the module at path
	// becomes a LoRA (DoRA) layer. Its update is then the tensors
	// path.lora_a [in, r], path.lora_b [r, out] (and path.m [out] for DoRA).
	Adapts func(path string) bool
	// Tensors are adapters.safetensors' tensors by name.
	Tensors map[string]Tensor
}

// Adapters is the adapters of one model and, while a forward pass runs, the
// adapter of each of its rows (Select). The selection is shared by every
// adapted Linear: all of a model's work runs on the one MLX executor, one
// forward pass at a time.
type Adapters struct {
	srcs []AdapterSource
	fuse bool
	used []map[string]bool // per adapter: the tensors a layer took
	rows []int             // per row: an index into srcs, or -1 for none
}

// SetAdapters makes the linear layers taken from now on adapted by srcs:
// fused into their weights (one adapter only) or applied per row, as the
// returned Adapters selects. Call it before the architecture takes its
// weights.
func (ws *Weights) SetAdapters(srcs []AdapterSource, fuse bool) (*Adapters, error) {
	if fuse && len(srcs) != 1 {
		return nil, fmt.Errorf("cannot fuse %d adapters into one model: fuse one", len(srcs))
	}
	a := &Adapters{srcs: srcs, fuse: fuse}
	for range srcs {
		a.used = append(a.used, map[string]bool{})
	}
	ws.adapters = a
	return a, nil
}

// Len is the number of adapters.
func (a *Adapters) Len() int { return len(a.srcs) }

// Select sets the adapter of each row of the next forward pass: rows[r] is
// an index into the adapters (SetAdapters' order) or -1 for none. One entry
// stands for every row (a single sequence). Select(nil) is no adapter.
func (a *Adapters) Select(rows []int) { a.rows = rows }

// update is one adapter's update of one linear layer.
type update struct {
	a, b  *mlx.Array // lora_a [in, r], lora_b [r, out]
	m     *mlx.Array // DoRA's magnitude [out]; nil: LoRA
	scale float64
}

// adapted is what an adapted Linear keeps: each adapter's update (nil: that
// adapter leaves the layer alone) and the selection to read.
type adapted struct {
	sel     *Adapters
	updates []*update
}

// adapts reports whether an adapter has an update for the module at path.
func (a *Adapters) adapts(path string) bool {
	for _, s := range a.srcs {
		if s.Adapts(path) && hasAny(s.Tensors, path) {
			return true
		}
	}
	return false
}

func hasAny(ts map[string]Tensor, path string) bool {
	for _, leaf := range []string{".lora_a", ".lora_b", ".m"} {
		if _, ok := ts[path+leaf]; ok {
			return true
		}
	}
	return false
}

// adaptLinear gives l (module path, in -> out) its adapters' updates, or
// folds the one adapter into its weights when fusing.
func (ws *Weights) adaptLinear(l *Linear, path string, in, out int) {
	ad := ws.adapters
	var ups []*update
	for i, s := range ad.srcs {
		if !s.Adapts(path) || !hasAny(s.Tensors, path) {
			// A wrapped module without tensors keeps mlx-lm's zero lora_b:
			// no update. Tensors of a module not wrapped are left for
			// Finish to report.
			ups = append(ups, nil)
			continue
		}
		u := &update{scale: s.Scale}
		u.a = ws.adapterTensor(i, path+".lora_a", in, -1)
		if u.a != nil {
			u.b = ws.adapterTensor(i, path+".lora_b", u.a.Dim(1), out)
		}
		if s.DoRA {
			u.m = ws.adapterTensor(i, path+".m", out)
		} else if _, ok := s.Tensors[path+".m"]; ok {
			ws.Fail(fmt.Errorf("adapter %s: %s.m is a DoRA magnitude, and adapter_config.json says fine_tune_type lora", s.Name, path))
		}
		ups = append(ups, u)
	}
	if ws.err != nil {
		return
	}
	if ad.fuse {
		if ups[0] != nil {
			ws.fuseUpdate(l, ups[0])
		}
		return
	}
	if slices.ContainsFunc(ups, func(u *update) bool { return u != nil }) {
		l.lora = &adapted{sel: ad, updates: ups}
	}
}

// adapterTensor is Get for adapter i's tensors.
func (ws *Weights) adapterTensor(i int, name string, want ...int) *mlx.Array {
	if ws.err != nil {
		return nil
	}
	s := ws.adapters.srcs[i]
	t, ok := s.Tensors[name]
	if !ok {
		ws.Fail(fmt.Errorf("adapter %s has no %s", s.Name, name))
		return nil
	}
	if !shapeMatches(t.Shape, want) {
		ws.Fail(fmt.Errorf("adapter %s: %s has shape %v, the model wants %v", s.Name, name, t.Shape, want))
		return nil
	}
	a, err := t.Load()
	if err == nil {
		err = a.Err()
	}
	if err != nil {
		ws.Fail(fmt.Errorf("adapter %s: cannot load %s: %w", s.Name, name, err))
		return nil
	}
	ws.adapters.used[i][name] = true
	return ws.Keep(a)
}

// refuseAdapted fails when an adapter has an update for a module that is
// not a linear layer here (an embedding: mlx-lm's LoRAEmbedding).
func (ws *Weights) refuseAdapted(path, kind string) {
	if ad := ws.adapters; ad != nil && ad.adapts(path) {
		ws.Fail(fmt.Errorf("cannot apply a LoRA adapter to the %s %s: only linear layers take adapters in mlxgo", kind, path))
	}
}

// adapterLeftovers is Finish's check, as load_adapters': every tensor of an
// adapter must be an update some layer took.
func (a *Adapters) leftovers() error {
	if a == nil {
		return nil
	}
	for i, s := range a.srcs {
		var extra []string
		for name := range s.Tensors {
			if !a.used[i][name] {
				extra = append(extra, name)
			}
		}
		if len(extra) > 0 {
			slices.Sort(extra)
			if len(extra) > 5 {
				extra = append(extra[:5], fmt.Sprintf("and %d more", len(extra)-5))
			}
			return fmt.Errorf("adapter %s has tensors that are not adapter parameters of this model (a module its adapter_config.json does not adapt, or one mlxgo cannot): %s",
				s.Name, strings.Join(extra, ", "))
		}
	}
	return nil
}

// dense is the layer's weight as DoRA and fusing read it: dequantized (in
// the scales' dtype) when quantized.
func (l *Linear) dense() *mlx.Array {
	if l.q != nil {
		return mlx.Dequantize(l.weight, l.scales, l.biases, *l.q)
	}
	return l.weight
}

// fuseUpdate is LoRALinear.fuse / DoRALinear.fuse with dequantize=False:
// the weight (dequantized) plus (scale * lora_b.T) @ lora_a.T in the
// weight's dtype (DoRA: then scaled to the magnitude m), quantized again
// with the layer's own scheme.
func (ws *Weights) fuseUpdate(l *Linear, u *update) {
	w := l.dense()
	delta := mlx.Matmul(mlx.Multiply(scalarOf(u.scale, u.b), mlx.Transpose(u.b)), mlx.Transpose(u.a))
	fused := mlx.Add(w, mlx.AsType(delta, w.Dtype()))
	if u.m != nil {
		norm := mlx.Divide(u.m, l2Norm(fused))
		fused = mlx.Multiply(mlx.ExpandDims(norm, 1), fused)
	}
	old := []*mlx.Array{l.weight, l.scales, l.biases}
	if l.q != nil {
		l.weight, l.scales, l.biases = mlx.Quantize(fused, *l.q)
	} else {
		l.weight = fused
	}
	// Evaluated now, so that the model holds the fused weight only.
	var keep []*mlx.Array
	for _, a := range []*mlx.Array{l.weight, l.scales, l.biases} {
		if a != nil {
			keep = append(keep, ws.Keep(a))
		}
	}
	if err := mlx.Eval(keep...); err != nil {
		ws.Fail(fmt.Errorf("cannot fuse the adapter: %w", err))
		return
	}
	var free []*mlx.Array
	for _, a := range old {
		if a != nil {
			free = append(free, a)
		}
	}
	ws.Release(free...)
	ws.Release(u.a, u.b)
	if u.m != nil {
		ws.Release(u.m)
	}
}

// l2Norm is mx.linalg.norm(w, axis=1): sqrt(sum(square(w), 1)).
func l2Norm(w *mlx.Array) *mlx.Array {
	return mlx.Sqrt(mlx.Sum(mlx.Square(w), []int{1}, false))
}

// scalarOf is a Python float in an op with a (MLX gives it a's dtype).
func scalarOf(v float64, a *mlx.Array) *mlx.Array { return mlx.Scalar(float32(v), a.Dtype()) }

// apply is the adapted layer's output: each run of rows with the same
// adapter gets that adapter's update (the base output alone for rows
// without one), so that every row is what it would be run alone.
func (ad *adapted) apply(l *Linear, x *mlx.Array) *mlx.Array {
	rows := ad.sel.rows
	if len(rows) <= 1 {
		i := -1
		if len(rows) == 1 {
			i = rows[0]
		}
		return ad.one(l, x, nil, i)
	}
	n := x.Dim(0)
	if n != len(rows) {
		return mlx.ErrorArray(fmt.Errorf("cannot apply adapters: %d rows selected for an input of %d", len(rows), n))
	}
	var y *mlx.Array // the base output of all rows, when some row reads it
	for _, i := range rows {
		if i < 0 || ad.updates[i] == nil || ad.updates[i].m == nil {
			y = l.apply(x)
			break
		}
	}
	var parts []*mlx.Array
	for start := 0; start < n; {
		stop := start + 1
		for stop < n && rows[stop] == rows[start] {
			stop++
		}
		var ys *mlx.Array
		if y != nil {
			ys = rowsOf(y, start, stop)
		}
		parts = append(parts, ad.one(l, rowsOf(x, start, stop), ys, rows[start]))
		start = stop
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return mlx.Concatenate(parts, 0)
}

// one is the layer's output for rows x of adapter i (-1: none); y, when
// not nil, is their base output.
func (ad *adapted) one(l *Linear, x, y *mlx.Array, i int) *mlx.Array {
	var u *update
	if i >= 0 && i < len(ad.updates) {
		u = ad.updates[i]
	}
	if u != nil && u.m != nil {
		return u.dora(l, x)
	}
	if y == nil {
		y = l.apply(x)
	}
	if u == nil {
		return y
	}
	// LoRALinear.__call__: y + (scale * ((x @ lora_a) @ lora_b)).astype(x.dtype)
	z := mlx.Matmul(mlx.Matmul(x, u.a), u.b)
	return mlx.Add(y, mlx.AsType(mlx.Multiply(z, scalarOf(u.scale, z)), x.Dtype()))
}

// dora is DoRALinear.__call__: the dense (dequantized) weight's output plus
// the LoRA update, rescaled to the magnitude m by the adapted weight's row
// norms, then the bias.
func (u *update) dora(l *Linear, x *mlx.Array) *mlx.Array {
	w := l.dense()
	y := mlx.Matmul(x, mlx.Transpose(w))
	z := mlx.Matmul(mlx.Matmul(x, u.a), u.b)
	out := mlx.Add(y, mlx.AsType(mlx.Multiply(z, scalarOf(u.scale, z)), x.Dtype()))
	adaptedW := mlx.Add(w, mlx.Matmul(mlx.Multiply(scalarOf(u.scale, u.b), mlx.Transpose(u.b)), mlx.Transpose(u.a)))
	out = mlx.Multiply(mlx.AsType(mlx.Divide(u.m, l2Norm(adaptedW)), x.Dtype()), out)
	if l.bias != nil {
		out = mlx.Add(out, l.bias)
	}
	return out
}

// rowsOf is x[start:stop] along the first axis.
func rowsOf(x *mlx.Array, start, stop int) *mlx.Array {
	sh := x.Shape()
	lo, hi := make([]int, len(sh)), slices.Clone(sh)
	lo[0], hi[0] = start, stop
	return mlx.Slice(x, lo, hi)
}

// dora reports whether some adapter's update of the layer is DoRA's.
func (ad *adapted) dora() bool {
	return ad != nil && slices.ContainsFunc(ad.updates, func(u *update) bool { return u != nil && u.m != nil })
}
