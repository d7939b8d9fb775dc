// kern_base.cpp — kern.inc built for one instruction set (flags in the Makefile).
#define MLXGO_ISA base
#define MLXGO_ISA_NAME "base"
#include "kern.inc"

namespace mlxgo::cpu {
const Isa* isa_base() { return &base::kIsa; }
}  // namespace mlxgo::cpu
