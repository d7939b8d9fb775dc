// kern_avx2.cpp — kern.inc built for one instruction set (flags in the Makefile).
#define MLXGO_ISA avx2
#define MLXGO_ISA_NAME "avx2"
#include "kern.inc"

namespace mlxgo::cpu {
const Isa* isa_avx2() { return &avx2::kIsa; }
}  // namespace mlxgo::cpu
