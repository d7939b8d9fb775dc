// ops_math.cpp — elementwise ops, matmul and addmm.
//
// Each op is one line through a macro: the bodies are identical apart from
// the MLX function they call, and a typo in a hand-copied body would be an
// easy bug to miss.
#include "internal.h"

using shim::arr;
using shim::put;

#define UNARY(name)                                   \
  int mlxgo_##name(mlxgo_array a, mlxgo_array* out) { \
    MLXGO_BEGIN                                       \
    put(out, mx::name(arr(a)));                       \
    MLXGO_END                                         \
  }

#define BINARY(name)                                                 \
  int mlxgo_##name(mlxgo_array a, mlxgo_array b, mlxgo_array* out) { \
    MLXGO_BEGIN                                                      \
    put(out, mx::name(arr(a, "a"), arr(b, "b")));                    \
    MLXGO_END                                                        \
  }

extern "C" {

// erf takes the shim's CPU kernel (mlxgo::cpu::erf: the same bits as
// MLX's, vectorized and threaded) where the kernels are on.
int mlxgo_erf(mlxgo_array a, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::erf(arr(a)));
  MLXGO_END
}

UNARY(negative)
UNARY(exp)
UNARY(log)
UNARY(log1p)
UNARY(sqrt)
UNARY(rsqrt)
UNARY(square)
UNARY(abs)
UNARY(sin)
UNARY(cos)
UNARY(tanh)
UNARY(sigmoid)
UNARY(floor)
UNARY(ceil)
UNARY(reciprocal)
UNARY(logical_not)
UNARY(real)
UNARY(imag)
UNARY(stop_gradient)

BINARY(add)
BINARY(subtract)
BINARY(multiply)
BINARY(divide)
BINARY(maximum)
BINARY(minimum)
BINARY(power)
BINARY(remainder)
BINARY(floor_divide)
BINARY(equal)
BINARY(not_equal)
BINARY(less)
BINARY(less_equal)
BINARY(greater)
BINARY(greater_equal)
BINARY(logical_and)
BINARY(logical_or)

int mlxgo_matmul(mlxgo_array a, mlxgo_array b, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::matmul(arr(a, "a"), arr(b, "b")));
  MLXGO_END
}

int mlxgo_clip(mlxgo_array a, mlxgo_array a_min, mlxgo_array a_max, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::clip(arr(a), shim::opt(a_min), shim::opt(a_max)));
  MLXGO_END
}

int mlxgo_addmm(mlxgo_array c, mlxgo_array a, mlxgo_array b, const float* alpha, const float* beta, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::addmm(arr(c, "c"), arr(a, "a"), arr(b, "b"), *alpha, *beta));
  MLXGO_END
}

}  // extern "C"
