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

// mlx-lm's gated_delta.py compute_g, @partial(mx.compile, shapeless=True):
//   mx.exp(-mx.exp(A_log.astype(mx.float32)) * nn.softplus(a + dt_bias))
// with nn.softplus(x) = mx.logaddexp(x, 0), the 0 a weak scalar of x's dtype.
mx::array compute_g_graph(const mx::array& a_log, const mx::array& a, const mx::array& dt_bias) {
  auto decay = mx::negative(mx::exp(mx::astype(a_log, mx::float32)));
  auto x = mx::add(a, dt_bias);
  return mx::exp(mx::multiply(decay, mx::logaddexp(x, mx::array(0.0f, x.dtype()))));
}

// mlx-lm's _gated_delta_step_ops (@mx.compile, not shapeless) with a scalar
// gate per head and no mask: q, k [B, H, Dk], v [B, H, Dv], g and beta
// [B, H], state [B, H, Dv, Dk]; returns y in q's dtype and the new state.
std::vector<mx::array> gated_delta_step_graph(const std::vector<mx::array>& in) {
  const auto &q = in[0], &k = in[1], &v = in[2], &g = in[3], &beta = in[4];
  auto state = mx::multiply(in[5], mx::expand_dims(g, {2, 3}));  // g[..., None, None]
  auto kv_mem = mx::sum(mx::multiply(state, mx::expand_dims(k, -2)), -1, false);
  auto delta = mx::multiply(mx::subtract(v, kv_mem), mx::expand_dims(beta, -1));
  state = mx::add(state, mx::multiply(mx::expand_dims(k, -2), mx::expand_dims(delta, -1)));
  auto y = mx::sum(mx::multiply(state, mx::expand_dims(q, -2)), -1, false);
  return {mx::astype(y, q.dtype()), state};
}

mx::array swiglu_compiled(const mx::array& g, const mx::array& x) {
  static auto compiled = mx::compile(
      [](const std::vector<mx::array>& in) {
        return std::vector<mx::array>{mx::multiply(mx::multiply(in[0], mx::sigmoid(in[0])), in[1])};
      },
      /*shapeless=*/true);
  return compiled({g, x})[0];
}

}  // namespace

extern "C" {

// The Gated DeltaNet's two compiled functions (qwen3_next, qwen3_5). On a GPU
// MLX fuses their elementwise ops, which on float32 rounds differently from
// the ops one by one (the H200 L1 run of 2026-12-03: qwen3_5-f32, qwen3_next-f32
// and qwen3_5_moe-f32 differed by 7e-7 to 1.7e-6 at step 0, their bfloat16
// cases were identical). On the CPU mlxgo builds them from ops (models/nn).
int mlxgo_compute_g(mlxgo_array a_log, mlxgo_array a, mlxgo_array dt_bias, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto &al = arr(a_log, "a_log"), &aa = arr(a, "a"), &dt = arr(dt_bias, "dt_bias");
  if (!on_gpu_default()) {
    put(out, compute_g_graph(al, aa, dt));
  } else {
    static auto compiled = mx::compile(
        [](const std::vector<mx::array>& in) { return std::vector<mx::array>{compute_g_graph(in[0], in[1], in[2])}; },
        /*shapeless=*/true);
    put(out, compiled({al, aa, dt})[0]);
  }
  MLXGO_END
}

int mlxgo_gated_delta_step(mlxgo_array q, mlxgo_array k, mlxgo_array v, mlxgo_array g, mlxgo_array beta,
                           mlxgo_array state, mlxgo_array* out, int cap) {
  MLXGO_BEGIN
  std::vector<mx::array> in{arr(q, "q"), arr(k, "k"), arr(v, "v"), arr(g, "g"), arr(beta, "beta"), arr(state, "state")};
  if (in[3].ndim() != 2) throw shim::ArgError("gated_delta_step: g must be [B, H] (a scalar gate per head)");
  if (!on_gpu_default()) {
    shim::put_all(gated_delta_step_graph(in), out, cap);
  } else {
    static auto compiled = mx::compile(gated_delta_step_graph);
    shim::put_all(compiled(in), out, cap);
  }
  MLXGO_END
}

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

// mlx-lm's swiglu, @partial(mx.compile, shapeless=True) over nn.silu(gate)
// * x (silu(g) = g * sigmoid(g)). On a GPU it is compiled as mlx-lm's is:
// one fused kernel and one graph node, where the three ops were three of
// each in every layer's step (the L1 GPU runs found the same bits either
// way, so this is for the host's work per step: MLX's evaluation encodes
// every node). On the CPU mlxgo's kernels make it one node (fused.cpp), or
// MLX's ops run as they are (its CPU compile needs a C++ compiler).
int mlxgo_swiglu(mlxgo_array gate, mlxgo_array x, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto &g = arr(gate, "gate"), &a = arr(x, "x");
  put(out, on_gpu_default() ? swiglu_compiled(g, a) : mlxgo::cpu::silu_mul(g, a));
  MLXGO_END
}

// swiglu of the two halves of gu's last axis (gate, then x): a fused
// gate/up projection's output without the two slices.
int mlxgo_swiglu_halves(mlxgo_array gu, mlxgo_array* out) {
  MLXGO_BEGIN
  const auto& a = arr(gu);
  if (on_gpu_default()) {
    if (a.ndim() == 0 || a.shape(-1) % 2 != 0) throw std::invalid_argument("swiglu halves: the last axis is not even");
    auto parts = mx::split(a, 2, -1);
    put(out, swiglu_compiled(parts[0], parts[1]));
  } else {
    put(out, mlxgo::cpu::silu_mul_halves(a));
  }
  MLXGO_END
}

}  // extern "C"
