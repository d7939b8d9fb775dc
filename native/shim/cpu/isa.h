// isa.h — the interface between the CPU kernel dispatcher (kernels.cpp) and
// the per-instruction-set kernels (kern.inc compiled three times: AVX-512,
// AVX2+F16C, and baseline x86-64).
//
// The fidelity rule every kernel here follows: for each output element, the
// same IEEE single-precision operations, on the same operands, in the same
// order as MLX 0.32.4's scalar CPU kernel for that op, each rounded to the
// activation dtype where MLX rounds it. Vector lanes run over independent
// outputs and threads split outputs, never a reduction, so the results are
// bit-identical to MLX's however wide or parallel the kernel is. Nothing in
// this directory may be compiled with floating-point contraction (FMA) or
// reassociation: the Makefile passes -ffp-contract=off and no -ffast-math.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlxgo::cpu {

// Activation dtypes the kernels take.
enum Dt : int { F32 = 0, F16 = 1, BF16 = 2 };

inline int dt_size(Dt d) { return d == F32 ? 4 : 2; }

// Rows of a packed tile: the load-time layout of a quantized weight groups 16
// output rows and interleaves them word by word (see PackedLayout).
constexpr int kPackRows = 16;

// PackedLayout: a quantized weight [N][K] (nn.QuantizedLinear's layout,
// transpose=True) repacked once at load time for kernels that vectorize across
// output rows. Tile t holds rows 16t..16t+15 (rows past N are zero); inside a
// tile, group g is one block of
//   words_per_group x 16 uint32  (word j of each of the 16 rows, row fastest)
//   16 scales, 16 biases          (in the activation dtype, as stored)
// so one tile is a single forward stream. Same bytes as MLX's layout plus the
// padding of the last tile.
struct PackedLayout {
  int N, K, bits, group_size;
  Dt dt;
  int groups() const { return K / group_size; }
  int words_per_group() const { return group_size * bits / 32; }
  size_t group_bytes() const {
    return size_t(words_per_group()) * kPackRows * 4 + size_t(2) * kPackRows * dt_size(dt);
  }
  int tiles() const { return (N + kPackRows - 1) / kPackRows; }
  size_t tile_bytes() const { return group_bytes() * groups(); }
  size_t bytes() const { return tile_bytes() * tiles(); }
};

// One quantized matmul over one batch element. x is given as exact float
// copies of the activations (row stride ldx); the weight is either MLX's
// layout (w/scales/biases) or a PackedLayout blob (packed != nullptr, only
// with transpose). dt is the compute and output dtype (MLX's result_type of
// x, scales and biases); sdt is the dtype the scales and biases are stored in,
// which is dt or, for a float32 computation, a narrower dtype that MLX would
// cast up exactly (the packed kernel widens them in registers instead).
struct QmmJob {
  Dt dt, sdt;
  int bits, group_size;
  bool transpose;
  int M, N, K;
  const float* x;
  long ldx;
  const uint32_t* w;      // transpose: [N][K*bits/32]; else [K][N*bits/32]
  const void* scales;     // transpose: [N][K/gs];     else [K][N/gs]
  const void* biases;
  const uint8_t* packed;  // PackedLayout, or nullptr
  void* out;              // [M][N] in dt, row stride N
  uint64_t call;          // unique per call (kernels.cpp's next_call), or 0: lets a thread reuse its copy of x across tiles
};

// The opt-in quantized matmul of `--kernels fast` (fidelity L3: not MLX's
// arithmetic), for 4- and 8-bit packed weights. x is quantized per block of
// 32 values to int8 (d = max|x| / 127, q = round(x / d); a block holding a
// NaN or an infinity gets d = NaN), each block's dot product with the
// weight's integers is exact in int32, and per output, over the groups g in
// order and their blocks b in order:
//   acc = fma(float(isum_b), S_g * d_b, acc), then acc = fma(B_g, xsum_g, acc)
// (S_g, B_g: the group's scale and bias as floats; xsum_g: the sum of the
// group's x in float, in order), rounded once to the output dtype. Every
// instruction set does exactly these operations, so their results agree
// bitwise; the difference from MLX's is x's quantization error.
struct FastQmmJob {
  Dt dt, sdt;  // output dtype; dtype of the stored scales and biases
  int bits, group_size;
  int M, N, K;
  const uint32_t* xq;  // [M][K/4]: int8 x, four to a word; for 4 bits each 8 values are stored 0,2,4,6,1,3,5,7
  const float* xd;     // [M][K/32] block scales d
  const float* xs;     // [M][K/group_size] group sums of x
  const uint8_t* packed;
  void* out;           // [M][N] in dt
};

// One dense matmul over one batch element, out[M][N] = a[M][K] @ b[K][N],
// with MLX's epilogue (see Sem).
enum class Sem : int {
  // MLX float32 through reference BLAS sgemm, b not transposed (Fortran
  // NOTA): c starts at 0 (beta 0), C (beta 1) or beta*C, then c = c + a*b
  // over k, a pre-scaled by alpha (TEMP = ALPHA*B(L,J)).
  BlasNotA,
  // reference BLAS, b transposed: c = 0, c = c + b*a over k, then
  // alpha*c (beta 0) or alpha*c + beta*C.
  BlasTransA,
  // MLX's simd_gemm (bfloat16/float16): c = 0, c = c + a*b in float, then
  // T(alpha*c) or T(alpha*c + beta*float(C)).
  SimdGemm,
};

struct GemmJob {
  Dt dt;
  Sem sem;
  int M, N, K;
  const float* a;  // float copy or float input, a[m][k] = a[m*sam + k*sak]
  long sam, sak;
  const void* b;   // dt, b[k][n] = b[k*sbk + n*sbn]
  long sbk, sbn;
  const void* c;   // addmm's C in dt (nullptr: beta is 0), C[m][n] = c[m*scm + n*scn]
  long scm, scn;
  float alpha, beta;
  void* out;       // [M][N] in dt, row stride N
};

// The kernels of one instruction set. Work is split by the dispatcher into
// ranges of output tiles (tile_n outputs each) and of rows.
struct Isa {
  const char* name;
  int tile_n;
  void (*qmm)(const QmmJob& j, int tile0, int tile1, int m0, int m1);
  void (*gemm)(const GemmJob& j, int tile0, int tile1, int m0, int m1);
  // MLX's CPU softmax (precise) over each of rows rows of n values, in
  // place: s holds exact floats of dtype dt values, and gets back exact
  // floats of the dtype dt probabilities.
  void (*softmax_rows)(Dt dt, float* s, int rows, int n, long ld);
  // MLX's CPU logsumexp of n exact floats (one row), before the cast to the
  // output dtype.
  float (*lse_row)(const float* x, int n);
  // silu(g)·u over n float32 values, as MLX's Sigmoid and two multiplies.
  void (*silu_mul)(const float* g, const float* u, float* out, size_t n);
  // MLX's Erf over n float32 values (simd::erf).
  void (*erf)(const float* in, float* out, size_t n);
  // Self-test hooks: the dtype roundings and conversions over n floats, and
  // MLX's simd::exp.
  void (*round)(Dt dt, const float* in, float* out, size_t n);
  void (*store)(Dt dt, const float* in, void* out, size_t n);
  void (*exp)(const float* in, float* out, size_t n);
  // --kernels fast (see FastQmmJob): the portable kernel, and the one that
  // needs AVX-512 VNNI (nullptr on the other instruction sets).
  void (*qmm_fast)(const FastQmmJob& j, int tile0, int tile1, int m0, int m1);
  void (*qmm_fast_vnni)(const FastQmmJob& j, int tile0, int tile1, int m0, int m1);
};

const Isa* isa_avx512();
const Isa* isa_avx2();
const Isa* isa_base();

}  // namespace mlxgo::cpu
