package nn

import "github.com/mlxgo/mlxgo/mlx"

// SwitchLinear is switch_layers.py's SwitchLinear or QuantizedSwitchLinear:
// one linear per expert, weight [experts, out, in], applied to the expert
// each index picks (gather_mm / gather_qmm).
type SwitchLinear struct {
	weight, scales, biases *mlx.Array
	q                      *mlx.Quant
	bias                   *mlx.Array // [experts, out], or nil
}

// SwitchLinear takes module path's stacked expert weights without a bias,
// quantized when the checkpoint says so.
func (ws *Weights) SwitchLinear(path string, in, out, experts int) *SwitchLinear {
	return ws.switchLinear(path, in, out, experts, false)
}

func (ws *Weights) switchLinear(path string, in, out, experts int, bias bool) *SwitchLinear {
	if ws.err != nil {
		return nil
	}
	q, err := moduleQuant(ws.quant, path, in, ws)
	if err != nil {
		ws.Fail(err)
		return nil
	}
	l := &SwitchLinear{q: q}
	if q != nil {
		l.weight = ws.Get(path+".weight", experts, out, in*q.Bits/32)
		l.scales = ws.Get(path+".scales", experts, out, in/q.GroupSize)
		if q.Mode == "affine" || q.Mode == "" {
			l.biases = ws.Get(path+".biases", experts, out, in/q.GroupSize)
		}
	} else {
		l.weight = ws.Get(path+".weight", experts, out, in)
	}
	if bias {
		l.bias = ws.Get(path+".bias", experts, out)
	}
	return l
}

// Apply is SwitchLinear.__call__: x [..., 1, in] through the experts
// indices names.
func (l *SwitchLinear) Apply(x, indices *mlx.Array, sorted bool) *mlx.Array {
	var y *mlx.Array
	if l.q != nil {
		y = mlx.GatherQMM(x, l.weight, l.scales, l.biases, nil, indices, true, *l.q, sorted)
	} else {
		y = mlx.GatherMM(x, mlx.SwapAxes(l.weight, -1, -2), nil, indices, sorted)
	}
	if l.bias != nil {
		// x + expand_dims(bias[indices], -2)
		y = mlx.Add(y, mlx.ExpandDims(mlx.Take(l.bias, indices, 0), -2))
	}
	return y
}

// SwitchGLU is switch_layers.py's SwitchGLU: each token through its top-k
// experts' gated MLPs, activation(up, gate) between them (SwiGLU unless
// SwitchGLUWith says otherwise).
type SwitchGLU struct {
	gate, up, down *SwitchLinear
	act            func(x, gate *mlx.Array) *mlx.Array
}

// SwitchGLU takes gate_proj, up_proj and down_proj under path.
func (ws *Weights) SwitchGLU(path string, hidden, width, experts int) *SwitchGLU {
	return ws.SwitchGLUWith(path, hidden, width, experts, false, nil)
}

// SwitchGLUWith is SwitchGLU with biased experts (bias) and its own
// activation act(x, gate) (nil: SwiGLU), as gpt_oss's SwigluOAI.
func (ws *Weights) SwitchGLUWith(path string, hidden, width, experts int, bias bool, act func(x, gate *mlx.Array) *mlx.Array) *SwitchGLU {
	if act == nil {
		act = func(x, gate *mlx.Array) *mlx.Array { return mlx.SwiGLU(gate, x) }
	}
	return &SwitchGLU{
		gate: ws.switchLinear(path+"gate_proj", hidden, width, experts, bias),
		up:   ws.switchLinear(path+"up_proj", hidden, width, experts, bias),
		down: ws.switchLinear(path+"down_proj", width, hidden, experts, bias),
		act:  act,
	}
}

// Apply is SwitchGLU.__call__: x [..., hidden], indices [..., k] give
// [..., k, hidden]. With 64 indices or more the tokens are sorted by expert
// first and unsorted after, as mlx-lm does (the condition counts every
// index, so a batch of rows takes the same path a prompt of as many tokens
// would).
func (s *SwitchGLU) Apply(x, indices *mlx.Array) *mlx.Array {
	x = mlx.ExpandDims(x, -2, -3)
	indices = mlx.StopGradient(indices)
	sorted := indices.Size() >= 64
	idx := indices
	var inv *mlx.Array
	if sorted {
		x, idx, inv = gatherSort(x, indices)
	}
	up := s.up.Apply(x, idx, sorted)
	gate := s.gate.Apply(x, idx, sorted)
	x = s.down.Apply(s.act(up, gate), idx, sorted)
	if sorted {
		x = scatterUnsort(x, inv, indices.Shape())
	}
	return mlx.Squeeze(x, -2)
}

// gatherSort is switch_layers._gather_sort: the rows of x (one per token,
// repeated per index) in the order of their expert indices.
func gatherSort(x, indices *mlx.Array) (xs, idx, inv *mlx.Array) {
	sh := indices.Shape()
	m := sh[len(sh)-1]
	flat := mlx.Flatten(indices, 0, -1)
	order := mlx.Argsort(flat, -1)
	inv = mlx.Argsort(order, -1)
	rows := mlx.FloorDivide(order, mlx.ScalarInt(int64(m), order.Dtype()))
	return mlx.Take(mlx.Flatten(x, 0, -3), rows, 0), mlx.Take(flat, order, 0), inv
}

// scatterUnsort is switch_layers._scatter_unsort: x back in token order,
// its first axis unflattened to shape.
func scatterUnsort(x, inv *mlx.Array, shape []int) *mlx.Array {
	x = mlx.Take(x, inv, 0)
	return mlx.Reshape(x, append(append([]int(nil), shape...), x.Shape()[1:]...)...)
}
