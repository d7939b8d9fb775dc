package mlx

import (
	"fmt"
	"math"
)

// Check is one numeric smoke test of verify-native: an op computed by MLX and
// by a plain Go reference on the same small deterministic input.
type Check struct {
	Name      string  `json:"name"`
	OK        bool    `json:"ok"`
	MaxAbsErr float64 `json:"max_abs_err"`
	Tolerance float64 `json:"tolerance"`
	Detail    string  `json:"detail,omitempty"` // why it failed, or what was compared
}

// SelfTest runs the numeric smoke tests on the executor. Each tolerance is
// written beside its check with the reason for it; inputs are small, so
// float32 rounding differences between MLX's kernels and the float64 Go
// references stay far below them, while a wrong layout, axis or formula
// misses them by orders of magnitude.
func SelfTest() []Check {
	checks := []struct {
		name string
		tol  float64
		run  func() (got, want []float64, err error)
	}{
		// fp32 dot products of 8 terms of magnitude <1: rounding ~1e-6.
		{"matmul", 1e-5, checkMatmul},
		// exp/sum in fp32 on values in [-2, 2]: relative error ~1e-7.
		{"softmax", 1e-6, checkSoftmax},
		// one rsqrt and a multiply in fp32 over 16 values ~1: ~1e-6.
		{"rms_norm", 1e-5, checkRMSNorm},
		// angles up to 7 rad computed in fp32 (base^(-2i/d) and pos·θ): ~1e-6.
		{"rope", 2e-5, checkRoPE},
		// two small matmuls and a softmax in fp32: ~1e-6.
		{"scaled_dot_product_attention", 1e-5, checkSDPA},
		// the Go side quantizes with MLX's affine scheme (every packed level
		// must match exactly) and multiplies in float64; fp32 accumulation
		// over 64 terms of magnitude ~1: ~1e-5.
		{"quantize+quantized_matmul", 1e-4, checkQuantizedMatmul},
		// indices: exact.
		{"argmax", 0, checkArgmax},
	}
	out := make([]Check, 0, len(checks))
	for _, c := range checks {
		res := Check{Name: c.name, Tolerance: c.tol}
		var got, want []float64
		err := Do(func() error {
			s := NewScope()
			defer s.Close()
			var err error
			got, want, err = c.run()
			return err
		})
		switch {
		case err != nil:
			res.Detail = err.Error()
		case len(got) != len(want):
			res.Detail = fmt.Sprintf("mlx gave %d values, the reference %d", len(got), len(want))
		default:
			worst := 0
			for i := range got {
				d := math.Abs(got[i] - want[i])
				if d > res.MaxAbsErr || math.IsNaN(d) {
					res.MaxAbsErr, worst = d, i
				}
			}
			res.OK = res.MaxAbsErr <= c.tol && !math.IsNaN(res.MaxAbsErr)
			if res.OK {
				res.Detail = fmt.Sprintf("%d values within %g", len(got), c.tol)
			} else {
				res.Detail = fmt.Sprintf("value %d: mlx %g, reference %g", worst, got[worst], want[worst])
			}
		}
		out = append(out, res)
	}
	return out
}

// detRand is a small LCG: the same inputs on every machine, without
// math/rand's generator changing under us between Go versions.
type detRand uint64

func (r *detRand) next() float64 { // uniform in [-1, 1)
	*r = *r*6364136223846793005 + 1442695040888963407
	return float64(uint32(*r>>32))/(1<<31) - 1
}

func (r *detRand) fill(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.next() * scale)
	}
	return v
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func read(a *Array) ([]float64, error) {
	v, err := a.Float32s()
	return widen(v), err
}

// refMatmul multiplies row-major a [m,k] by b [k,n] in float64.
func refMatmul(a, b []float64, m, k, n int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += a[i*k+p] * b[p*n+j]
			}
			out[i*n+j] = s
		}
	}
	return out
}

func checkMatmul() ([]float64, []float64, error) {
	r := detRand(1)
	a, b := r.fill(4*8, 1), r.fill(8*3, 1)
	got, err := read(Matmul(FromSlice(a, 4, 8), FromSlice(b, 8, 3)))
	return got, refMatmul(widen(a), widen(b), 4, 8, 3), err
}

func refSoftmaxRows(x []float64, rows, cols int) []float64 {
	out := make([]float64, len(x))
	for i := 0; i < rows; i++ {
		row := x[i*cols : (i+1)*cols]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var s float64
		for j, v := range row {
			out[i*cols+j] = math.Exp(v - mx)
			s += out[i*cols+j]
		}
		for j := range row {
			out[i*cols+j] /= s
		}
	}
	return out
}

func checkSoftmax() ([]float64, []float64, error) {
	r := detRand(2)
	x := r.fill(3*7, 2)
	got, err := read(Softmax(FromSlice(x, 3, 7), []int{-1}, false))
	return got, refSoftmaxRows(widen(x), 3, 7), err
}

func checkRMSNorm() ([]float64, []float64, error) {
	r := detRand(3)
	const rows, d, eps = 2, 16, 1e-5
	x, w := r.fill(rows*d, 1.5), r.fill(d, 1)
	got, err := read(RMSNorm(FromSlice(x, rows, d), FromSlice(w), eps))
	xf, wf := widen(x), widen(w)
	want := make([]float64, len(xf))
	for i := 0; i < rows; i++ {
		var ss float64
		for j := 0; j < d; j++ {
			ss += xf[i*d+j] * xf[i*d+j]
		}
		inv := 1 / math.Sqrt(ss/d+eps)
		for j := 0; j < d; j++ {
			want[i*d+j] = xf[i*d+j] * inv * wf[j]
		}
	}
	return got, want, err
}

// refRoPE rotates the two halves of each d-vector (MLX's non-traditional
// layout) by pos·base^(-2i/d), positions starting at offset.
func refRoPE(x []float64, heads, seq, d int, base float64, offset int) []float64 {
	out := make([]float64, len(x))
	half := d / 2
	for h := 0; h < heads; h++ {
		for s := 0; s < seq; s++ {
			v := x[(h*seq+s)*d : (h*seq+s+1)*d]
			o := out[(h*seq+s)*d : (h*seq+s+1)*d]
			for i := 0; i < half; i++ {
				theta := float64(offset+s) * math.Pow(base, -2*float64(i)/float64(d))
				c, sn := math.Cos(theta), math.Sin(theta)
				o[i] = v[i]*c - v[i+half]*sn
				o[i+half] = v[i]*sn + v[i+half]*c
			}
		}
	}
	return out
}

func checkRoPE() ([]float64, []float64, error) {
	r := detRand(4)
	const heads, seq, d, offset = 2, 5, 8, 3
	x := r.fill(heads*seq*d, 1)
	got, err := read(RoPE(FromSlice(x, 1, heads, seq, d), d, false, 10000, 1, offset, nil))
	return got, refRoPE(widen(x), heads, seq, d, 10000, offset), err
}

// refAttention is causal softmax(q·kᵀ·scale)·v per head, with queries
// aligned to the end of the keys as MLX's "causal" mask does.
func refAttention(q, k, v []float64, heads, ql, kl, d int, scale float64) []float64 {
	out := make([]float64, heads*ql*d)
	for h := 0; h < heads; h++ {
		for i := 0; i < ql; i++ {
			visible := kl - ql + i + 1
			scores := make([]float64, visible)
			for j := range scores {
				var s float64
				for p := 0; p < d; p++ {
					s += q[(h*ql+i)*d+p] * k[(h*kl+j)*d+p]
				}
				scores[j] = s * scale
			}
			probs := refSoftmaxRows(scores, 1, visible)
			for p := 0; p < d; p++ {
				var s float64
				for j, w := range probs {
					s += w * v[(h*kl+j)*d+p]
				}
				out[(h*ql+i)*d+p] = s
			}
		}
	}
	return out
}

func checkSDPA() ([]float64, []float64, error) {
	r := detRand(5)
	const heads, ql, kl, d = 2, 3, 5, 4
	q, k, v := r.fill(heads*ql*d, 1), r.fill(heads*kl*d, 1), r.fill(heads*kl*d, 1)
	scale := float32(1 / math.Sqrt(d))
	got, err := read(ScaledDotProductAttention(FromSlice(q, 1, heads, ql, d), FromSlice(k, 1, heads, kl, d),
		FromSlice(v, 1, heads, kl, d), scale, MaskCausal, nil, nil))
	return got, refAttention(widen(q), widen(k), widen(v), heads, ql, kl, d, float64(scale)), err
}

// refQuantizeAffine is MLX's affine scheme, group by group: the step spans
// the group's range over 2^bits-1 levels, signed so that the extreme of
// larger magnitude ("edge") lands exactly on a level, and the bias is that
// edge. Arithmetic is float32, as in MLX, so levels match exactly.
func refQuantizeAffine(w []float32, group, bits int) (levels []uint32, scales, biases []float32) {
	nBins := float32(int(1)<<bits - 1)
	for g := 0; g < len(w)/group; g++ {
		vals := w[g*group : (g+1)*group]
		lo, hi := vals[0], vals[0]
		for _, v := range vals {
			lo, hi = min(lo, v), max(hi, v)
		}
		scale := max((hi-lo)/nBins, 1e-7)
		edge := hi
		if abs32(lo) > abs32(hi) {
			edge = lo
		} else {
			scale = -scale
		}
		bias := edge
		if q0 := float32(math.RoundToEven(float64(edge / scale))); q0 != 0 {
			scale = edge / q0
		} else {
			bias = 0
		}
		for _, v := range vals {
			q := float32(math.RoundToEven(float64((v - bias) / scale)))
			levels = append(levels, uint32(min(max(q, 0), nBins)))
		}
		scales, biases = append(scales, scale), append(biases, bias)
	}
	return levels, scales, biases
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func checkQuantizedMatmul() ([]float64, []float64, error) {
	r := detRand(6)
	const m, n, k, group, bits = 3, 6, 64, 32, 4
	x, w := r.fill(m*k, 1), r.fill(n*k, 1)
	q := Quant{GroupSize: group, Bits: bits, Mode: "affine"}
	wq, scales, biases := Quantize(FromSlice(w, n, k), q)
	got, err := read(QuantizedMatmul(FromSlice(x, m, k), wq, scales, biases, true, q))
	if err != nil {
		return nil, nil, err
	}
	// MLX's packing: bits-wide levels in uint32 words, least significant first.
	words, err := ToSlice[uint32](wq)
	if err != nil {
		return nil, nil, err
	}
	levels, sc, bs := refQuantizeAffine(w, group, bits)
	if len(words) != n*k*bits/32 {
		return nil, nil, fmt.Errorf("quantize gave %d words for a %dx%d matrix, want %d", len(words), n, k, n*k*bits/32)
	}
	for i, want := range levels {
		if got := (words[i*bits/32] >> (uint(i*bits) % 32)) & (1<<bits - 1); got != want {
			return nil, nil, fmt.Errorf("weight %d quantized to level %d, reference %d", i, got, want)
		}
	}
	deq := make([]float64, n*k) // the reference's weights, [n, k]
	for i, l := range levels {
		deq[i] = float64(sc[i/group])*float64(l) + float64(bs[i/group])
	}
	wt := make([]float64, k*n) // transposed to [k, n]
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			wt[j*n+i] = deq[i*k+j]
		}
	}
	return got, refMatmul(widen(x), wt, m, k, n), nil
}

func checkArgmax() ([]float64, []float64, error) {
	r := detRand(7)
	const rows, cols = 4, 10
	x := r.fill(rows*cols, 1)
	idx, err := Argmax(FromSlice(x, rows, cols), -1, false).Int32s()
	if err != nil {
		return nil, nil, err
	}
	got, want := make([]float64, rows), make([]float64, rows)
	for i := 0; i < rows; i++ {
		got[i] = float64(idx[i])
		for j := 1; j < cols; j++ {
			if x[i*cols+j] > x[i*cols+int(want[i])] {
				want[i] = float64(j)
			}
		}
	}
	return got, want, nil
}

// DeviceStatus describes one device type as MLX sees it.
type DeviceStatus struct {
	Type      string            `json:"type"`
	Available bool              `json:"available"`
	Count     int               `json:"count"`
	Info      map[string]string `json:"info,omitempty"` // of device 0, when available
}

// RuntimeInfo is what verify-native prints about the loaded MLX.
type RuntimeInfo struct {
	Version       string         `json:"mlx_version"`
	DefaultDevice string         `json:"default_device"`
	Devices       []DeviceStatus `json:"devices"`
	Metal         bool           `json:"metal"`
	CUDA          bool           `json:"cuda"`
	Memory        MemoryStats    `json:"memory"`
	// Distributed lists the distributed backends this MLX build offers
	// (of DistributedBackends; mpi only when libmpi loads).
	Distributed []string `json:"distributed_backends"`
}

// Info gathers RuntimeInfo on the executor.
func Info() (RuntimeInfo, error) {
	var ri RuntimeInfo
	err := Do(func() error {
		ri.Version = Version()
		d, err := DefaultDevice()
		if err != nil {
			return err
		}
		ri.DefaultDevice = d.String()
		for _, t := range []DeviceType{CPU, GPU} {
			ds := DeviceStatus{Type: t.String()}
			if ds.Available, err = DeviceAvailable(t); err != nil {
				return err
			}
			if ds.Available {
				if ds.Count, err = DeviceCount(t); err != nil {
					return err
				}
				if ds.Info, err = DeviceInfo(Device{Type: t}); err != nil {
					return err
				}
			}
			ri.Devices = append(ri.Devices, ds)
		}
		if ri.Metal, ri.CUDA, err = Backends(); err != nil {
			return err
		}
		ri.Distributed = []string{}
		for _, b := range DistributedBackends {
			ok, err := DistributedAvailable(b)
			if err != nil {
				return err
			}
			if ok {
				ri.Distributed = append(ri.Distributed, b)
			}
		}
		ri.Memory, err = Memory()
		return err
	})
	return ri, err
}
