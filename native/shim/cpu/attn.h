// attn.h — the attention kernel over explicit buffers, shared by the
// MlxgoAttention node (kernels.cpp: MLX's CPU sdpa composition as one node)
// and MlxgoCacheAttention (cache_attention.cpp: the queries' rope and that
// attention over a KV cache's buffers as one node).
#pragma once

#include <cstdint>

#include "isa.h"

namespace mlxgo::cpu {

// Strides are in elements; every array is indexed [B, H, L, D] as MLX's
// sdpa takes it, whatever its layout in memory.
struct AttnIO {
  Dt dt;  // of q, k, v, an additive mask, the sinks and the output
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  const void* q;
  int64_t sq[4];
  const void* k;
  int64_t sk[4];
  const void* v;
  int64_t sv[4];
  int mask = 0;  // 0 none, 1 causal, 2 boolean array, 3 additive array
  const void* m = nullptr;  // [B, Hq, Lq, Lk]
  int64_t sm[4] = {};
  const void* sinks = nullptr;  // [Hq]
  int64_t ss = 0;
  float scale = 1.0f;
  void* out;  // [B, Hq, Lq, Dv]
  int64_t so[4];
};

// attention computes softmax(T(scale) * q @ k^T (+ mask), precise) @ v with
// MLX's CPU composition's arithmetic per element (kernels.cpp).
void attention(const AttnIO& io);

}  // namespace mlxgo::cpu
