// blocks.h — the CPU kernels' runners over evaluated arrays, for nodes that
// chain several of them inside one evaluation (blocks.cpp). Each writes out,
// whose buffer the caller has set, exactly as the node of its own would.
#pragma once

#include "isa.h"
#include "../internal.h"

namespace mlxgo::cpu {

// kernels.cpp: x @ W.T over a packed weight (MlxgoPackedQuantizedMatmul),
// plus res when given (MlxgoPackedQuantizedMatmulAdd).
void packed_matmul_into(const mx::array& x, const mx::array& packed, mx::array& out, const PackedLayout& p,
                        const mx::array* res);
// fused.cpp: MlxgoRMSNorm (weight cast to out's dtype, or nullptr) and
// MlxgoSiluMul over a gate/up output's halves (float32).
void rms_norm_into(const mx::array& x, const mx::array* weight, float eps, mx::array& out);
void silu_mul_halves_into(const mx::array& gu, mx::array& out);

// cache_attention.cpp: whether x is the output of an unscheduled
// MlxgoCacheAttention node, and that node's kernel run over its inputs.
bool is_pending_attend(const mx::array& x);
void attend_into(const mx::Primitive& node, const std::vector<mx::array>& in, mx::array& out);
// blocks.cpp: res + attn @ O.T as one node with the cache attention that
// makes attn (is_pending_attend), or nullopt when they do not chain (see
// MlxgoAttentionTail).
std::optional<mx::array> attention_tail(const mx::array& attn, const mx::array& o_packed, const PackedLayout& o,
                                        const mx::array& res);

}  // namespace mlxgo::cpu
