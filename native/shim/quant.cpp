// quant.cpp — quantize/dequantize and matmuls over quantized or gathered weights.
//
// group_size and bits are always passed: MLX's per-mode defaults would make a
// model's numeric scheme depend on a library default instead of its config.
#include "internal.h"

using shim::arr;
using shim::opt;
using shim::put;

extern "C" {

int mlxgo_quantize(mlxgo_array w, int group_size, int bits, const char* mode, mlxgo_array global_scale,
                   mlxgo_array* out_w, mlxgo_array* out_scales, mlxgo_array* out_biases) {
  MLXGO_BEGIN
  if (out_w == nullptr || out_scales == nullptr || out_biases == nullptr) {
    throw shim::ArgError("null out pointer");
  }
  auto parts = mx::quantize(arr(w, "w"), group_size, bits, shim::str(mode), opt(global_scale));
  if (parts.size() < 2 || parts.size() > 3) {
    throw std::runtime_error("quantize returned " + std::to_string(parts.size()) + " arrays");
  }
  *out_w = shim::wrap(parts[0]);
  *out_scales = shim::wrap(parts[1]);
  *out_biases = parts.size() == 3 ? shim::wrap(parts[2]) : nullptr;
  MLXGO_END
}

int mlxgo_dequantize(mlxgo_array w, mlxgo_array scales, mlxgo_array biases, int group_size, int bits,
                     const char* mode, mlxgo_array global_scale, int has_dtype, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  std::optional<mx::Dtype> dt;
  if (has_dtype) dt = shim::dtype(dtype);
  put(out, mx::dequantize(arr(w, "w"), arr(scales, "scales"), opt(biases), group_size, bits, shim::str(mode),
                          opt(global_scale), dt));
  MLXGO_END
}

int mlxgo_quantized_matmul(mlxgo_array x, mlxgo_array w, mlxgo_array scales, mlxgo_array biases, int transpose,
                           int group_size, int bits, const char* mode, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::quantized_matmul(arr(x, "x"), arr(w, "w"), arr(scales, "scales"), opt(biases), transpose != 0,
                                group_size, bits, shim::str(mode)));
  MLXGO_END
}

int mlxgo_gather_qmm(mlxgo_array x, mlxgo_array w, mlxgo_array scales, mlxgo_array biases, mlxgo_array lhs_indices,
                     mlxgo_array rhs_indices, int transpose, int group_size, int bits, const char* mode,
                     int sorted_indices, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::gather_qmm(arr(x, "x"), arr(w, "w"), arr(scales, "scales"), opt(biases), opt(lhs_indices),
                          opt(rhs_indices), transpose != 0, group_size, bits, shim::str(mode), std::nullopt,
                          sorted_indices != 0));
  MLXGO_END
}

int mlxgo_gather_mm(mlxgo_array a, mlxgo_array b, mlxgo_array lhs_indices, mlxgo_array rhs_indices,
                    int sorted_indices, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::gather_mm(arr(a, "a"), arr(b, "b"), opt(lhs_indices), opt(rhs_indices), sorted_indices != 0));
  MLXGO_END
}

}  // extern "C"
