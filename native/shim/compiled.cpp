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
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

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

// mlx-lm's gemma4 geglu, nn.gelu_approx(gate) * x under one
// @partial(mx.compile, shapeless=True). Compiling inlines the inner compiled
// gelu_approx (a compiled function called on tracers traces its body), so
// on a GPU MLX fuses gelu and the product into one kernel, whose results
// differ from gelu_approx's own fused kernel followed by a multiply (the
// H200 L1 run of 2026-12-02: up to 0.38 on bfloat16 logits, 7.7e-6 on
// float32). So it is compiled here as one function, as mlx-lm's is.
int mlxgo_geglu(mlxgo_array gate, mlxgo_array x, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto& g = arr(gate, "gate");
  const auto& a = arr(x, "x");
  if (!on_gpu_default()) {
    put(out, mx::multiply(gelu_approx_graph(g), a));
  } else {
    static auto compiled = mx::compile(
        [](const std::vector<mx::array>& in) {
          return std::vector<mx::array>{mx::multiply(gelu_approx_graph(in[0]), in[1])};
        },
        /*shapeless=*/true);
    put(out, compiled({g, a})[0]);
  }
  MLXGO_END
}

// mlx-lm's gemma4 logit_softcap(softcap, x) = mx.tanh(x / softcap) * softcap,
// compiled shapeless with softcap a Python float: a constant of the trace
// (one compiled function per value, as Python's cache keys on it), weak, so
// in x's dtype. Compiled on a GPU only, for the reason above.
int mlxgo_logit_softcap(mlxgo_array x, const float* softcap_p, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto& a = arr(x, "x");
  const float softcap = *softcap_p;
  auto graph = [softcap](const mx::array& v) {
    auto c = [&] { return mx::array(softcap, v.dtype()); };
    return mx::multiply(mx::tanh(mx::divide(v, c())), c());
  };
  if (!on_gpu_default()) {
    put(out, graph(a));
  } else {
    static std::mutex mu;
    static std::map<uint32_t, std::function<std::vector<mx::array>(const std::vector<mx::array>&)>> byValue;
    uint32_t bits;
    std::memcpy(&bits, &softcap, sizeof bits);
    std::function<std::vector<mx::array>(const std::vector<mx::array>&)> f;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = byValue.find(bits);
      if (it == byValue.end()) {
        it = byValue
                 .emplace(bits, mx::compile(
                                    [graph](const std::vector<mx::array>& in) {
                                      return std::vector<mx::array>{graph(in[0])};
                                    },
                                    /*shapeless=*/true))
                 .first;
      }
      f = it->second;
    }
    put(out, f({a})[0]);
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
