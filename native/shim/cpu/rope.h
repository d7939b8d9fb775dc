// rope.h — MLX's fast.rope on the CPU, element by element, shared by the
// MlxgoRoPE node (fused.cpp) and the cache attention node, which rotates the
// queries and keys it writes (cache_attention.cpp).
//
// MLX's CPU rope: inverse frequencies exp(-j * log(base) / half) (or 1 /
// freqs), theta = (t + offset) * scale * inv[j] in float32, cos and sin
// rounded to the dtype T, then per pair o1 = T(T(x1 * c) - T(x2 * s)), o2 =
// T(T(x1 * s) + T(x2 * c)); features past dims are copied.
#pragma once

#include <cmath>
#include <vector>

#include "mlx/backend/cpu/unary_ops.h"

namespace mlxgo::cpu {

struct RopeSpec {
  int dims;
  bool traditional;
  float base, scale;
  const float* freqs;  // dims/2 frequencies, or nullptr: from base
};

inline std::vector<float> rope_inv_freqs(const RopeSpec& r) {
  const int half = r.dims / 2;
  std::vector<float> inv(half);
  if (r.freqs) {
    for (int j = 0; j < half; j++) inv[j] = 1.0f / r.freqs[j];
  } else {
    const float c = std::log(r.base) / half;
    for (int j = 0; j < half; j++) inv[j] = mx::detail::Exp{}(static_cast<float>(-j) * c);
  }
  return inv;
}

// rope_angles writes cos and sin (in T) of position t + offset for every
// frequency: half values each.
template <class TT>
inline void rope_angles(const RopeSpec& r, const std::vector<float>& inv, float offset, int t, TT* cs, TT* sn) {
  const float pos = (static_cast<float>(t) + offset) * r.scale;
  for (size_t j = 0; j < inv.size(); j++) {
    const float theta = pos * inv[j];
    cs[j] = static_cast<TT>(mx::detail::Cos{}(theta));
    sn[j] = static_cast<TT>(mx::detail::Sin{}(theta));
  }
}

// rope_row rotates one row of D features: at(i) reads feature i, out[i *
// os] receives it.
template <class TT, class At>
inline void rope_row(const RopeSpec& r, int D, const TT* c, const TT* s, At&& at, TT* out, int64_t os) {
  const int half = r.dims / 2;
  for (int j = 0; j < half; j++) {
    TT x1 = r.traditional ? at(2 * j) : at(j);
    TT x2 = r.traditional ? at(2 * j + 1) : at(half + j);
    TT o1 = static_cast<TT>(static_cast<TT>(x1 * c[j]) - static_cast<TT>(x2 * s[j]));
    TT o2 = static_cast<TT>(static_cast<TT>(x1 * s[j]) + static_cast<TT>(x2 * c[j]));
    if (r.traditional) {
      out[(2 * j) * os] = o1;
      out[(2 * j + 1) * os] = o2;
    } else {
      out[j * os] = o1;
      out[(half + j) * os] = o2;
    }
  }
  for (int i = r.dims; i < D; i++) out[i * os] = at(i);
}

}  // namespace mlxgo::cpu
