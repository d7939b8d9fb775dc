package mlx

import "fmt"

// # CPU kernels
//
// MLX's CPU backend in the Linux wheel is scalar code on one thread. The shim
// carries kernels of its own for the ops that dominate inference — dense and
// quantized matmuls (and through them scaled dot-product attention) — that
// run MLX's exact per-output arithmetic vectorized across outputs and split
// over a pool of threads, so their results are bit-identical to MLX's
// (native/shim/cpu/isa.h). SetCPUKernels picks them or MLX's own; the choice
// is made when a graph is built, so set it before building one.

// Kernel sets for SetCPUKernels.
const (
	KernelsMLX   = "mlx"   // MLX's own CPU kernels
	KernelsMLXGO = "mlxgo" // mlxgo's, bit-identical to MLX's
	// KernelsFast is mlxgo's with one inexact kernel: 4- and 8-bit quantized
	// matmuls quantize their activations to int8 per block of 32 and take
	// integer dot products (VPDPBUSD where the CPU has AVX-512 VNNI), as
	// llama.cpp does. Fidelity L3; its error is measured in the README.
	KernelsFast = "fast"
)

// kernelModes is each kernel set's mode in the shim.
var kernelModes = map[string]int32{KernelsMLX: 0, KernelsMLXGO: 1, KernelsFast: 2}

// Exact reports whether the kernels give MLX's bits (every set but fast).
func (k CPUKernels) Exact() bool { return k.Kernels != KernelsFast }

// CPUKernels describes the CPU kernels in use.
type CPUKernels struct {
	Kernels string // KernelsMLX, KernelsMLXGO or KernelsFast
	ISA     string // instruction set of mlxgo's kernels: avx512, avx2 or base
	Threads int    // threads mlxgo's kernels run on (the caller's included)
}

// String is how a composition records the selection, e.g. "mlxgo avx512 x2
// threads" or "mlx".
func (k CPUKernels) String() string {
	switch k.Kernels {
	case KernelsMLXGO:
		return fmt.Sprintf("%s %s x%d threads", k.Kernels, k.ISA, k.Threads)
	case KernelsFast:
		return fmt.Sprintf("%s %s x%d threads (int8 activations in 4- and 8-bit matmuls: L3)", k.Kernels, k.ISA, k.Threads)
	}
	return k.Kernels
}

// RuntimeDescription is "MLX <version>" with the CPU kernels in use, for
// execution compositions.
func RuntimeDescription() string {
	s := "MLX " + Version()
	if k, err := CPUKernelsInUse(); err == nil {
		s += ", CPU kernels " + k.String()
	}
	return s
}

// SetCPUKernels selects the CPU kernels for graphs built after it. threads
// is the size of the kernels' thread pool (at least 1); isa forces an
// instruction set ("" picks the best this CPU has).
func SetCPUKernels(kernels string, threads int, isa string) error {
	if !loaded.Load() {
		return ErrNotLoaded
	}
	mode, ok := kernelModes[kernels]
	if !ok {
		return fmt.Errorf("unknown CPU kernels %q (want %s, %s or %s)", kernels, KernelsMLXGO, KernelsMLX, KernelsFast)
	}
	if err := check("cpu_kernels_set", fn.cpuKernelsSet(mode, int32(threads), isa)); err != nil {
		return err
	}
	kernelsMode.Store(mode)
	return nil
}

// CPUKernelsInUse reports the current selection.
func CPUKernelsInUse() (CPUKernels, error) {
	if !loaded.Load() {
		return CPUKernels{}, ErrNotLoaded
	}
	var mode, threads int32
	var isa *byte
	if err := check("cpu_kernels_info", fn.cpuKernelsInfo(&mode, &threads, &isa)); err != nil {
		return CPUKernels{}, err
	}
	k := CPUKernels{Kernels: KernelsMLX, ISA: cString(isa), Threads: int(threads)}
	for name, m := range kernelModes {
		if m == mode {
			k.Kernels = name
		}
	}
	return k, nil
}

// CPUPacking reports whether models should repack their quantized weights
// (PackQuantized): mlxgo's kernels are selected and the default device is
// the CPU.
func CPUPacking() bool {
	k, err := CPUKernelsInUse()
	if err != nil || k.Kernels == KernelsMLX {
		return false
	}
	d, err := DefaultDevice()
	return err == nil && d.Type == CPU
}

// CPUKernelSelfTest compares one of the kernels' building blocks with MLX's
// scalar code on every stride-th float32 bit pattern and on every
// instruction set this CPU runs: "exp" (MLX's simd::exp), "round_f16",
// "round_bf16" (an op's rounding to the dtype), "store_f16", "store_bf16"
// (the conversion that writes a result, NaN canonicalized as MLX does).
func CPUKernelSelfTest(what string, stride uint64) (checked, mismatches uint64, err error) {
	if !loaded.Load() {
		return 0, 0, ErrNotLoaded
	}
	err = check("cpu_selftest", fn.cpuSelftest(what, stride, &checked, &mismatches))
	return checked, mismatches, err
}

// Packed is a quantized weight [N][K] (nn.QuantizedLinear's layout) repacked
// once for mlxgo's CPU kernels: 16 rows interleaved word by word, with their
// scales and biases beside them, so a kernel reads one forward stream per 16
// outputs. Same bytes as the MLX layout (plus padding to 32 rows); only
// PackedMatmul and PackedEmbedding read it.
type Packed struct {
	Data  *Array
	N, K  int
	Quant Quant
	Dtype Dtype // of the scales and biases: the activation dtype
}

// PackQuantized repacks w (uint32 [N][K*bits/32]) with its scales and biases
// (affine mode). The inputs are evaluated and left to the caller to free.
func PackQuantized(w, scales, biases *Array, q Quant) (*Packed, error) {
	if q.mode() != "affine" {
		return nil, fmt.Errorf("cannot pack %s quantization (affine only)", q.mode())
	}
	c := begin("cpu_pack_qweight")
	hw, hs, hb := c.in(w), c.in(scales), c.in(biases)
	out := c.do(func(out *uintptr) int32 {
		return fn.cpuPackQWeight(hw, hs, hb, int32(q.GroupSize), int32(q.Bits), out)
	})
	if err := out.Err(); err != nil {
		return nil, err
	}
	return &Packed{Data: out, N: w.Dim(0), K: w.Dim(1) * 32 / q.Bits, Quant: q, Dtype: scales.Dtype()}, nil
}

// PackedMatmul is QuantizedMatmul(x, w, scales, biases, true, q) over the
// packed weight; x is cast to the weight's dtype, as quantized_matmul does.
func PackedMatmul(x *Array, p *Packed) *Array {
	c := begin("cpu_packed_qmm")
	hx, hp := c.in(x), c.in(p.Data)
	return c.do(func(out *uintptr) int32 {
		return fn.cpuPackedQmm(hx, hp, int32(p.N), int32(p.K), int32(p.Quant.GroupSize), int32(p.Quant.Bits), int32(p.Dtype), out)
	})
}

// PackedMatmulAdd is Add(res, PackedMatmul(x, p)), a residual connection
// after a projection: one node when res has the product's shape and dtype
// (the kernel adds it to each output as MLX's Add would), MLX's add else.
func PackedMatmulAdd(x *Array, p *Packed, res *Array) *Array {
	c := begin("cpu_packed_qmm_add")
	hx, hp, hr := c.in(x), c.in(p.Data), c.in(res)
	return c.do(func(out *uintptr) int32 {
		return fn.cpuPackedQmmAdd(hx, hp, int32(p.N), int32(p.K), int32(p.Quant.GroupSize), int32(p.Quant.Bits), int32(p.Dtype), hr, out)
	})
}

// PackedEmbedding is Dequantize(Take(w, ids), Take(scales, ids), Take(biases,
// ids)) over the packed weight: nn.QuantizedEmbedding's lookup.
func PackedEmbedding(ids *Array, p *Packed) *Array {
	c := begin("cpu_packed_embed")
	hi, hp := c.in(ids), c.in(p.Data)
	return c.do(func(out *uintptr) int32 {
		return fn.cpuPackedEmbed(hi, hp, int32(p.N), int32(p.K), int32(p.Quant.GroupSize), int32(p.Quant.Bits), int32(p.Dtype), out)
	})
}

// NormPackedMatmul is PackedMatmul(RMSNorm(x, w, eps), p) as one node: the
// same kernels one after the other inside it, so the same bits. x, w and
// the scales must promote to one dtype.
func NormPackedMatmul(x, w *Array, eps float32, p *Packed) *Array {
	c := begin("cpu_norm_packed_qmm")
	hx, hw, hp := c.in(x), c.in(w), c.in(p.Data)
	return c.do(func(out *uintptr) int32 {
		return fn.cpuNormPackedQmm(hx, hw, &eps, hp, int32(p.N), int32(p.K), int32(p.Quant.GroupSize), int32(p.Quant.Bits), int32(p.Dtype), out)
	})
}

// PackedMLP is a SwiGLU MLP over packed weights as one node: res +
// down(silu(g) * u), [g | u] = RMSNorm(x, w, eps) @ gateUp.T, with w nil
// for no norm and res nil for no residual: what the nodes RMSNorm,
// PackedMatmul, SwiGLUHalves and PackedMatmulAdd give, bit for bit. float32
// x, and scales and a norm weight that promote with float32 to float32.
func PackedMLP(x, w *Array, eps float32, gateUp, down *Packed, res *Array) *Array {
	c := begin("cpu_packed_mlp")
	hx, hw, hg, hd, hr := c.in(x), c.opt(w), c.in(gateUp.Data), c.in(down.Data), c.opt(res)
	if down.N != gateUp.K || 2*down.K != gateUp.N {
		c.fail("gate/up %dx%d and down %dx%d do not make an MLP", gateUp.N, gateUp.K, down.N, down.K)
	}
	return c.do(func(out *uintptr) int32 {
		return fn.cpuPackedMLP(hx, hw, &eps, hg, hd, int32(down.N), int32(down.K),
			int32(gateUp.Quant.GroupSize), int32(gateUp.Quant.Bits), int32(gateUp.Dtype),
			int32(down.Quant.GroupSize), int32(down.Quant.Bits), int32(down.Dtype), hr, out)
	})
}
