// fused.cpp — fast::rms_norm and fast::rope on the CPU as one node each.
//
// On the CPU, MLX runs both as chains of small ops (rms_norm 7, rope about
// 25), and each op costs MLX a few microseconds of scheduling whatever its
// size: at decode, two norms and two ropes per layer were most of a step.
// These primitives compute what those chains compute, element by element,
// with MLX's own scalar types and functions (the _MLX_Float16/_MLX_BFloat16
// operators round every op as MLX's elementwise kernels do; detail::Cos,
// detail::Sin and detail::Exp are MLX's inline polynomials) and its
// reduction order (a sequential sum on x86, where MLX's SIMD width is 1).
// make test compares them bit for bit with MLX's chains.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "cpu/blocks.h"
#include "cpu/isa.h"
#include "cpu/pool.h"
#include "cpu/prim.h"
#include "cpu/rope.h"
#include "mlx/backend/cpu/unary_ops.h"

namespace mlxgo::cpu {

bool kernels_on();
const Isa* active_isa();

namespace {

template <class F>
void dispatch_float(mx::Dtype d, F&& f) {
  if (d == mx::float32) f(float{});
  else if (d == mx::float16) f(mx::float16_t{});
  else if (d == mx::bfloat16) f(mx::bfloat16_t{});
  else throw std::runtime_error("fused op on a non-float dtype");
}

// Runs f(i) for i in [0, n) on the pool when there is enough work.
template <class F>
void rows(int64_t n, int64_t work_per_row, F&& f) {
  const int64_t chunk = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_row));
  const int64_t tasks = (n + chunk - 1) / chunk;
  Pool::get().run(int(tasks), [&](int t) {
    for (int64_t i = t * chunk, e = std::min(n, (t + 1) * chunk); i < e; i++) f(i);
  });
}

// ---- rms_norm ----
// MLX's fallback: x32 = float32(x); y = x32 * rsqrt(mean(x32^2, -1) + eps);
// out = T(y) * weight, with weight cast to out's dtype T.
struct RmsNorm {
  static constexpr const char* name = "MlxgoRMSNorm";
  struct Params {
    float eps;
    bool has_weight;
  };
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    const float eps_ = p.eps;
    const bool has_weight_ = p.has_weight;
    const mx::array& x = in[0];
    const int D = x.shape(-1);
    const int64_t R = D == 0 ? 0 : x.size() / D;
    // mean multiplies the sum by 1/n, computed in double and stored as float.
    const float inv_n = static_cast<float>(1.0 / D);
    const float eps = eps_;
    dispatch_float(x.dtype(), [&](auto tx) {
      using TX = decltype(tx);
      dispatch_float(out.dtype(), [&](auto to) {
        using TO = decltype(to);
        const TX* xp = x.data<TX>();
        const TO* wp = has_weight_ ? in[1].data<TO>() : nullptr;
        const int64_t ws = has_weight_ ? in[1].strides()[0] : 0;
        const bool row_major = x.flags().row_contiguous;
        const int64_t xs = x.strides()[x.ndim() - 1];
        TO* op = out.data<TO>();
        rows(R, D, [&](int64_t r) {
          const TX* row = xp + (row_major ? r * D : loc(r * D, x.shape(), x.strides()));
          const int64_t st = row_major ? 1 : xs;
          float acc = 0.0f;
          for (int i = 0; i < D; i++) {
            float v = static_cast<float>(row[i * st]);
            acc = acc + v * v;
          }
          const float sum = acc + 0.0f;  // the reduction adds its init last
          const float mean = sum * inv_n;
          const float rs = 1.0f / std::sqrt(mean + eps);
          TO* o = op + r * D;
          for (int i = 0; i < D; i++) {
            float y = static_cast<float>(row[i * st]) * rs;
            TO t = static_cast<TO>(y);
            o[i] = has_weight_ ? static_cast<TO>(t * wp[i * ws]) : t;
          }
        });
      });
    });
  }
};

// ---- rope ----
// MLX's fallback with x viewed as [B, N, T, D]: positions (t + offset) *
// scale in float32, inv_freqs exp(-j * log(base)/half) or 1/freqs, theta =
// position * inv_freq, c = T(cos theta), s = T(sin theta); then in T
// out1 = x1*c - x2*s and out2 = x1*s + x2*c, the rest of D copied.
struct Rope {
  static constexpr const char* name = "MlxgoRoPE";
  struct Params {
    int dims;
    bool traditional;
    float base, scale;
    bool has_freqs;
  };
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    const mx::array& x = in[0];
    const mx::array& off = in[1];
    const int D = x.shape(-1), T = x.shape(-2), B = x.shape(0);
    const int64_t N = x.size() / (int64_t(B) * T * D);
    const int half = p.dims / 2;
    std::vector<float> freqs;
    if (p.has_freqs) {
      const mx::array& f = in[2];
      for (int j = 0; j < half; j++) freqs.push_back(f.data<float>()[loc(j, f.shape(), f.strides())]);
    }
    const RopeSpec r{p.dims, p.traditional, p.base, p.scale, p.has_freqs ? freqs.data() : nullptr};
    const std::vector<float> inv = rope_inv_freqs(r);
    std::vector<float> offs(off.size());
    for (size_t i = 0; i < off.size(); i++) {
      int64_t l = loc(int64_t(i), off.shape(), off.strides());
      offs[i] = off.dtype() == mx::uint32 ? static_cast<float>(off.data<uint32_t>()[l])
                                          : static_cast<float>(off.data<int32_t>()[l]);
    }
    const int nb = off.size() > 1 ? B : 1;
    dispatch_float(x.dtype(), [&](auto tag) {
      using TT = decltype(tag);
      // cos and sin per (batch of offsets, position, frequency)
      std::vector<TT> cs(size_t(nb) * T * half), sn(size_t(nb) * T * half);
      rows(int64_t(nb) * T, half * 8, [&](int64_t bt) {
        rope_angles<TT>(r, inv, offs[bt / T], int(bt % T), cs.data() + bt * half, sn.data() + bt * half);
      });
      const TT* xp = x.data<TT>();
      TT* op = out.data<TT>();
      const bool row_major = x.flags().row_contiguous;
      rows(int64_t(B) * N * T, D, [&](int64_t rw) {
        const int t = int(rw % T), b = int(rw / (N * T));
        const size_t at0 = (size_t(nb > 1 ? b : 0) * T + t) * half;
        rope_row<TT>(r, D, cs.data() + at0, sn.data() + at0, [&](int i) -> TT {
          return row_major ? xp[rw * D + i] : xp[loc(rw * D + i, x.shape(), x.strides())];
        }, op + rw * D, 1);
      });
    });
  }
};

// ---- silu(g)·u ----
// mlx-lm's swiglu, nn.silu(gate) * x, is multiply(multiply(g, sigmoid(g)),
// u): three nodes over the MLP's width, sigmoid through MLX's scalar exp
// (a libm fma call per step): 8 % of a SmolLM2 prefill. One node here, the
// same float operations per element (kern.inc's silu_mul), float32 only.
struct SiluMul {
  static constexpr const char* name = "MlxgoSiluMul";
  // halves: one input, each of its rows the gate then the up projection
  // (a fused gate/up matmul's output), instead of two.
  struct Params {
    bool halves;
  };
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    const int64_t n = out.size();
    float* o = out.data<float>();
    const Isa* isa = active_isa();
    if (p.halves) {
      const mx::array& gu = in[0];
      const int64_t D = out.shape(-1), R = D == 0 ? 0 : n / D;
      const bool row_major = gu.flags().row_contiguous;
      rows(R, D, [&](int64_t r) {
        if (row_major) {
          const float* row = gu.data<float>() + r * 2 * D;
          isa->silu_mul(row, row + D, o + r * D, size_t(D));
          return;
        }
        std::vector<float> gr(static_cast<size_t>(D)), ur(static_cast<size_t>(D));
        for (int64_t i = 0; i < D; i++) {
          gr[size_t(i)] = gu.data<float>()[loc(r * 2 * D + i, gu.shape(), gu.strides())];
          ur[size_t(i)] = gu.data<float>()[loc(r * 2 * D + D + i, gu.shape(), gu.strides())];
        }
        isa->silu_mul(gr.data(), ur.data(), o + r * D, size_t(D));
      });
      return;
    }
    const mx::array &g = in[0], &u = in[1];
    if (g.flags().row_contiguous && u.flags().row_contiguous) {
      constexpr int64_t chunk = 4096;
      rows((n + chunk - 1) / chunk, chunk, [&](int64_t c) {
        const int64_t i = c * chunk;
        isa->silu_mul(g.data<float>() + i, u.data<float>() + i, o + i, size_t(std::min(chunk, n - i)));
      });
      return;
    }
    // Views: the halves of a fused gate/up matmul's output are rows with a
    // stride, each row contiguous; anything else is gathered element-wise.
    const int64_t D = out.shape(-1), R = D == 0 ? 0 : n / D;
    const bool by_rows = g.strides().back() == 1 && u.strides().back() == 1;
    rows(R, D, [&](int64_t r) {
      if (by_rows) {
        isa->silu_mul(g.data<float>() + loc(r * D, g.shape(), g.strides()),
                      u.data<float>() + loc(r * D, u.shape(), u.strides()), o + r * D, size_t(D));
        return;
      }
      std::vector<float> gr(static_cast<size_t>(D)), ur(static_cast<size_t>(D));
      for (int64_t i = 0; i < D; i++) {
        gr[size_t(i)] = g.data<float>()[loc(r * D + i, g.shape(), g.strides())];
        ur[size_t(i)] = u.data<float>()[loc(r * D + i, u.shape(), u.strides())];
      }
      isa->silu_mul(gr.data(), ur.data(), o + r * D, size_t(D));
    });
  }
};

// ---- erf ----
// MLX's Erf on float32 runs simd::erf one element at a time, with a libm
// fmaf call for each of its six fused multiply-adds and a scalar exp: a
// quarter of a BERT embedding's time (its gelu), on one thread. One node
// here, the same float operations per element (kern.inc's erf_n).
struct Erf {
  static constexpr const char* name = "MlxgoErf";
  struct Params {};
  static void run(const Params&, const std::vector<mx::array>& in, mx::array& out) {
    const mx::array& x = in[0];
    const int64_t n = out.size();
    float* o = out.data<float>();
    const Isa* isa = active_isa();
    constexpr int64_t chunk = 4096;
    const bool direct = x.flags().row_contiguous;
    rows((n + chunk - 1) / chunk, chunk * 8, [&](int64_t c) {
      const int64_t i = c * chunk, m = std::min(chunk, n - i);
      if (direct) {
        isa->erf(x.data<float>() + i, o + i, size_t(m));
        return;
      }
      thread_local std::vector<float> buf;
      buf.resize(size_t(m));
      for (int64_t k = 0; k < m; k++) buf[size_t(k)] = x.data<float>()[loc(i + k, x.shape(), x.strides())];
      isa->erf(buf.data(), o + i, size_t(m));
    });
  }
};

// ---- logsumexp ----
// MLX's LogSumExp primitive over the last axis (what mx::logsumexp builds
// for the last axis, or for all axes of a [1, ..., 1, N] array, as
// generation's log-softmax over the vocabulary is): one row's result is
// lse_row's float, cast to the output dtype as MLX casts it. At decode it
// was MLX's one serial op worth counting: 49152 scalar exps a token on the
// stream's thread (about 5 % of a SmolLM2 step), the pool's workers idle.
struct LogSumExp {
  static constexpr const char* name = "MlxgoLogSumExp";
  struct Params {};
  static void run(const Params&, const std::vector<mx::array>& in, mx::array& out) {
    const mx::array& x = in[0];
    const int M = x.shape(-1);
    const int64_t R = M == 0 ? 0 : x.size() / M;
    const Isa* isa = active_isa();
    dispatch_float(x.dtype(), [&](auto tx) {
      using T = decltype(tx);
      const T* xp = x.data<T>();
      const bool direct = std::is_same_v<T, float> && x.flags().row_contiguous;
      T* op = out.data<T>();
      rows(R, int64_t(M) * 8, [&](int64_t r) {
        if (direct) {
          op[r] = static_cast<T>(isa->lse_row(reinterpret_cast<const float*>(xp) + r * M, M));
          return;
        }
        thread_local std::vector<float> buf;
        buf.resize(size_t(M));
        for (int i = 0; i < M; i++) {
          const int64_t e = r * M + i;
          buf[size_t(i)] = static_cast<float>(xp[x.flags().row_contiguous ? e : loc(e, x.shape(), x.strides())]);
        }
        op[r] = static_cast<T>(isa->lse_row(buf.data(), M));
      });
    });
  }
};

bool float_type(mx::Dtype d) { return d == mx::float32 || d == mx::float16 || d == mx::bfloat16; }

bool on_cpu_default() { return mx::default_device() == mx::Device::cpu; }

}  // namespace

void rms_norm_into(const mx::array& x, const mx::array* weight, float eps, mx::array& out) {
  std::vector<mx::array> in = {x};
  if (weight) in.push_back(*weight);
  RmsNorm::run({eps, weight != nullptr}, in, out);
}

void silu_mul_halves_into(const mx::array& gu, mx::array& out) { SiluMul::run({true}, {gu}, out); }

mx::array silu_mul(const mx::array& g, const mx::array& u) {
  auto stock = [&] { return mx::multiply(mx::multiply(g, mx::sigmoid(g)), u); };
  if (!kernels_on() || !on_cpu_default() || g.dtype() != mx::float32 || u.dtype() != mx::float32 ||
      g.shape() != u.shape() || g.size() == 0)
    return stock();
  return node<SiluMul>(g.shape(), mx::float32, {false}, {g, u});
}

mx::array erf(const mx::array& x) {
  if (!kernels_on() || !on_cpu_default() || x.dtype() != mx::float32 || x.size() == 0) return mx::erf(x);
  return node<Erf>(x.shape(), mx::float32, {}, {x});
}

mx::array silu_mul_halves(const mx::array& gu) {
  if (gu.ndim() == 0 || gu.shape(-1) % 2 != 0) throw std::invalid_argument("swiglu halves: the last axis is not even");
  const int d = gu.shape(-1) / 2;
  auto shape = gu.shape();
  shape.back() = d;
  if (!kernels_on() || !on_cpu_default() || gu.dtype() != mx::float32 || gu.size() == 0) {
    auto parts = mx::split(gu, 2, -1);
    return silu_mul(parts[0], parts[1]);
  }
  return node<SiluMul>(shape, mx::float32, {true}, {gu});
}

mx::array logsumexp(const mx::array& a, const std::vector<int>& axes, bool keepdims) {
  auto out = mx::logsumexp(a, axes, keepdims);
  if (!kernels_on() || !on_cpu_default()) return out;
  auto is_lse = [](const mx::array& n) {
    return n.has_primitive() && std::strcmp(n.primitive().name(), "LogSumExp") == 0 &&
           n.primitive().device() == mx::Device::cpu;
  };
  // The node is out itself (keepdims) or under the squeeze of its last axis.
  const bool squeezed = !is_lse(out) && out.has_primitive() && out.inputs().size() == 1 &&
                        std::strcmp(out.primitive().name(), "Squeeze") == 0 && is_lse(out.inputs()[0]);
  if (!is_lse(out) && !squeezed) return out;
  const mx::array n = squeezed ? out.inputs()[0] : out;
  if (!float_type(n.dtype()) || n.inputs().size() != 1 || n.inputs()[0].dtype() != n.dtype() ||
      n.inputs()[0].size() == 0)
    return out;
  auto mine = node<LogSumExp>(n.shape(), n.dtype(), {}, n.inputs(), n.primitive().stream());
  return squeezed ? mx::squeeze(mine, -1) : mine;
}

mx::array rms_norm(const mx::array& x, const std::optional<mx::array>& weight, float eps) {
  auto stock = [&] { return mx::fast::rms_norm(x, weight, eps); };
  if (!kernels_on() || !on_cpu_default() || x.ndim() == 0 || x.size() == 0) return stock();
  if (weight && (weight->ndim() != 1 || weight->size() != size_t(x.shape(-1)))) return stock();
  auto out_type = weight ? mx::result_type({x, *weight}) : x.dtype();
  if (!float_type(out_type) || !float_type(x.dtype())) return stock();
  std::vector<mx::array> ins = {x};
  if (weight) ins.push_back(mx::astype(*weight, out_type));
  return node<RmsNorm>(x.shape(), out_type, {eps, weight.has_value()}, std::move(ins));
}

mx::array rope(const mx::array& x, int dims, bool traditional, std::optional<float> base, float scale,
               const mx::array& offset, const std::optional<mx::array>& freqs) {
  auto stock = [&] { return mx::fast::rope(x, dims, traditional, base, scale, offset, freqs); };
  if (!kernels_on() || !on_cpu_default() || x.ndim() < 3 || !float_type(x.dtype()) || x.size() == 0) return stock();
  if (offset.ndim() > 1 || (offset.size() != 1 && offset.size() != size_t(x.shape(0)))) return stock();
  if (offset.dtype() != mx::int32 && offset.dtype() != mx::uint32) return stock();
  if (dims <= 0 || dims % 2 != 0 || dims > x.shape(-1) || freqs.has_value() == base.has_value()) return stock();
  if (freqs && (freqs->ndim() != 1 || freqs->shape(0) != dims / 2)) return stock();
  std::vector<mx::array> ins = {x, offset};
  if (freqs) ins.push_back(mx::astype(*freqs, mx::float32));
  return node<Rope>(x.shape(), x.dtype(), {dims, traditional, base.value_or(1.0f), scale, freqs.has_value()},
                    std::move(ins));
}

}  // namespace mlxgo::cpu
