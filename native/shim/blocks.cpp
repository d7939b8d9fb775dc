// blocks.cpp — a decoder block's chains of CPU kernels as one node each:
//
//   MlxgoNormPackedMatmul  rms_norm(x, w) @ W.T            (the fused q/k/v)
//   MlxgoPackedMLP         res + down(silu(g) * u), [g | u] = rms_norm(x, w) @ GU.T
//   MlxgoAttentionTail     h = res + attention(q, cache) @ O.T, and then, when
//                          a PackedMLP follows on h, h + mlp(rms_norm(h))
//
// The last is made by the ops that would add its parts as nodes of their
// own: a packed matmul with a residual over a pending cache attention
// (mlxgo_cpu_packed_qmm_add) takes the attention in, and a packed MLP over
// a pending tail whose residual is its input takes the tail in. A model's
// code stays the ops mlx-lm writes; the nodes it would have made are never
// evaluated (nothing reads them). Should something else read one, MLX
// evaluates it on its own, to the same bits: only work is repeated.
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

// Inputs: the cache attention node's inputs (n_attend of them), O packed,
// res, then with mlp: the norm weight, gate/up packed, down packed.
struct AttentionTail {
  static constexpr const char* name = "MlxgoAttentionTail";
  struct Params {
    std::shared_ptr<mx::Primitive> attend;  // the MlxgoCacheAttention node taken in
    int n_attend;
    PackedLayout o;
    bool mlp;
    PackedMLP::Params m;
  };
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    const std::vector<mx::array> att(in.begin(), in.begin() + p.n_attend);
    const mx::array &q = att[0], &vb = att[2], &o_packed = in[p.n_attend], &res = in[p.n_attend + 1];
    mx::array a = scratch({q.shape(0), q.shape(2), q.shape(1) * vb.shape(3)}, q.dtype());
    attend_into(*p.attend, att, a);
    if (!p.mlp) {
      packed_matmul_into(a, o_packed, out, p.o, &res);
      return;
    }
    mx::array h = scratch(out.shape(), out.dtype());
    packed_matmul_into(a, o_packed, h, p.o, &res);
    PackedMLP::run(p.m, {h, in[p.n_attend + 3], in[p.n_attend + 4], in[p.n_attend + 2], h}, out);
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

std::optional<mx::array> attention_tail(const mx::array& attn, const mx::array& o_packed, const PackedLayout& o,
                                        const mx::array& res) {
  if (!is_pending_attend(attn) || res.shape() != attn.shape() || res.dtype() != attn.dtype() || o.N != attn.shape(-1))
    return std::nullopt;
  std::vector<mx::array> ins = attn.inputs();
  const int n = int(ins.size());
  ins.push_back(o_packed);
  ins.push_back(res);
  return node<AttentionTail>(attn.shape(), attn.dtype(), {attn.primitive_ptr(), n, o, false, {}}, std::move(ins));
}

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
  const kc::PackedMLP::Params mp{gup, dp, *eps, norm, res != nullptr};
  // A pre-norm block's MLP half over a pending attention tail (res is x,
  // the norm given): one node for the whole of the block after the cache
  // writes.
  if (const auto* tail = kc::pending_node<kc::AttentionTail>(xa);
      tail && !tail->params().mlp && norm && res != nullptr && ins.back().id() == xa.id()) {
    auto tp = tail->params();
    tp.mlp = true;
    tp.m = mp;
    std::vector<mx::array> tin = xa.inputs();
    tin.push_back(ins[3]);  // the norm weight
    tin.push_back(gua);
    tin.push_back(da);
    shim::put(out, kc::node<kc::AttentionTail>(xa.shape(), mx::float32, tp, std::move(tin)));
  } else {
    shim::put(out, kc::node<kc::PackedMLP>(xa.shape(), mx::float32, mp, std::move(ins)));
  }
  MLXGO_END
}

}  // extern "C"
