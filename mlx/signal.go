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
