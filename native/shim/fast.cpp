// fast.cpp — MLX's fused ops (mx::fast). mlx-lm uses these, so bit-identical
// logits need them rather than compositions of primitive ops.
#include "internal.h"

using shim::arr;
using shim::opt;
using shim::put;

namespace {

std::optional<float> base_of(int has_base, float base) {
  if (has_base) return base;
  return std::nullopt;
}

}  // namespace

extern "C" {

int mlxgo_fast_rms_norm(mlxgo_array x, mlxgo_array weight, const float* eps, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::rms_norm(arr(x, "x"), opt(weight), *eps));
  MLXGO_END
}

int mlxgo_fast_layer_norm(mlxgo_array x, mlxgo_array weight, mlxgo_array bias, const float* eps, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::fast::layer_norm(arr(x, "x"), opt(weight), opt(bias), *eps));
  MLXGO_END
}

int mlxgo_fast_rope(mlxgo_array x, int dims, int traditional, int has_base, const float* base, const float* scale, int offset,
                    mlxgo_array freqs, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::rope(arr(x, "x"), dims, traditional != 0, base_of(has_base, *base), *scale, mx::array(offset, mx::int32),
                           opt(freqs)));
  MLXGO_END
}

int mlxgo_fast_rope_dynamic(mlxgo_array x, int dims, int traditional, int has_base, const float* base, const float* scale,
                            mlxgo_array offset, mlxgo_array freqs, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::rope(arr(x, "x"), dims, traditional != 0, base_of(has_base, *base), *scale, arr(offset, "offset"),
                           opt(freqs)));
  MLXGO_END
}

int mlxgo_fast_sdpa(mlxgo_array q, mlxgo_array k, mlxgo_array v, const float* scale, const char* mask_mode,
                    mlxgo_array mask, mlxgo_array sinks, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::sdpa(arr(q, "queries"), arr(k, "keys"), arr(v, "values"), *scale, shim::str(mask_mode),
                            opt(mask), opt(sinks)));
  MLXGO_END
}

}  // extern "C"
