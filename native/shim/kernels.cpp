// kernels.cpp — mlxgo's own CPU kernels inside MLX graphs.
//
// With kernels on (mlxgo_cpu_kernels_set), the shim builds the graph MLX's op
// builds (mx::matmul, mx::addmm, mx::quantized_matmul: same casts, reshapes,
// broadcasts) and replaces only the node MLX would run through its scalar CPU
// kernel by a primitive of ours with the same inputs, the same output, and
// bit-identical results (cpu/isa.h says why they are identical). Scaled
// dot-product attention on the CPU is MLX's composition of ops, rebuilt here
// op for op with our matmul. Anything else, any device but the CPU, and any
// case our kernels do not cover keeps MLX's own node.
#include <algorithm>
#include <atomic>
#include <immintrin.h>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <mutex>

#include "cpu/attn.h"
#include "cpu/blocks.h"
#include "cpu/isa.h"
#include "cpu/pool.h"
#include "cpu/prim.h"
#include "internal.h"
#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/primitives.h"
#include "mlx/utils.h"
#include "mlx/backend/cpu/simd/simd.h"

namespace mlxgo::cpu {

namespace {

std::atomic<int> g_mode{0};  // 0: MLX's kernels, 1: ours, 2: ours with the int8-activation matmul (L3)
std::atomic<const Isa*> g_isa{nullptr};

const Isa* best_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return isa_avx512();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma"))
    return isa_avx2();
  return isa_base();
}

const Isa* isa() {
  const Isa* p = g_isa.load();
  if (p == nullptr) {
    p = best_isa();
    g_isa.store(p);
  }
  return p;
}

bool on() { return g_mode.load(std::memory_order_relaxed) != 0; }

bool fast() { return g_mode.load(std::memory_order_relaxed) == 2; }

// The --kernels fast matmul of this ISA: the VNNI one where the CPU has it.
auto fast_kernel(const Isa* k) {
  static const bool vnni = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") != 0;
  }();
  return vnni && k->qmm_fast_vnni ? k->qmm_fast_vnni : k->qmm_fast;
}

}  // namespace

bool kernels_on() { return on(); }

const Isa* active_isa() { return isa(); }

namespace {

std::optional<Dt> dt_of(mx::Dtype d) {
  if (d == mx::float32) return F32;
  if (d == mx::float16) return F16;
  if (d == mx::bfloat16) return BF16;
  return std::nullopt;
}

// Exact float copies of n elements of dtype dt (MLX's own conversions).
void to_float(const void* src, mx::Dtype dt, int64_t idx, float* dst) {
  if (dt == mx::float32) *dst = static_cast<const float*>(src)[idx];
  else if (dt == mx::float16) *dst = static_cast<float>(static_cast<const mx::float16_t*>(src)[idx]);
  else *dst = static_cast<float>(static_cast<const mx::bfloat16_t*>(src)[idx]);
}

// A contiguous byte copy of an evaluated array (the data MLX's
// ensure_row_contiguous would give), or the array's own data.
struct Contig {
  std::vector<uint8_t> buf;
  const uint8_t* ptr;
  Contig(const mx::array& a) {
    if (a.flags().row_contiguous) {
      ptr = a.data<uint8_t>();
      return;
    }
    const size_t es = a.itemsize();
    buf.resize(a.size() * es);
    const uint8_t* src = a.data<uint8_t>();
    for (size_t i = 0; i < a.size(); i++) std::memcpy(&buf[i * es], src + loc(int64_t(i), a.shape(), a.strides()) * es, es);
    ptr = buf.data();
  }
};

// Work (multiply-adds) below which a kernel runs on the calling thread alone:
// a pool round costs a few microseconds. Measured on SmolLM2 decode (2-core
// EPYC), fanning out every matmul beats keeping the small ones serial (53
// against 43 tok/s at a 2M threshold), so only tiny kernels stay serial.
// MLXGO_PARALLEL_MIN overrides it.
int64_t parallel_min() {
  static const int64_t v = [] {
    const char* s = std::getenv("MLXGO_PARALLEL_MIN");
    return s ? std::atoll(s) : int64_t(1) << 16;
  }();
  return v;
}

// Splits rows x tiles x batches into pool tasks. Each task is one batch
// element, a run of tiles and a run of rows; rows are split only when there
// are too few tiles to keep every thread busy. work is the kernel's
// multiply-adds.
template <class F>
void parallel(int batch, int tiles, int M, int64_t work, F&& f) {
  if (work < parallel_min()) {
    for (int b = 0; b < batch; b++) f(b, 0, tiles, 0, M);
    return;
  }
  Pool& pool = Pool::get();
  const int threads = pool.threads();
  const int units = batch * tiles;
  int mchunks = 1;
  if (units < 4 * threads && M >= 16) {
    mchunks = std::min((4 * threads + units - 1) / units, (M + 7) / 8);
  }
  const int mstep = ((M + mchunks - 1) / mchunks + 7) / 8 * 8;
  mchunks = (M + mstep - 1) / mstep;
  pool.run(units * mchunks, [&](int i) {
    const int mc = i % mchunks, u = i / mchunks;
    const int b = u / tiles, t = u % tiles;
    f(b, t, t + 1, mc * mstep, std::min(M, (mc + 1) * mstep));
  });
}

// ---- dense matmul (Matmul / AddMM) ----

void run_gemm(const mx::array& a, const mx::array& b, const mx::array* c, mx::array& out, float alpha, float beta) {
  const Isa* k = isa();
  const Dt dt = *dt_of(out.dtype());
  const int nd = a.ndim();
  const int M = a.shape(-2), K = a.shape(-1), N = b.shape(-1);
  const int64_t batch = a.size() / (int64_t(M) * K);
  // MLX's check_transpose: a layout is "transposed" only for these strides;
  // any other layout is copied to row-major (not transposed) first.
  auto transposed = [](const mx::array& x) {
    auto stx = x.strides()[x.ndim() - 2], sty = x.strides()[x.ndim() - 1];
    if (stx == x.shape(-1) && sty == 1) return false;
    return stx == 1 && sty == x.shape(-2);
  };
  GemmJob j{};
  j.dt = dt;
  j.sem = dt != F32 ? Sem::SimdGemm : transposed(b) ? Sem::BlasTransA : Sem::BlasNotA;
  j.M = M;
  j.N = N;
  j.K = K;
  j.alpha = alpha;
  j.beta = c ? beta : 0.0f;
  const int64_t asm_ = a.strides()[nd - 2], ask = a.strides()[nd - 1];
  j.sbk = b.strides()[b.ndim() - 2];
  j.sbn = b.strides()[b.ndim() - 1];
  if (c) {
    j.scm = c->strides()[c->ndim() - 2];
    j.scn = c->strides()[c->ndim() - 1];
  }
  const int tiles = (N + k->tile_n - 1) / k->tile_n;
  // a as floats: float32 is read in place, except that BLAS's non-transposed
  // path scales a by alpha first (TEMP = ALPHA*B(L,J)); other dtypes are
  // converted once per batch element.
  const bool scale_a = j.sem == Sem::BlasNotA && alpha != 1.0f;
  const bool copy_a = dt != F32 || scale_a;
  const size_t es = out.itemsize();
  // One job per batch element, all run in one pool round: attention's
  // matmuls are many small batches (heads) of a few rows each.
  std::vector<float> af(copy_a ? size_t(batch) * M * K : 0);
  std::vector<GemmJob> jobs(batch, j);
  for (int64_t i = 0; i < batch; i++) {
    const int64_t ao = loc(i * M * K, a.shape(), a.strides());
    GemmJob& ji = jobs[i];
    if (copy_a) {
      float* dst = af.data() + size_t(i) * M * K;
      for (int m = 0; m < M; m++)
        for (int kk = 0; kk < K; kk++) {
          float v;
          to_float(a.data<void>(), a.dtype(), ao + m * asm_ + kk * ask, &v);
          dst[size_t(m) * K + kk] = scale_a ? alpha * v : v;
        }
      ji.a = dst;
      ji.sam = K;
      ji.sak = 1;
    } else {
      ji.a = a.data<float>() + ao;
      ji.sam = asm_;
      ji.sak = ask;
    }
    ji.b = b.data<uint8_t>() + loc(i * K * N, b.shape(), b.strides()) * es;
    if (c) ji.c = c->data<uint8_t>() + loc(i * M * N, c->shape(), c->strides()) * es;
    ji.out = out.data<uint8_t>() + i * M * N * es;
  }
  parallel(int(batch), tiles, M, batch * M * N * K,
           [&](int b, int t0, int t1, int m0, int m1) { k->gemm(jobs[b], t0, t1, m0, m1); });
}

struct Gemm {
  static constexpr const char* name = "MlxgoMatmul";
  struct Params {
    bool addmm;
    float alpha, beta;
  };
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    run_gemm(in[0], in[1], p.addmm ? &in[2] : nullptr, out, p.alpha, p.beta);
  }
};

// ---- quantized matmul ----

uint64_t next_call() {
  static std::atomic<uint64_t> n{0};
  return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

struct QmmMeta {
  int group_size, bits;
  bool transpose;
};

void run_qmm(const mx::array& x, const mx::array& w, const mx::array& scales, const mx::array& biases,
             mx::array& out, QmmMeta q) {
  const Isa* k = isa();
  const Dt dt = *dt_of(out.dtype());
  const int K = x.shape(-1), M = x.ndim() > 1 ? x.shape(-2) : 1, N = out.shape(-1);
  const int64_t w_els = w.ndim() > 2 ? int64_t(w.shape(-1)) * w.shape(-2) : 0;
  const int64_t g_els = w.ndim() > 2 ? int64_t(scales.shape(-1)) * scales.shape(-2) : 0;
  const int64_t batch = x.size() / (int64_t(K) * M);
  Contig xc(x), wc(w), sc(scales), bc(biases);
  auto cstrides = [](const mx::array& a) {
    mx::Strides s(a.ndim(), 1);
    for (int i = a.ndim() - 2; i >= 0; i--) s[i] = s[i + 1] * a.shape(i + 1);
    return s;
  };
  const auto wst = cstrides(w), sst = cstrides(scales), bst = cstrides(biases);
  const size_t es = out.itemsize();
  std::vector<float> xf(dt == F32 ? 0 : x.size());
  if (dt != F32)
    for (size_t i = 0; i < x.size(); i++) to_float(xc.ptr, x.dtype(), int64_t(i), &xf[i]);
  const int tiles = (N + k->tile_n - 1) / k->tile_n;
  for (int64_t i = 0; i < batch; i++) {
    QmmJob j{};
    j.dt = dt;
    j.sdt = dt;  // quantized_matmul already cast the scales to the result type
    j.bits = q.bits;
    j.group_size = q.group_size;
    j.transpose = q.transpose;
    j.M = M;
    j.N = N;
    j.K = K;
    j.x = (dt == F32 ? reinterpret_cast<const float*>(xc.ptr) : xf.data()) + i * M * K;
    j.ldx = K;
    j.w = reinterpret_cast<const uint32_t*>(wc.ptr) + loc(i * w_els, w.shape(), wst);
    j.scales = sc.ptr + loc(i * g_els, scales.shape(), sst) * es;
    j.biases = bc.ptr + loc(i * g_els, biases.shape(), bst) * es;
    j.out = out.data<uint8_t>() + i * M * N * es;
    j.call = next_call();
    parallel(1, tiles, M, int64_t(M) * N * K, [&](int, int t0, int t1, int m0, int m1) { k->qmm(j, t0, t1, m0, m1); });
  }
}

struct Qmm {
  static constexpr const char* name = "MlxgoQuantizedMatmul";
  using Params = QmmMeta;
  static void run(const Params& q, const std::vector<mx::array>& in, mx::array& out) {
    run_qmm(in[0], in[1], in[2], in[3], out, q);
  }
};

// ---- packed weights ----

// quantize_rows is FastQmmJob's x: per row, each block of 32 values as int8
// (d = max|x| / 127, q = round(x / d), ties away from zero as llama.cpp's
// roundf; a block with a NaN or an infinity gets d = NaN, so its outputs are
// NaN, where MLX's would be NaN or infinite), the block scales, and each
// group's sum of x in order.
void quantize_rows(const float* x, int M, int K, int bits, int gs, std::vector<uint32_t>& xq, std::vector<float>& xd,
                   std::vector<float>& xs) {
  // Every element is written below: resizing the reused buffers is enough.
  xq.resize(size_t(M) * K / 4);
  xd.resize(size_t(M) * K / 32);
  xs.resize(size_t(M) * (K / gs));
  // Where value i of a block of 8 goes: 4-bit words pair values 0,2,4,6 and 1,3,5,7.
  static constexpr int perm4[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int m = 0; m < M; m++) {
    const float* r = x + size_t(m) * K;
    int8_t* q = reinterpret_cast<int8_t*>(xq.data() + size_t(m) * K / 4);
    for (int b = 0; b < K / 32; b++) {
      const float* v = r + b * 32;
      float amax = 0.0f;
      bool finite = true;
      for (int i = 0; i < 32; i++) {
        finite = finite && std::isfinite(v[i]);
        amax = std::max(amax, std::fabs(v[i]));
      }
      const float d = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
      xd[size_t(m) * (K / 32) + b] = d;
      const float id = finite && d != 0.0f ? 1.0f / d : 0.0f;
      for (int i = 0; i < 32; i++) {
        const int qi = int(std::roundf(v[i] * id));
        const int at = bits == 4 ? (i / 8) * 8 + perm4[i % 8] : i;
        q[b * 32 + at] = int8_t(std::clamp(qi, -127, 127));
      }
    }
    for (int g = 0; g < K / gs; g++) {
      float sum = 0.0f;
      for (int i = 0; i < gs; i++) sum += r[g * gs + i];
      xs[size_t(m) * (K / gs) + g] = sum;
    }
  }
}

void run_fast_qmm(const float* x, int M, int K, mx::array& out, const mx::array& packed, const PackedLayout& p,
                  Dt dt) {
  const Isa* k = isa();
  thread_local std::vector<uint32_t> xq;
  thread_local std::vector<float> xd, xs;
  quantize_rows(x, M, K, p.bits, p.group_size, xq, xd, xs);
  FastQmmJob j{};
  j.dt = dt;
  j.sdt = p.dt;
  j.bits = p.bits;
  j.group_size = p.group_size;
  j.M = M;
  j.N = p.N;
  j.K = K;
  j.xq = xq.data();
  j.xd = xd.data();
  j.xs = xs.data();
  j.packed = packed.data<uint8_t>();
  j.out = out.data<uint8_t>();
  const auto kern = fast_kernel(k);
  const int tiles = (p.N + k->tile_n - 1) / k->tile_n;
  parallel(1, tiles, M, int64_t(M) * p.N * K, [&](int, int t0, int t1, int m0, int m1) { kern(j, t0, t1, m0, m1); });
}

void run_packed_qmm(const mx::array& x, const mx::array& packed, mx::array& out, const PackedLayout& p) {
  const Isa* k = isa();
  const int K = x.shape(-1);
  const int64_t M = x.size() / K;
  const Dt dt = *dt_of(out.dtype());
  Contig xc(x);
  std::vector<float> xf(dt == F32 ? 0 : x.size());
  if (dt != F32)
    for (size_t i = 0; i < x.size(); i++) to_float(xc.ptr, x.dtype(), int64_t(i), &xf[i]);
  if (fast() && (p.bits == 4 || p.bits == 8) && p.group_size % 32 == 0 && K % 32 == 0) {
    run_fast_qmm(dt == F32 ? reinterpret_cast<const float*>(xc.ptr) : xf.data(), int(M), K, out, packed, p, dt);
    return;
  }
  QmmJob j{};
  j.dt = dt;
  j.sdt = p.dt;
  j.bits = p.bits;
  j.group_size = p.group_size;
  j.transpose = true;
  j.M = int(M);
  j.N = p.N;
  j.K = K;
  j.x = dt == F32 ? reinterpret_cast<const float*>(xc.ptr) : xf.data();
  j.ldx = K;
  j.packed = packed.data<uint8_t>();
  j.out = out.data<uint8_t>();
  j.call = next_call();
  const int tiles = (p.N + k->tile_n - 1) / k->tile_n;
  parallel(1, tiles, int(M), M * p.N * K, [&](int, int t0, int t1, int m0, int m1) { k->qmm(j, t0, t1, m0, m1); });
}

// Embedding rows from a packed weight: mlx-lm's QuantizedEmbedding, i.e.
// dequantize(w[ids], scales[ids], biases[ids]), which MLX's CPU composes as
// T(T(q) * scale) + bias per element (multiply, then add, each rounded to T).
void run_packed_embed(const mx::array& ids, const mx::array& packed, mx::array& out, const PackedLayout& p) {
  const Isa* k = isa();
  Contig ic(ids);
  const int K = p.K, G = p.groups(), wpg = p.words_per_group();
  const size_t sb = size_t(dt_size(p.dt)), es = out.itemsize();
  std::vector<float> row(K), q(K), s(K), b(K);
  for (size_t r = 0; r < ids.size(); r++) {
    int64_t id;
    switch (ids.dtype().val()) {
      case mx::Dtype::Val::int32: id = reinterpret_cast<const int32_t*>(ic.ptr)[r]; break;
      case mx::Dtype::Val::uint32: id = reinterpret_cast<const uint32_t*>(ic.ptr)[r]; break;
      case mx::Dtype::Val::int64: id = reinterpret_cast<const int64_t*>(ic.ptr)[r]; break;
      default: id = reinterpret_cast<const uint64_t*>(ic.ptr)[r]; break;
    }
    if (id < 0) id += p.N;  // take() wraps negative indices
    if (id < 0 || id >= p.N) id = id < 0 ? 0 : p.N - 1;
    const uint8_t* tile = packed.data<uint8_t>() + size_t(id / kPackRows) * p.tile_bytes();
    const int lane = int(id % kPackRows);
    for (int g = 0; g < G; g++) {
      const uint8_t* blk = tile + size_t(g) * p.group_bytes();
      const uint32_t* words = reinterpret_cast<const uint32_t*>(blk);
      const uint8_t* sc = blk + size_t(wpg) * kPackRows * 4;
      float sv, bv;
      if (p.dt == F32) {
        std::memcpy(&sv, sc + lane * 4, 4);
        std::memcpy(&bv, sc + kPackRows * 4 + lane * 4, 4);
      } else {
        to_float(sc, p.dt == F16 ? mx::float16 : mx::bfloat16, lane, &sv);
        to_float(sc + kPackRows * sb, p.dt == F16 ? mx::float16 : mx::bfloat16, lane, &bv);
      }
      for (int i = 0; i < p.group_size; i++) {
        const long bit = long(i) * p.bits;
        const int wi = int(bit / 32), sh = int(bit % 32);
        uint32_t v = words[wi * kPackRows + lane] >> sh;
        if (sh + p.bits > 32) v |= words[(wi + 1) * kPackRows + lane] << (32 - sh);
        v &= (1u << p.bits) - 1;
        const int kk = g * p.group_size + i;
        q[kk] = float(v);
        s[kk] = sv;
        b[kk] = bv;
      }
    }
    // T(q) * scale, rounded to T, + bias, rounded to T; the ISA's rounding is
    // MLX's. q is an integer below 256, exact in every dtype.
    std::vector<float> t(K);
    for (int kk = 0; kk < K; kk++) t[kk] = q[kk] * s[kk];
    k->round(p.dt, t.data(), t.data(), K);
    for (int kk = 0; kk < K; kk++) t[kk] = t[kk] + b[kk];
    k->store(p.dt, t.data(), out.data<uint8_t>() + r * K * es, K);
  }
}

struct PackedMatmul {
  static constexpr const char* name = "MlxgoPackedQuantizedMatmul";
  using Params = PackedLayout;
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    run_packed_qmm(in[0], in[1], out, p);
  }
};

// res + x @ W.T, a residual connection after a projection, as one node: the
// product as PackedMatmul makes it, then MLX's Add of the two in their dtype
// (float(a) + float(b), rounded once; the same result in either order).
struct PackedMatmulAdd {
  static constexpr const char* name = "MlxgoPackedQuantizedMatmulAdd";
  using Params = PackedLayout;
  template <class TT>
  static void add(const mx::array& r, mx::array& out) {
    TT* o = out.data<TT>();
    const TT* rp = r.data<TT>();
    const size_t n = out.size();
    if (r.flags().row_contiguous) {
      for (size_t i = 0; i < n; i++) o[i] = static_cast<TT>(rp[i] + o[i]);
    } else {
      for (size_t i = 0; i < n; i++) o[i] = static_cast<TT>(rp[loc(int64_t(i), r.shape(), r.strides())] + o[i]);
    }
  }
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    run_packed_qmm(in[0], in[1], out, p);
    if (out.dtype() == mx::float32) add<float>(in[2], out);
    else if (out.dtype() == mx::float16) add<mx::float16_t>(in[2], out);
    else add<mx::bfloat16_t>(in[2], out);
  }
};

struct PackedEmbedding {
  static constexpr const char* name = "MlxgoPackedEmbedding";
  using Params = PackedLayout;
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    run_packed_embed(in[0], in[1], out, p);
  }
};

// ---- fused attention ----
//
// The composition mlxgo::cpu::sdpa builds (MLX's CPU fallback), as one node:
// per (batch, head, block of query rows): q' = T(scale) * q in T; scores =
// q' @ k^T with the gemm's semantics; the mask (causal / boolean: where(m,
// s, finfo(T).min); additive: s + m in T); sinks prepended; MLX's softmax;
// p @ v. Same arithmetic per element; one scheduling step instead of
// fifteen. It reads its buffers through AttnIO (cpu/attn.h), so the cache
// attention node runs it over the cache's own buffers.
struct AttnMeta {
  float scale;
  int mask;  // 0 none, 1 causal, 2 boolean array, 3 additive array
  bool sinks;
};

template <class TT>
void run_attention_typed(const AttnIO& io) {
  const Isa* k = isa();
  const Dt dt = io.dt;
  const int B = io.B, Hq = io.Hq, Lq = io.Lq, D = io.D;
  const int Hkv = io.Hkv, Lk = io.Lk, Dv = io.Dv;
  const int rep = Hq / Hkv;
  const int n = Lk + (io.sinks ? 1 : 0);
  const float neg = static_cast<float>(static_cast<TT>(
      mx::finfo(dt == F32 ? mx::float32 : dt == F16 ? mx::float16 : mx::bfloat16).min));
  const TT scale_t = static_cast<TT>(io.scale);
  // MLX's check_transpose on b = swapaxes(k) and on v: "transposed" exactly
  // for these strides (any other layout is copied to row-major first; the
  // bits are the same either way, this only picks the BLAS loop).
  const bool kt = !(io.sk[3] == Lk && io.sk[2] == 1) && io.sk[3] == 1 && io.sk[2] == D;
  const bool vt = !(io.sv[2] == Dv && io.sv[3] == 1) && io.sv[2] == 1 && io.sv[3] == Lk;
  const Sem sem_s = dt != F32 ? Sem::SimdGemm : (kt ? Sem::BlasTransA : Sem::BlasNotA);
  const Sem sem_v = dt != F32 ? Sem::SimdGemm : (vt ? Sem::BlasTransA : Sem::BlasNotA);
  // The rep query heads that share a key/value head are rows of one
  // product with it, as MLX's fallback reshapes them ([B, Hkv, rep*Lq, D]):
  // each output is still its own sum, so grouping them changes no bit, and
  // the keys are read (and, for the panel, transposed) once per group
  // rather than once per query head. Row r of group hk is query head
  // hk*rep + r/Lq at position r%Lq.
  constexpr int RB = 32;  // query rows per task
  const int R = rep * Lq;
  const int blocks = (R + RB - 1) / RB;
  const TT* qp = static_cast<const TT*>(io.q);
  TT* op = static_cast<TT*>(io.out);
  // Output rows of a group lie Dv apart in [B, Hq, Lq, Dv], and in
  // [B, Lq, Hq, Dv] (the heads transposed back) when Lq is 1: the product
  // is written in place. Otherwise through a buffer, row by row.
  const bool rows_direct =
      io.so[3] == 1 && ((io.so[2] == Dv && io.so[1] == int64_t(Lq) * Dv) || (Lq == 1 && io.so[1] == Dv));
  auto out_row = [&](int b, int h, int qi) { return op + b * io.so[0] + h * io.so[1] + qi * io.so[2]; };
  // A task is one (batch, key/value head, block of rows); its phases are
  // the scaled queries, the scores (QK^T, by tiles of keys), the masked
  // softmax, and ·V (by tiles of value columns). Tile ranges write disjoint
  // outputs, each still one sum of its own, so splitting them changes no bit.
  struct Buf {
    int b = 0, hk = 0, i0 = 0, rows = 0;
    std::vector<float> qf, s;
    std::vector<TT> sc, o;
  };
  auto prep = [&](int task, Buf& w) {
    const int blk = task % blocks, bh = task / blocks;
    w.hk = bh % Hkv;
    w.b = bh / Hkv;
    w.i0 = blk * RB;
    w.rows = std::min(RB, R - w.i0);
    const int b = w.b, hk = w.hk, i0 = w.i0, rows = w.rows;
    w.qf.resize(size_t(rows) * D);
    w.s.resize(size_t(rows) * n);
    w.sc.resize(size_t(rows) * Lk);
    if (!rows_direct) w.o.resize(size_t(rows) * Dv);
    for (int i = 0; i < rows; i++) {
      const int h = hk * rep + (i0 + i) / Lq, qi = (i0 + i) % Lq;
      for (int d = 0; d < D; d++) {
        const int64_t l = b * io.sq[0] + h * io.sq[1] + qi * io.sq[2] + d * io.sq[3];
        w.qf[size_t(i) * D + d] = static_cast<float>(static_cast<TT>(scale_t * qp[l]));
      }
    }
  };
  auto scores = [&](Buf& w, int t0, int t1) {
    GemmJob js{};
    js.dt = dt;
    js.sem = sem_s;
    js.M = w.rows;
    js.N = Lk;
    js.K = D;
    js.a = w.qf.data();
    js.sam = D;
    js.sak = 1;
    js.b = static_cast<const TT*>(io.k) + w.b * io.sk[0] + w.hk * io.sk[1];
    js.sbk = io.sk[3];
    js.sbn = io.sk[2];
    js.alpha = 1.0f;
    js.out = w.sc.data();
    k->gemm(js, t0, t1, 0, w.rows);
  };
  auto soft = [&](Buf& w) {
    const int b = w.b, hk = w.hk, i0 = w.i0, rows = w.rows;
    const int off = Lk - Lq;
    for (int i = 0; i < rows; i++) {
      const int h = hk * rep + (i0 + i) / Lq, qi = (i0 + i) % Lq;
      float* row = w.s.data() + size_t(i) * n;
      if (io.sinks) {
        row[0] = static_cast<float>(static_cast<const TT*>(io.sinks)[h * io.ss]);
        row++;
      }
      for (int j = 0; j < Lk; j++) {
        TT x = w.sc[size_t(i) * Lk + j];
        if (io.mask == 1) {
          if (!(off + qi >= j)) x = static_cast<TT>(neg);
        } else if (io.mask >= 2) {
          const int64_t l = b * io.sm[0] + h * io.sm[1] + qi * io.sm[2] + j * io.sm[3];
          if (io.mask == 2) {
            if (!static_cast<const bool*>(io.m)[l]) x = static_cast<TT>(neg);
          } else {
            x = static_cast<TT>(x + static_cast<const TT*>(io.m)[l]);
          }
        }
        row[j] = static_cast<float>(x);
      }
    }
    k->softmax_rows(dt, w.s.data(), rows, n, n);
  };
  auto values = [&](Buf& w, int t0, int t1) {
    GemmJob jv{};
    jv.dt = dt;
    jv.sem = sem_v;
    jv.M = w.rows;
    jv.N = Dv;
    jv.K = Lk;
    jv.a = w.s.data() + (io.sinks ? 1 : 0);
    jv.sam = n;
    jv.sak = 1;
    jv.b = static_cast<const TT*>(io.v) + w.b * io.sv[0] + w.hk * io.sv[1];
    jv.sbk = io.sv[2];
    jv.sbn = io.sv[3];
    jv.alpha = 1.0f;
    jv.out = rows_direct ? out_row(w.b, w.hk * rep + w.i0 / Lq, w.i0 % Lq) : w.o.data();
    k->gemm(jv, t0, t1, 0, w.rows);
  };
  auto scatter = [&](Buf& w) {
    if (rows_direct) return;
    for (int i = 0; i < w.rows; i++) {
      const int h = w.hk * rep + (w.i0 + i) / Lq, qi = (w.i0 + i) % Lq;
      TT* dst = out_row(w.b, h, qi);
      const TT* src = w.o.data() + size_t(i) * Dv;
      for (int d = 0; d < Dv; d++) dst[d * io.so[3]] = src[d];
    }
  };
  const int key_tiles = (Lk + k->tile_n - 1) / k->tile_n, value_tiles = (Dv + k->tile_n - 1) / k->tile_n;
  auto one = [&](int task) {
    Buf w;
    prep(task, w);
    scores(w, 0, key_tiles);
    soft(w);
    values(w, 0, value_tiles);
    scatter(w);
  };
  const int tasks = B * Hkv * blocks;
  const int threads = Pool::get().threads();
  if (int64_t(B) * Hq * Lq * Lk * (D + Dv) < parallel_min()) {
    for (int t = 0; t < tasks; t++) one(t);
  } else if (tasks >= 2 * threads) {
    Pool::get().run(tasks, one);
  } else {
    // Decode: a task per key/value head is too few to keep the threads busy
    // (SmolLM2's 3 on 2 threads left one with two thirds of the work), so
    // the scores and ·V run as tile ranges of every task over the pool, with
    // the softmax between them; the buffers of so few tasks are small.
    //
    // One pool round for the three phases: its calls are the score parts
    // of every task, then the softmaxes, then the ·V parts, claimed in that
    // order; a softmax waits for its task's score parts and a ·V part for
    // its softmax. A claimed call is running or done, so a wait is only
    // ever on work under way; a thread that finds its softmax's scores
    // still running waits a moment instead of idling until a whole round
    // ends (three rounds left one thread idle while the other did the
    // third head's softmax, and cost two more wake-ups a layer).
    std::vector<Buf> ws(static_cast<size_t>(tasks));
    for (int t = 0; t < tasks; t++) prep(t, ws[size_t(t)]);
    auto parts_of = [&](int tiles) { return std::max(1, std::min(tiles, (4 * threads + tasks - 1) / tasks)); };
    const int sp = parts_of(key_tiles), vp = parts_of(value_tiles);
    std::vector<std::atomic<int>> scored(static_cast<size_t>(tasks)), softened(static_cast<size_t>(tasks));
    auto wait_for = [](const std::atomic<int>& c, int n) {
      for (int spins = 0; c.load(std::memory_order_acquire) < n; spins++) {
        if (spins < 4096) _mm_pause();
        else std::this_thread::yield();  // its worker was taken off its core
      }
    };
    Pool::get().run(tasks * (sp + 1 + vp), [&](int i) {
      if (i < tasks * sp) {
        const int t = i / sp, c = i % sp;
        scores(ws[size_t(t)], key_tiles * c / sp, key_tiles * (c + 1) / sp);
        scored[size_t(t)].fetch_add(1, std::memory_order_release);
      } else if ((i -= tasks * sp) < tasks) {
        wait_for(scored[size_t(i)], sp);
        soft(ws[size_t(i)]);
        softened[size_t(i)].store(1, std::memory_order_release);
      } else {
        i -= tasks;
        const int t = i / vp, c = i % vp;
        wait_for(softened[size_t(t)], 1);
        values(ws[size_t(t)], value_tiles * c / vp, value_tiles * (c + 1) / vp);
      }
    });
    for (auto& w : ws) scatter(w);
  }
}

// io_strides copies an array's last four strides into s.
void io_strides(const mx::array& a, int64_t (&s)[4]) {
  for (int i = 0; i < 4; i++) s[i] = a.strides()[i];
}

struct Attention {
  static constexpr const char* name = "MlxgoAttention";
  using Params = AttnMeta;
  static void run(const Params& m, const std::vector<mx::array>& in, mx::array& out) {
    const mx::array &q = in[0], &kk = in[1], &v = in[2];
    AttnIO io{};
    io.dt = *dt_of(out.dtype());
    io.B = q.shape(0);
    io.Hq = q.shape(1);
    io.Lq = q.shape(2);
    io.D = q.shape(3);
    io.Hkv = kk.shape(1);
    io.Lk = kk.shape(2);
    io.Dv = v.shape(3);
    io.q = q.data<void>();
    io_strides(q, io.sq);
    io.k = kk.data<void>();
    io_strides(kk, io.sk);
    io.v = v.data<void>();
    io_strides(v, io.sv);
    io.mask = m.mask;
    if (m.mask >= 2) {
      io.m = in[3].data<void>();
      io_strides(in[3], io.sm);
    }
    if (m.sinks) {
      io.sinks = in.back().data<void>();
      io.ss = in.back().strides()[0];
    }
    io.scale = m.scale;
    io.out = out.data<void>();
    io_strides(out, io.so);
    attention(io);
  }
};

bool on_cpu(const mx::array& a) { return a.has_primitive() && a.primitive().device() == mx::Device::cpu; }

// swap replaces MLX's node named `name` at the top of `out` (or under one
// reshape/squeeze, which mx::matmul adds for batched or 1-D inputs) by
// make(node's inputs), keeping the rest of the graph as MLX built it.
template <class Make>
mx::array swap(const mx::array& out, const char* name, Make&& make) {
  auto is = [&](const mx::array& a) { return a.has_primitive() && std::strcmp(a.primitive().name(), name) == 0; };
  if (is(out) && on_cpu(out)) return make(out);
  if (out.has_primitive() && out.inputs().size() == 1 && is(out.inputs()[0]) && on_cpu(out.inputs()[0])) {
    const char* top = out.primitive().name();
    if (std::strcmp(top, "Reshape") == 0 || std::strcmp(top, "Squeeze") == 0) {
      return mx::reshape(make(out.inputs()[0]), out.shape());
    }
  }
  return out;
}

bool all_positive(const mx::Shape& s) {
  for (int d : s)
    if (d <= 0) return false;
  return true;
}

}  // namespace

void packed_matmul_into(const mx::array& x, const mx::array& packed, mx::array& out, const PackedLayout& p,
                        const mx::array* res) {
  run_packed_qmm(x, packed, out, p);
  if (!res) return;
  if (out.dtype() == mx::float32) PackedMatmulAdd::add<float>(*res, out);
  else if (out.dtype() == mx::float16) PackedMatmulAdd::add<mx::float16_t>(*res, out);
  else PackedMatmulAdd::add<mx::bfloat16_t>(*res, out);
}

void attention(const AttnIO& io) {
  switch (io.dt) {
    case F32: return run_attention_typed<float>(io);
    case F16: return run_attention_typed<mx::float16_t>(io);
    case BF16: return run_attention_typed<mx::bfloat16_t>(io);
  }
}

mx::array matmul(const mx::array& a, const mx::array& b) {
  auto out = mx::matmul(a, b);
  if (!on() || !dt_of(out.dtype()) || a.shape(-1) == 0 || !all_positive(out.shape())) return out;
  return swap(out, "Matmul", [](const mx::array& n) {
    return node<Gemm>(n.shape(), n.dtype(), {false, 1.0f, 0.0f}, n.inputs(), n.primitive().stream());
  });
}

mx::array addmm(const mx::array& c, const mx::array& a, const mx::array& b, float alpha, float beta) {
  auto out = mx::addmm(c, a, b, alpha, beta);
  if (!on() || !dt_of(out.dtype()) || a.shape(-1) == 0 || !all_positive(out.shape())) return out;
  if (alpha == 0.0f) return out;  // BLAS returns beta*C without touching a or b
  return swap(out, "AddMM", [alpha, beta](const mx::array& n) {
    return node<Gemm>(n.shape(), n.dtype(), {true, alpha, beta}, n.inputs(), n.primitive().stream());
  });
}

mx::array quantized_matmul(const mx::array& x, const mx::array& w, const mx::array& scales,
                           const std::optional<mx::array>& biases, bool transpose, int group_size, int bits,
                           const std::string& mode) {
  auto out = mx::quantized_matmul(x, w, scales, biases, transpose, group_size, bits, mode);
  if (!on() || mode != "affine" || !biases || !dt_of(out.dtype()) || !all_positive(out.shape()) ||
      x.shape(-1) == 0)
    return out;
  if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8) return out;
  if (group_size != 32 && group_size != 64 && group_size != 128) return out;
  return swap(out, "QuantizedMatmul", [=](const mx::array& n) {
    if (n.inputs().size() != 4) return n;
    return node<Qmm>(n.shape(), n.dtype(), {group_size, bits, transpose}, n.inputs(), n.primitive().stream());
  });
}

// MLX's CPU scaled_dot_product_attention is its fallback composition; this is
// the same composition, op for op, with the matmuls above.
mx::array sdpa(const mx::array& queries, const mx::array& keys, const mx::array& values, float scale,
               const std::string& mask_mode, std::optional<mx::array> mask_arr,
               const std::optional<mx::array>& sinks) {
  auto stock = [&] {
    return mx::fast::scaled_dot_product_attention(queries, keys, values, scale, mask_mode, mask_arr, sinks);
  };
  if (!on() || mx::default_device() != mx::Device::cpu) return stock();
  if (queries.ndim() != 4 || keys.ndim() != 4 || values.ndim() != 4) return stock();
  if (mask_mode != "" && mask_mode != "causal") return stock();
  if (mask_mode == "causal" && mask_arr) return stock();
  if (mask_arr && mask_arr->ndim() > 4) return stock();
  const int n_q_heads = queries.shape(-3), n_kv_heads = keys.shape(-3);
  if (keys.shape(0) != queries.shape(0) || values.shape(0) != queries.shape(0) ||
      queries.shape(-1) != keys.shape(-1) || keys.shape(-3) != values.shape(-3) || n_kv_heads == 0 ||
      n_q_heads % n_kv_heads != 0)
    return stock();
  auto final_type = mx::result_type({queries, keys, values});
  if (!mx::issubdtype(final_type, mx::floating)) return stock();
  const bool do_causal = mask_mode == "causal";
  const bool has_arr_mask = mask_arr.has_value();
  const bool has_sinks = sinks.has_value();
  if (has_arr_mask && mx::promote_types(mask_arr->dtype(), final_type) != final_type) return stock();
  if (has_sinks && (mx::promote_types(sinks->dtype(), final_type) != final_type || sinks->ndim() != 1 ||
                    sinks->shape(0) != n_q_heads))
    return stock();

  std::vector<mx::array> inputs = {mx::astype(queries, final_type), mx::astype(keys, final_type),
                                   mx::astype(values, final_type)};
  if (has_arr_mask) {
    auto m = *mask_arr;
    if (m.dtype() != mx::bool_) m = mx::astype(m, final_type);
    auto mask_shape = queries.shape();
    mask_shape.back() = keys.shape(-2);
    inputs.push_back(mx::broadcast_to(m, mask_shape));
  }
  if (has_sinks) inputs.push_back(mx::astype(*sinks, final_type));

  if (!dt_of(final_type) || queries.shape(-1) == 0 || keys.shape(-2) == 0) return stock();
  auto out_shape = queries.shape();
  out_shape.back() = values.shape(-1);
  const int mask_kind = do_causal ? 1 : !has_arr_mask ? 0 : inputs[3].dtype() == mx::bool_ ? 2 : 3;
  return node<Attention>(out_shape, final_type, {scale, mask_kind, has_sinks}, std::move(inputs));
}

// pack_tile: rows [16*tile, 16*tile+16) of an MLX-layout weight [N][K] in
// PackedLayout's tile format (rows past N are zeros).
void pack_tile(const PackedLayout& p, const uint32_t* w, const void* scales, const void* biases, int tile,
               uint8_t* dst) {
  const int G = p.groups(), wpg = p.words_per_group(), kw = p.K * p.bits / 32;
  const size_t sb = size_t(dt_size(p.dt)), gb = p.group_bytes();
  std::memset(dst, 0, p.tile_bytes());
  for (int r = 0; r < kPackRows; r++) {
    const int n = tile * kPackRows + r;
    if (n >= p.N) break;
    const uint32_t* row = w + size_t(n) * kw;
    for (int g = 0; g < G; g++) {
      uint8_t* blk = dst + size_t(g) * gb;
      uint32_t* words = reinterpret_cast<uint32_t*>(blk);
      for (int i = 0; i < wpg; i++) words[i * kPackRows + r] = row[g * wpg + i];
      uint8_t* sc = blk + size_t(wpg) * kPackRows * 4;
      std::memcpy(sc + r * sb, static_cast<const uint8_t*>(scales) + (size_t(n) * G + g) * sb, sb);
      std::memcpy(sc + (kPackRows + r) * sb, static_cast<const uint8_t*>(biases) + (size_t(n) * G + g) * sb, sb);
    }
  }
}

}  // namespace mlxgo::cpu

namespace kc = mlxgo::cpu;

namespace {

kc::PackedLayout layout(int n, int k, int bits, int gs, int dtype) {
  auto d = kc::dt_of(shim::dtype(dtype));
  if (!d) throw shim::ArgError("packed weights need float32, float16 or bfloat16 scales");
  if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8)
    throw shim::ArgError("packed weights: bits must be 2, 3, 4, 5, 6 or 8");
  if (gs != 32 && gs != 64 && gs != 128) throw shim::ArgError("packed weights: group size must be 32, 64 or 128");
  if (n <= 0 || k <= 0 || k % gs != 0) throw shim::ArgError("packed weights: bad shape");
  return kc::PackedLayout{n, k, bits, gs, *d};
}

// packed_weight checks a packed weight handle against the layout its caller
// describes.
std::pair<mx::array, kc::PackedLayout> packed_weight(mlxgo_array packed, int n, int k, int bits, int gs, int dtype) {
  auto pa = shim::arr(packed, "packed");
  auto p = layout(n, k, bits, gs, dtype);
  if (pa.dtype() != mx::uint8 || pa.nbytes() != p.bytes())
    throw shim::ArgError("packed weight does not match its layout (" + std::to_string(pa.nbytes()) +
                         " bytes, layout needs " + std::to_string(p.bytes()) + ")");
  return {pa, p};
}

// A packed matmul's checked arguments: x cast to the result type,
// quantized_matmul's (x, scales and biases promoted together: float32 x with
// float16 scales computes in float32, the scales cast exactly), the weight,
// its layout, and the product's shape.
struct PackedQmmArgs {
  mx::array x, w;
  kc::PackedLayout p;
  mx::Shape shape;
};

PackedQmmArgs packed_qmm_args(mlxgo_array x, mlxgo_array packed, int n, int k, int group_size, int bits, int dtype) {
  auto xa = shim::arr(x, "x");
  auto [pa, p] = packed_weight(packed, n, k, bits, group_size, dtype);
  if (xa.ndim() < 1 || xa.shape(-1) != k) throw shim::ArgError("x's last dimension does not match the weight");
  auto rt = mx::promote_types(xa.dtype(), shim::dtype(dtype));
  if (!kc::dt_of(rt)) throw shim::ArgError("packed matmul needs floating-point x");
  xa = mx::astype(xa, rt);
  auto shape = xa.shape();
  shape.back() = n;
  return {xa, pa, p, shape};
}

}  // namespace

extern "C" {

int mlxgo_cpu_kernels_set(int mode, int threads, const char* isa_name) {
  MLXGO_ANY_THREAD_BEGIN
  if (mode < 0 || mode > 2) throw shim::ArgError("kernels mode must be 0 (mlx), 1 (mlxgo) or 2 (fast)");
  const kc::Isa* want = kc::best_isa();
  std::string name = shim::str(isa_name);
  if (!name.empty()) {
    const kc::Isa* table[] = {kc::isa_avx512(), kc::isa_avx2(), kc::isa_base()};
    const kc::Isa* found = nullptr;
    bool past_best = false;
    for (auto* t : table) {
      if (t == want) past_best = true;
      if (name == t->name) {
        if (!past_best) throw std::runtime_error("this CPU cannot run the " + name + " kernels");
        found = t;
      }
    }
    if (!found) throw shim::ArgError("unknown kernel set " + name + " (avx512, avx2, base)");
    want = found;
  }
  kc::g_isa.store(want);
  if (threads < 1) throw shim::ArgError("threads must be at least 1");
  kc::Pool::get().set_threads(threads);
  kc::g_mode.store(mode);
  MLXGO_END
}

int mlxgo_cpu_kernels_info(int* mode, int* threads, const char** isa_name) {
  MLXGO_ANY_THREAD_BEGIN
  if (mode == nullptr || threads == nullptr || isa_name == nullptr) throw shim::ArgError("null out pointer");
  *mode = kc::g_mode.load();
  *threads = kc::Pool::get().threads();
  *isa_name = kc::isa()->name;
  MLXGO_END
}

int mlxgo_cpu_selftest(const char* what, uint64_t stride, uint64_t* checked, uint64_t* mismatches) {
  MLXGO_ANY_THREAD_BEGIN
  if (checked == nullptr || mismatches == nullptr || stride == 0) throw shim::ArgError("bad selftest arguments");
  const std::string w = shim::str(what);
  *checked = *mismatches = 0;
  const kc::Isa* table[] = {kc::isa_avx512(), kc::isa_avx2(), kc::isa_base()};
  const kc::Isa* best = kc::best_isa();
  bool runnable = false;
  constexpr size_t chunk = 4096;
  std::vector<float> in(chunk), got(chunk), want(chunk);
  std::vector<uint16_t> got16(chunk), want16(chunk);
  auto same = [](float a, float b) {
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y || (a != a && b != b);
  };
  for (auto* isa : table) {
    if (isa == best) runnable = true;
    if (!runnable) continue;
    for (uint64_t base = 0; base < (1ull << 32); base += stride * chunk) {
      size_t n = 0;
      for (; n < chunk && base + n * stride < (1ull << 32); n++) {
        uint32_t u = uint32_t(base + n * stride);
        std::memcpy(&in[n], &u, 4);
      }
      if (w == "exp") {
        isa->exp(in.data(), got.data(), n);
        for (size_t i = 0; i < n; i++) want[i] = mx::simd::exp(mx::simd::Simd<float, 1>(in[i])).value;
      } else if (w == "round_f16" || w == "round_bf16") {
        const bool h = w == "round_f16";
        isa->round(h ? kc::F16 : kc::BF16, in.data(), got.data(), n);
        for (size_t i = 0; i < n; i++)
          want[i] = h ? static_cast<float>(mx::float16_t(in[i])) : static_cast<float>(mx::bfloat16_t(in[i]));
      } else if (w == "store_f16" || w == "store_bf16") {
        const bool h = w == "store_f16";
        isa->store(h ? kc::F16 : kc::BF16, in.data(), got16.data(), n);
        for (size_t i = 0; i < n; i++) {
          if (h) {
            mx::float16_t v(in[i]);
            std::memcpy(&want16[i], &v, 2);
          } else {
            mx::bfloat16_t v(in[i]);
            std::memcpy(&want16[i], &v, 2);
          }
        }
        for (size_t i = 0; i < n; i++) *mismatches += got16[i] != want16[i];
        *checked += n;
        continue;
      } else {
        throw shim::ArgError("unknown selftest " + w);
      }
      for (size_t i = 0; i < n; i++) *mismatches += !same(got[i], want[i]);
      *checked += n;
    }
  }
  MLXGO_END
}

int mlxgo_cpu_pack_qweight(mlxgo_array w, mlxgo_array scales, mlxgo_array biases, int group_size, int bits,
                           mlxgo_array* out) {
  MLXGO_BEGIN
  auto wa = shim::arr(w, "w"), sa = shim::arr(scales, "scales"), ba = shim::arr(biases, "biases");
  if (wa.ndim() != 2 || sa.ndim() != 2 || ba.ndim() != 2 || wa.dtype() != mx::uint32)
    throw shim::ArgError("packing takes a 2-D uint32 weight with 2-D scales and biases");
  if (sa.dtype() != ba.dtype()) throw shim::ArgError("scales and biases differ in dtype");
  const int n = wa.shape(0), k = wa.shape(1) * 32 / bits;
  auto p = layout(n, k, bits, group_size, static_cast<int>(sa.dtype().val()));
  if (sa.shape(0) != n || sa.shape(1) != p.groups() || ba.shape(0) != n || ba.shape(1) != p.groups())
    throw shim::ArgError("scales and biases do not match the weight");
  mx::eval({wa, sa, ba});
  kc::Contig wc(wa), sc(sa), bc(ba);
  auto data = mx::allocator::malloc(p.bytes());
  uint8_t* dst = static_cast<uint8_t*>(data.buffer().raw_ptr());
  const int tiles = p.tiles();
  kc::Pool::get().run(tiles, [&](int t) {
    kc::pack_tile(p, reinterpret_cast<const uint32_t*>(wc.ptr), sc.ptr, bc.ptr, t, dst + size_t(t) * p.tile_bytes());
  });
  shim::put(out, mx::array(std::move(data), mx::Shape{int(p.bytes())}, mx::uint8));
  MLXGO_END
}

int mlxgo_cpu_packed_qmm(mlxgo_array x, mlxgo_array packed, int n, int k, int group_size, int bits, int dtype,
                         mlxgo_array* out) {
  MLXGO_BEGIN
  auto q = packed_qmm_args(x, packed, n, k, group_size, bits, dtype);
  shim::put(out, kc::node<kc::PackedMatmul>(q.shape, q.x.dtype(), q.p, {q.x, q.w}));
  MLXGO_END
}

// res + x @ W.T: one node when res is of the product's shape and dtype,
// otherwise the product and MLX's add (which broadcasts and promotes).
int mlxgo_cpu_packed_qmm_add(mlxgo_array x, mlxgo_array packed, int n, int k, int group_size, int bits, int dtype,
                             mlxgo_array res, mlxgo_array* out) {
  MLXGO_BEGIN
  auto ra = shim::arr(res, "res");
  auto q = packed_qmm_args(x, packed, n, k, group_size, bits, dtype);
  if (ra.shape() == q.shape && ra.dtype() == q.x.dtype() && ra.size() > 0) {
    // Over a pending cache attention: one node with it (blocks.cpp).
    if (auto tail = kc::attention_tail(q.x, q.w, q.p, ra)) {
      shim::put(out, *tail);
      return MLXGO_OK;
    }
    shim::put(out, kc::node<kc::PackedMatmulAdd>(q.shape, q.x.dtype(), q.p, {q.x, q.w, ra}));
  } else {
    shim::put(out, mx::add(ra, kc::node<kc::PackedMatmul>(q.shape, q.x.dtype(), q.p, {q.x, q.w})));
  }
  MLXGO_END
}

int mlxgo_cpu_packed_embed(mlxgo_array ids, mlxgo_array packed, int n, int k, int group_size, int bits, int dtype,
                           mlxgo_array* out) {
  MLXGO_BEGIN
  auto ia = shim::arr(ids, "ids");
  auto [pa, p] = packed_weight(packed, n, k, bits, group_size, dtype);
  if (!mx::issubdtype(ia.dtype(), mx::integer)) throw shim::ArgError("embedding ids must be integers");
  if (ia.itemsize() < 4) ia = mx::astype(ia, mx::int32);
  auto shape = ia.shape();
  shape.push_back(k);
  shim::put(out, kc::node<kc::PackedEmbedding>(shape, shim::dtype(dtype), p, {ia, pa}));
  MLXGO_END
}

}  // extern "C"
