// kern_avx512.cpp — kern.inc built for one instruction set (flags in the Makefile).
#define MLXGO_ISA avx512
#define MLXGO_ISA_NAME "avx512"
#include "kern.inc"

namespace mlxgo::cpu {
const Isa* isa_avx512() { return &avx512::kIsa; }
}  // namespace mlxgo::cpu
