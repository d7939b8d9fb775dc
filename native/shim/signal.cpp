// signal.cpp — convolution, FFT and random numbers (Whisper's front end and
// the samplers).
#include "internal.h"

using shim::arr;
using shim::opt;
using shim::put;

extern "C" {

int mlxgo_conv1d(mlxgo_array input, mlxgo_array weight, int stride, int padding, int dilation, int groups,
                 mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::conv1d(arr(input, "input"), arr(weight, "weight"), stride, padding, dilation, groups));
  MLXGO_END
}

int mlxgo_fft(mlxgo_array a, int kind, int has_n, int n, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto& x = arr(a);
  // Without n, the transform keeps the input's length along axis, except
  // irfft, whose natural output length is 2*(m-1) for m input bins.
  switch (kind) {
    case 0: put(out, has_n ? mx::fft::fft(x, n, axis) : mx::fft::fft(x, axis)); break;
    case 1: put(out, has_n ? mx::fft::ifft(x, n, axis) : mx::fft::ifft(x, axis)); break;
    case 2: put(out, has_n ? mx::fft::rfft(x, n, axis) : mx::fft::rfft(x, axis)); break;
    case 3: put(out, has_n ? mx::fft::irfft(x, n, axis) : mx::fft::irfft(x, axis)); break;
    default: throw shim::ArgError("unknown fft kind " + std::to_string(kind));
  }
  MLXGO_END
}

int mlxgo_random_seed(uint64_t seed) {
  MLXGO_BEGIN
  mx::random::seed(seed);
  MLXGO_END
}

int mlxgo_random_key(uint64_t seed, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::random::key(seed));
  MLXGO_END
}

int mlxgo_random_split(mlxgo_array key, int num, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::random::split(arr(key, "key"), num));
  MLXGO_END
}

int mlxgo_random_categorical(mlxgo_array logits, int axis, int has_num_samples, int num_samples, mlxgo_array key,
                             mlxgo_array* out) {
  MLXGO_BEGIN
  if (has_num_samples) {
    put(out, mx::random::categorical(arr(logits, "logits"), axis, num_samples, opt(key)));
  } else {
    put(out, mx::random::categorical(arr(logits, "logits"), axis, opt(key)));
  }
  MLXGO_END
}

int mlxgo_random_uniform(mlxgo_array low, mlxgo_array high, const int* shape, int n, int dtype, mlxgo_array key,
                         mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::random::uniform(arr(low, "low"), arr(high, "high"), shim::shape(shape, n), shim::dtype(dtype),
                               opt(key)));
  MLXGO_END
}

int mlxgo_random_normal(const int* shape, int n, int dtype, const float* loc, const float* scale, mlxgo_array key,
                        mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::random::normal(shim::shape(shape, n), shim::dtype(dtype), *loc, *scale, opt(key)));
  MLXGO_END
}

int mlxgo_random_bernoulli(mlxgo_array p, const int* shape, int n, mlxgo_array key, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::random::bernoulli(arr(p, "p"), shim::shape(shape, n), opt(key)));
  MLXGO_END
}

}  // extern "C"
