// compiled.cpp — the functions mlx-lm wraps in mx.compile whose compiled
// form computes differently from the same ops run one by one.
//
// On a GPU, MLX fuses a compiled function's elementwise ops into one
// kernel, and for gelu_approx that kernel's results differ from the
// op-by-op graph's (measured on the H200: up to 0.039 on bfloat16 logits,
// 1.3e-6 on float32, the oracle's own no_compile check). So on a GPU the
// shim compiles the same graph mlx-lm's Python builds, op for op and
// operand for operand, and MLX generates the same fused kernel. On the CPU
// compiling made no difference in the oracle, and MLX's CPU compile would
// need a C++ compiler at run time: there the graph runs as it is.
#include <cmath>

#include "internal.h"
#include "mlx/compile.h"

using shim::arr;
using shim::put;

namespace {

// mlx.nn.gelu_approx as Python evaluates it:
//   0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
// A Python scalar on the left of an array is the array's __rmul__/__radd__,
// which puts the array first and the scalar (cast to its dtype) second.
mx::array gelu_approx_graph(const mx::array& x) {
  auto c = [&](double v) { return mx::array(static_cast<float>(v), x.dtype()); };
  auto cube = mx::power(x, c(3));
  auto inner = mx::add(x, mx::multiply(cube, c(0.044715)));
  inner = mx::multiply(inner, c(std::sqrt(2 / M_PI)));
  auto t = mx::add(mx::tanh(inner), c(1));
  return mx::multiply(mx::multiply(x, c(0.5)), t);
}

bool on_gpu_default() { return mx::default_device() == mx::Device::gpu; }

}  // namespace

extern "C" {

int mlxgo_gelu_approx(mlxgo_array x, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto& a = arr(x, "x");
  if (!on_gpu_default()) {
    put(out, gelu_approx_graph(a));
  } else {
    // shapeless, as mlx-lm's @partial(mx.compile, shapeless=True)
    static auto compiled = mx::compile(
        [](const std::vector<mx::array>& in) { return std::vector<mx::array>{gelu_approx_graph(in[0])}; },
        /*shapeless=*/true);
    put(out, compiled({a})[0]);
  }
  MLXGO_END
}

// mlx-lm's swiglu, nn.silu(gate) * x, also compiled there: on the GPU the op
// graph gave the compiled function's bits in every L1 case, so it runs as
// ops; on the CPU mlxgo's kernels make it one node (fused.cpp).
int mlxgo_swiglu(mlxgo_array gate, mlxgo_array x, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::silu_mul(arr(gate, "gate"), arr(x, "x")));
  MLXGO_END
}

}  // extern "C"
