// blocks.cpp — a decoder block's chains of CPU kernels as one node each:
//
//   MlxgoNormPackedMatmul  rms_norm(x, w) @ W.T            (the fused q/k/v)
//   MlxgoPackedMLP         res + down(silu(g) * u), [g | u] = rms_norm(x, w) @ GU.T
//
// Why: MLX's CPU schedules every graph node through its scheduler (an
// allocation, a task on the stream's thread, a wake-up, a release): about
// 8 us a node whatever it computes, on the 2-core machines here, which made
// a decode step's ~330 nodes a third of its time. Inside one node the same
// kernels run one after another on the same arrays; each intermediate is a
// buffer of the node's own, freed when it returns. Every element is what the
// chain of nodes computes (the runners are those nodes' own, blocks.h), so
// the results are the same bits (mlx/blocks_test.go).
#include "cpu/blocks.h"
#include "cpu/prim.h"

namespace mlxgo::cpu {

bool kernels_on();

namespace {

// scratch is an array of its own buffer, for a node's intermediates.
mx::array scratch(mx::Shape shape, mx::Dtype dt) {
  mx::array a(std::move(shape), dt, nullptr, {});
  a.set_data(mx::allocator::malloc(a.nbytes()));
  return a;
}

mx::Shape with_last(mx::Shape s, int n) {
  s.back() = n;
  return s;
}

struct NormPackedMatmul {
  static constexpr const char* name = "MlxgoNormPackedMatmul";
  struct Params {
    PackedLayout p;
    float eps;
  };
  // in: x, w, packed
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    mx::array xn = scratch(in[0].shape(), out.dtype());
    rms_norm_into(in[0], &in[1], p.eps, xn);
    packed_matmul_into(xn, in[2], out, p.p, nullptr);
  }
};

struct PackedMLP {
  static constexpr const char* name = "MlxgoPackedMLP";
  struct Params {
    PackedLayout gate_up, down;
    float eps;
    bool norm, res;
  };
  // in: x, gate/up packed, down packed, [w], [res]
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    const mx::array& x = in[0];
    std::optional<mx::array> xn;
    if (p.norm) {
      xn = scratch(x.shape(), mx::float32);
      rms_norm_into(x, &in[3], p.eps, *xn);
    }
    mx::array gu = scratch(with_last(x.shape(), p.gate_up.N), mx::float32);
    packed_matmul_into(xn ? *xn : x, in[1], gu, p.gate_up, nullptr);
    mx::array h = scratch(with_last(x.shape(), p.gate_up.N / 2), mx::float32);
    silu_mul_halves_into(gu, h);
    packed_matmul_into(h, in[2], out, p.down, p.res ? &in.back() : nullptr);
  }
};

// packed_arg checks a packed weight handle against its layout.
std::pair<mx::array, PackedLayout> packed_arg(mlxgo_array h, int n, int k, int gs, int bits, int dtype) {
  const auto& a = shim::arr(h, "packed weight");
  auto d = shim::dtype(dtype);
  if (d != mx::float32 && d != mx::float16 && d != mx::bfloat16)
    throw shim::ArgError("packed weights need float32, float16 or bfloat16 scales");
  PackedLayout p{n, k, bits, gs, d == mx::float32 ? F32 : d == mx::float16 ? F16 : BF16};
  if (n <= 0 || k <= 0 || a.dtype() != mx::uint8 || a.nbytes() != p.bytes())
    throw shim::ArgError("packed weight does not match its layout");
  return {a, p};
}

}  // namespace

}  // namespace mlxgo::cpu

namespace kc = mlxgo::cpu;

extern "C" {

int mlxgo_cpu_norm_packed_qmm(mlxgo_array x, mlxgo_array w, const float* eps, mlxgo_array packed, int n, int k,
                              int group_size, int bits, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  if (eps == nullptr) throw shim::ArgError("null eps");
  auto xa = shim::arr(x, "x"), wa = shim::arr(w, "norm weight");
  auto [pa, p] = kc::packed_arg(packed, n, k, group_size, bits, dtype);
  // rms_norm's output is x and w promoted; the matmul then promotes it with
  // the scales, as quantized_matmul does.
  auto nt = mx::promote_types(xa.dtype(), wa.dtype());
  auto rt = mx::promote_types(nt, shim::dtype(dtype));
  if (!kc::kernels_on() || xa.ndim() < 1 || xa.shape(-1) != k || wa.ndim() != 1 || wa.shape(0) != k || nt != rt ||
      (rt != mx::float32 && rt != mx::float16 && rt != mx::bfloat16) || !mx::issubdtype(xa.dtype(), mx::floating) ||
      xa.size() == 0)
    throw shim::ArgError("norm + packed matmul: x, the norm weight and the packed weight do not fit together");
  shim::put(out, kc::node<kc::NormPackedMatmul>(kc::with_last(xa.shape(), n), rt, {p, *eps},
                                                {xa, mx::astype(wa, rt), pa}));
  MLXGO_END
}

int mlxgo_cpu_packed_mlp(mlxgo_array x, mlxgo_array w, const float* eps, mlxgo_array gate_up, mlxgo_array down,
                         int hidden, int width, int gu_group_size, int gu_bits, int gu_dtype, int d_group_size,
                         int d_bits, int d_dtype, mlxgo_array res, mlxgo_array* out) {
  MLXGO_BEGIN
  if (eps == nullptr) throw shim::ArgError("null eps");
  auto xa = shim::arr(x, "x");
  auto [gua, gup] = kc::packed_arg(gate_up, 2 * width, hidden, gu_group_size, gu_bits, gu_dtype);
  auto [da, dp] = kc::packed_arg(down, hidden, width, d_group_size, d_bits, d_dtype);
  std::vector<mx::array> ins = {xa, gua, da};
  // The chain runs in float32 throughout (swiglu's kernel is float32), so
  // every dtype it meets must promote to float32 and no further.
  auto f32 = [](mx::Dtype d) { return mx::promote_types(d, mx::float32) == mx::float32; };
  bool ok = kc::kernels_on() && xa.dtype() == mx::float32 && xa.ndim() >= 1 && xa.shape(-1) == hidden &&
            xa.size() > 0 && f32(shim::dtype(gu_dtype)) && f32(shim::dtype(d_dtype));
  const bool norm = w != nullptr;
  if (norm) {
    auto wa = shim::arr(w, "norm weight");
    ok = ok && wa.ndim() == 1 && wa.shape(0) == hidden && f32(wa.dtype());
    ins.push_back(mx::astype(wa, mx::float32));
  }
  if (res != nullptr) {
    auto ra = shim::arr(res, "res");
    ok = ok && ra.shape() == xa.shape() && ra.dtype() == mx::float32;
    ins.push_back(ra);
  }
  if (!ok) throw shim::ArgError("packed mlp: x, the weights and res do not fit one float32 chain");
  shim::put(out, kc::node<kc::PackedMLP>(xa.shape(), mx::float32, {gup, dp, *eps, norm, res != nullptr}, std::move(ins)));
  MLXGO_END
}

}  // extern "C"
