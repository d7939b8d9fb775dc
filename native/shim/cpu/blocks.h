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

}  // namespace mlxgo::cpu
