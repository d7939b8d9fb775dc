package mlx

// Conv1d convolves input [batch, length, in_channels] with weight
// [out_channels, kernel, in_channels/groups] (MLX's channels-last layout).
func Conv1d(input, weight *Array, stride, padding, dilation, groups int) *Array {
	c := begin("conv1d")
	hi, hw := c.in(input), c.in(weight)
	return c.do(func(out *uintptr) int32 {
		return fn.conv1d(hi, hw, int32(stride), int32(padding), int32(dilation), int32(groups), out)
	})
}

// FFT kinds, as the shim numbers them.
const (
	fftForward = iota
	fftInverse
	fftReal
	fftRealInverse
)

func fftOp(name string, kind int32, a *Array, n, axis int) *Array {
	c := begin(name)
	h := c.in(a)
	if n < 0 {
		c.fail("negative fft length %d", n)
	}
	// n == 0 keeps MLX's default length (MLX rejects a zero length anyway).
	return c.do(func(out *uintptr) int32 { return fn.fft(h, kind, flag(n > 0), int32(n), int32(axis), out) })
}

// FFT is the discrete Fourier transform along axis, of length n (0: the
// input's length); the result is complex64.
func FFT(a *Array, n, axis int) *Array { return fftOp("fft", fftForward, a, n, axis) }

// IFFT is the inverse of FFT.
func IFFT(a *Array, n, axis int) *Array { return fftOp("ifft", fftInverse, a, n, axis) }

// RFFT is the transform of real input: n/2+1 complex bins (n 0: the input's
// length).
func RFFT(a *Array, n, axis int) *Array { return fftOp("rfft", fftReal, a, n, axis) }

// IRFFT is the inverse of RFFT, a real signal of length n (0: 2·(bins−1)).
func IRFFT(a *Array, n, axis int) *Array { return fftOp("irfft", fftRealInverse, a, n, axis) }

// Random numbers in MLX come from explicit keys (Key, SplitKey) or, when the
// key is nil, from a per-thread global sequence set by Seed: the executor's
// thread, since every call runs there.

// Seed seeds the executor thread's global key sequence.
func Seed(seed uint64) error {
	if !loaded.Load() {
		return ErrNotLoaded
	}
	return check("random.seed", fn.randomSeed(seed))
}

// Key is a PRNG key (uint32, shape [2]) from seed.
func Key(seed uint64) *Array {
	c := begin("random.key")
	return c.do(func(out *uintptr) int32 { return fn.randomKey(seed, out) })
}

// SplitKey derives num new keys from key: shape [num, 2].
func SplitKey(key *Array, num int) *Array {
	c := begin("random.split")
	h := c.in(key)
	return c.do(func(out *uintptr) int32 { return fn.randomSplit(h, int32(num), out) })
}

// Categorical samples one index along axis from unnormalized log
// probabilities; key may be nil.
func Categorical(logits *Array, axis int, key *Array) *Array {
	c := begin("random.categorical")
	hl, hk := c.in(logits), c.opt(key)
	return c.do(func(out *uintptr) int32 { return fn.randomCategorical(hl, int32(axis), 0, 0, hk, out) })
}

// CategoricalN draws num samples per distribution.
func CategoricalN(logits *Array, axis, num int, key *Array) *Array {
	c := begin("random.categorical")
	hl, hk := c.in(logits), c.opt(key)
	return c.do(func(out *uintptr) int32 { return fn.randomCategorical(hl, int32(axis), 1, int32(num), hk, out) })
}

// Uniform samples [low, high) of the given shape and dtype; key may be nil.
func Uniform(low, high *Array, shape []int, dt Dtype, key *Array) *Array {
	c := begin("random.uniform")
	hl, hh, hk := c.in(low), c.in(high), c.opt(key)
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 {
		return fn.randomUniform(hl, hh, ptr32(sh), int32(len(sh)), int32(dt), hk, out)
	})
}

// Normal samples loc + scale·N(0, 1); key may be nil.
func Normal(shape []int, dt Dtype, loc, scale float32, key *Array) *Array {
	c := begin("random.normal")
	hk := c.opt(key)
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 {
		return fn.randomNormal(ptr32(sh), int32(len(sh)), int32(dt), &loc, &scale, hk, out)
	})
}

// Bernoulli samples booleans that are true with probability p (broadcast to
// shape); key may be nil.
func Bernoulli(p *Array, shape []int, key *Array) *Array {
	c := begin("random.bernoulli")
	hp, hk := c.in(p), c.opt(key)
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 { return fn.randomBernoulli(hp, ptr32(sh), int32(len(sh)), hk, out) })
}
