// cache_attention.cpp — the middle of mlx-lm's attention layer in three CPU
// nodes: the keys rotated and written into the layer's key buffer, the
// values written into its value buffer (KVCache.update_and_fetch), and the
// queries rotated and attended over the buffers, the heads transposed back
// to [B, L, heads * dim].
//
// Why: MLX's CPU schedules every graph node for a few microseconds whatever
// it computes, and that middle was ten nodes a layer (two ropes, two
// slice_updates, two slices, the attention, a transpose, a reshape and the
// ropes' offset). Three, because a buffer is reused in place only when its
// writer is a node with one output: MLX's donation rule (is_donatable: no
// other reference to the input) counts the input once per output of the
// node that reads it. Why the keys stored transposed: the score product q @
// k^T sums over the head dimension for each key, and the kernel runs its
// lanes across keys, so it wants the keys as columns; stored as rows they
// were transposed into a panel on every step (9 % of a SmolLM2 decode). The
// buffer is still a [B, H, capacity, D] array to everything else (its
// strides say where each element is), so every MLX op reads it as before.
//
// The arithmetic is the composition's, element for element: the rope is
// rope.h's (MlxgoRoPE's), the cache write a copy, the attention attn.h's
// (MlxgoAttention's, itself MLX's CPU sdpa composition); only where the
// bytes are kept differs. make test compares the nodes with that
// composition bit for bit (kv/rope_attention_test.go).
#include <cstring>

#include "cpu/attn.h"
#include "cpu/blocks.h"
#include "cpu/pool.h"
#include "cpu/prim.h"
#include "cpu/rope.h"
#include "mlx/backend/common/utils.h"

namespace mlxgo::cpu {

bool kernels_on();

namespace {

// RopeParams is mlxgo_rope_spec inside a node; its freqs and offsets are
// the node's last inputs (in that order) when it has them.
struct RopeParams {
  int dims = 0;  // 0: no rotation
  bool traditional = false, has_freqs = false, row_offsets = false;
  float base = 0, scale = 1;
};

// Rotation is a node's rope with its tables: cos and sin per (row, new
// position), positions offs[b] + t, in the dtype T.
template <class TT>
struct Rotation {
  RopeParams p;
  int L = 0, half = 0;
  std::vector<float> freqs;
  std::vector<TT> cs, sn;

  // extra are the node's inputs after its own: [freqs], [offsets].
  Rotation(const RopeParams& rp, const mx::array* extra, int B, int L_, int offset) : p(rp), L(L_), half(rp.dims / 2) {
    if (p.dims == 0) return;
    int next = 0;
    if (p.has_freqs) {
      const mx::array& f = extra[next++];
      for (int j = 0; j < half; j++) freqs.push_back(f.data<float>()[loc(j, f.shape(), f.strides())]);
    }
    std::vector<float> offs(1, static_cast<float>(offset));
    if (p.row_offsets) {
      const mx::array& o = extra[next++];
      offs.resize(B);
      for (int b = 0; b < B; b++) offs[b] = static_cast<float>(o.data<int32_t>()[loc(b, o.shape(), o.strides())]);
    }
    const RopeSpec r = spec();
    const std::vector<float> inv = rope_inv_freqs(r);
    cs.resize(offs.size() * L * half);
    sn.resize(offs.size() * L * half);
    for (size_t b = 0; b < offs.size(); b++)
      for (int t = 0; t < L; t++) rope_angles<TT>(r, inv, offs[b], t, cs.data() + (b * L + t) * half, sn.data() + (b * L + t) * half);
  }
  RopeSpec spec() const { return {p.dims, p.traditional, p.base, p.scale, p.has_freqs ? freqs.data() : nullptr}; }

  // row rotates x[b, h, t, :] (D features) into dst, feature i at dst[i * ds].
  void row(const mx::array& x, int b, int h, int t, TT* dst, int64_t ds) const {
    const TT* xp = x.data<TT>();
    const int D = x.shape(3);
    const int64_t base = b * x.strides()[0] + h * x.strides()[1] + t * x.strides()[2], s3 = x.strides()[3];
    auto get = [&](int i) -> TT { return xp[base + i * s3]; };
    if (p.dims == 0) {
      for (int i = 0; i < D; i++) dst[i * ds] = get(i);
      return;
    }
    const size_t ti = (size_t(p.row_offsets ? b : 0) * L + t) * half;
    rope_row<TT>(spec(), D, cs.data() + ti, sn.data() + ti, get, dst, ds);
  }
};

template <class F>
void dispatch_dt(mx::Dtype d, F&& f) {
  if (d == mx::float32) f(float{});
  else if (d == mx::float16) f(mx::float16_t{});
  else f(mx::bfloat16_t{});
}

// Runs f(i) for i in [0, n): on this thread when the work is small (a
// decode step's dozen rows: a pool round costs more than they do).
template <class F>
void for_rows(int n, int64_t work, F&& f) {
  const int tasks = work < 16384 ? 1 : std::min(n, 4 * Pool::get().threads());
  Pool::get().run(tasks, [&](int task) {
    for (int i = int(int64_t(n) * task / tasks); i < int(int64_t(n) * (task + 1) / tasks); i++) f(i);
  });
}

// ---- the write ----

struct WriteParams {
  int offset, keep;
  bool has_buf, transposed;
  RopeParams rope;
};

// buffer_strides: [B, H, capacity, D] row-major, or laid out as [B, H, D,
// capacity] (transposed: keys).
mx::Strides buffer_strides(const mx::Shape& s, bool transposed) {
  const int64_t hs = int64_t(s[2]) * s[3];
  if (transposed) return {s[1] * hs, hs, 1, s[2]};
  return {s[1] * hs, hs, s[3], 1};
}

template <class TT>
void run_write(const WriteParams& p, const std::vector<mx::array>& in, mx::array& out, bool in_place) {
  const mx::array& x = in[p.has_buf ? 1 : 0];
  const int B = out.shape(0), H = out.shape(1), cap = out.shape(2), D = out.shape(3), L = x.shape(2);
  const auto st = buffer_strides(out.shape(), p.transposed);
  TT* op = out.data<TT>();
  auto at = [&](int b, int h, int t, int d) { return b * st[0] + h * st[1] + t * st[2] + d * st[3]; };
  // What the cache held (its first keep positions), zeros after, as
  // update_and_fetch's concatenation with mx.zeros leaves them.
  // A decode batch's buffers come here after every join, leave or
  // compaction (MLX's concatenations leave them row-major), so the copy
  // runs by rows and blocks rather than element by element.
  if (!in_place) {
    const mx::array* old = p.has_buf ? &in[0] : nullptr;
    Pool::get().run(B * H, [&](int bh) {
      const int b = bh / H, h = bh % H, keep = p.keep;
      TT* dst = op + b * st[0] + h * st[1];
      const TT* src = old ? old->data<TT>() + b * old->strides()[0] + h * old->strides()[1] : nullptr;
      const int64_t s2 = old ? old->strides()[2] : 0, s3 = old ? old->strides()[3] : 0;
      if (!p.transposed) {  // rows of D
        if (keep > 0 && s3 == 1 && s2 == D) {
          std::memcpy(dst, src, sizeof(TT) * size_t(keep) * D);
        } else {
          for (int t = 0; t < keep; t++)
            for (int d = 0; d < D; d++) dst[int64_t(t) * D + d] = src[t * s2 + d * s3];
        }
        std::memset(static_cast<void*>(dst + int64_t(keep) * D), 0, sizeof(TT) * size_t(cap - keep) * D);
        return;
      }
      // rows of capacity, one per feature
      if (keep > 0 && s2 == 1) {
        for (int d = 0; d < D; d++) std::memcpy(dst + int64_t(d) * cap, src + d * s3, sizeof(TT) * size_t(keep));
      } else {
        constexpr int TB = 16;  // positions a block: D source rows stay in cache while read by columns
        for (int t0 = 0; t0 < keep; t0 += TB)
          for (int d = 0; d < D; d++)
            for (int t = t0; t < std::min(keep, t0 + TB); t++) dst[int64_t(d) * cap + t] = src[t * s2 + d * s3];
      }
      for (int d = 0; d < D; d++)
        std::memset(static_cast<void*>(dst + int64_t(d) * cap + keep), 0, sizeof(TT) * size_t(cap - keep));
    });
  }
  const Rotation<TT> rot(p.rope, in.data() + (p.has_buf ? 2 : 1), B, L, p.offset);
  for_rows(B * H * L, int64_t(B) * H * L * D, [&](int i) {
    const int t = i % L, h = (i / L) % H, b = i / (L * H);
    rot.row(x, b, h, t, op + at(b, h, p.offset + t, 0), st[3]);
  });
}

class CacheWrite : public mx::UnaryPrimitive {
 public:
  CacheWrite(mx::Stream s, WriteParams p) : UnaryPrimitive(s), p_(p) {}
  const char* name() const override { return "MlxgoCacheWrite"; }
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error("MlxgoCacheWrite is a CPU op");
  }
  void eval_cpu(const std::vector<mx::array>& in, mx::array& out) override {
    // The buffer is reused in place when nothing else holds it (MLX's
    // donation rule, as its slice_update follows) and it has the output's
    // capacity and layout: a decode step then writes one position.
    // Otherwise (the first write, growth, a buffer a prompt cache shares, or
    // one laid out otherwise) the node makes a new one and copies.
    const auto st = buffer_strides(out.shape(), p_.transposed);
    const bool in_place = p_.has_buf && in[0].is_donatable() && in[0].shape() == out.shape() &&
                          in[0].strides() == st && in[0].offset() == 0 && in[0].data_size() == in[0].size();
    if (in_place) {
      out.copy_shared_buffer(in[0]);
    } else {
      auto [no_bcast, row, col] = mx::check_contiguity(out.shape(), st);
      (void)no_bcast;
      mx::array::Flags f{};
      f.contiguous = true;  // a permutation of a dense layout: every element once, no gaps
      f.row_contiguous = row;
      f.col_contiguous = col;
      out.set_data(mx::allocator::malloc(out.nbytes()), out.size(), st, f);
    }
    auto& enc = mx::cpu::get_command_encoder(stream());
    std::vector<mx::array> ins;
    for (auto& x : in) ins.push_back(mx::array::unsafe_weak_copy(x));
    enc.dispatch([p = p_, ins = std::move(ins), out = mx::array::unsafe_weak_copy(out), in_place]() mutable {
      dispatch_dt(out.dtype(), [&](auto tag) { run_write<decltype(tag)>(p, ins, out, in_place); });
    });
  }

 private:
  WriteParams p_;
};

// ---- the attention ----

struct AttendParams {
  int length;  // cached positions attended over, the new ones included
  float scale;
  int mask;  // 0 none, 1 causal, 2 boolean array, 3 additive array
  RopeParams rope;
};

// Inputs: q, the key buffer, the value buffer, [mask], [freqs], [offsets].
struct CacheAttend {
  static constexpr const char* name = "MlxgoCacheAttention";
  using Params = AttendParams;
  static void run(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    dispatch_dt(out.dtype(), [&](auto tag) { run_typed<decltype(tag)>(p, in, out); });
  }
  template <class TT>
  static void run_typed(const Params& p, const std::vector<mx::array>& in, mx::array& out) {
    const mx::array &q = in[0], &kb = in[1], &vb = in[2];
    const mx::array* mask = p.mask >= 2 ? &in[3] : nullptr;
    const int B = q.shape(0), Hq = q.shape(1), L = q.shape(2), D = q.shape(3);
    const int Hkv = kb.shape(1), Dv = vb.shape(3);
    // The rotated queries, [B, Hq, L, D] in T, as MlxgoRoPE would leave them.
    const Rotation<TT> rot(p.rope, in.data() + (mask ? 4 : 3), B, L, p.length - L);
    std::vector<TT> qr(size_t(B) * Hq * L * D);
    for_rows(B * Hq * L, int64_t(B) * Hq * L * D, [&](int i) { rot.row(q, i / (Hq * L), (i / L) % Hq, i % L, qr.data() + size_t(i) * D, 1); });
    AttnIO io{};
    io.dt = std::is_same_v<TT, float> ? F32 : std::is_same_v<TT, mx::float16_t> ? F16 : BF16;
    io.B = B;
    io.Hq = Hq;
    io.Hkv = Hkv;
    io.Lq = L;
    io.Lk = p.length;
    io.D = D;
    io.Dv = Dv;
    io.q = qr.data();
    io.sq[0] = int64_t(Hq) * L * D;
    io.sq[1] = int64_t(L) * D;
    io.sq[2] = D;
    io.sq[3] = 1;
    io.k = kb.data<TT>();
    io.v = vb.data<TT>();
    for (int i = 0; i < 4; i++) {
      io.sk[i] = kb.strides()[i];
      io.sv[i] = vb.strides()[i];
    }
    io.mask = p.mask;
    if (mask) {
      io.m = mask->data<void>();
      for (int i = 0; i < 4; i++) io.sm[i] = mask->strides()[i];
    }
    io.scale = p.scale;
    io.out = out.data<TT>();
    io.so[0] = int64_t(L) * Hq * Dv;
    io.so[1] = Dv;
    io.so[2] = int64_t(Hq) * Dv;
    io.so[3] = 1;
    attention(io);
  }
};

bool float_dt(mx::Dtype d) { return d == mx::float32 || d == mx::float16 || d == mx::bfloat16; }

// rope_params checks spec against x [B, H, L, D] and appends its arrays to ins.
RopeParams rope_params(const mlxgo_rope_spec& spec, const mx::array& x, std::vector<mx::array>& ins) {
  RopeParams r;
  if (spec.dims == 0) return r;
  if (spec.dims < 0 || spec.dims % 2 != 0 || spec.dims > x.shape(3))
    throw std::invalid_argument("cache attention: rope dims must be even and at most the head dim");
  r.dims = spec.dims;
  r.traditional = spec.traditional != 0;
  r.base = spec.base;
  r.scale = spec.scale;
  if (spec.has_base) {
    if (spec.freqs != nullptr) throw std::invalid_argument("cache attention: rope takes a base or freqs, not both");
  } else {
    const auto& f = shim::arr(spec.freqs, "rope freqs");
    if (f.ndim() != 1 || f.shape(0) != spec.dims / 2) throw std::invalid_argument("cache attention: rope freqs must be [dims/2]");
    r.has_freqs = true;
    ins.push_back(mx::astype(f, mx::float32));
  }
  if (spec.offsets != nullptr) {
    const auto& o = shim::arr(spec.offsets, "rope offsets");
    if (o.ndim() != 1 || o.shape(0) != x.shape(0) || o.dtype() != mx::int32)
      throw std::invalid_argument("cache attention: rope offsets must be int32 [B]");
    r.row_offsets = true;
    ins.push_back(o);
  }
  return r;
}

void check_on() {
  if (!kernels_on() || mx::default_device() != mx::Device::cpu)
    throw std::invalid_argument("cache attention runs on mlxgo's CPU kernels only");
}

}  // namespace

bool is_pending_attend(const mx::array& x) { return pending_node<CacheAttend>(x) != nullptr; }

void attend_into(const mx::Primitive& node, const std::vector<mx::array>& in, mx::array& out) {
  CacheAttend::run(static_cast<const CpuPrim<CacheAttend>&>(node).params(), in, out);
}

mx::array cache_write(const std::optional<mx::array>& buf, const mx::array& x, int offset, int keep, int capacity,
                      bool transposed, const mlxgo_rope_spec& rope) {
  check_on();
  if (x.ndim() != 4 || !float_dt(x.dtype()) || x.shape(2) == 0)
    throw std::invalid_argument("cache write: the new positions must be a floating-point [B, H, L, D]");
  int old = 0;
  if (buf) {
    if (buf->ndim() != 4 || buf->dtype() != x.dtype() || buf->shape(0) != x.shape(0) || buf->shape(1) != x.shape(1) ||
        buf->shape(3) != x.shape(3))
      throw std::invalid_argument("cache write: the buffer does not match the new positions");
    old = buf->shape(2);
  }
  if (offset < 0 || keep < 0 || keep > old || keep > capacity || offset + x.shape(2) > capacity)
    throw std::invalid_argument("cache write: bad offset, keep or capacity");
  std::vector<mx::array> ins;
  if (buf) ins.push_back(*buf);
  ins.push_back(x);
  WriteParams p{offset, keep, buf.has_value(), transposed, {}};
  p.rope = rope_params(rope, x, ins);
  mx::Shape shape = x.shape();
  shape[2] = capacity;
  return mx::array(std::move(shape), x.dtype(),
                   std::make_shared<CacheWrite>(mx::default_stream(mx::Device::cpu), p), std::move(ins));
}

mx::array cache_attend(const mx::array& q, const mx::array& kbuf, const mx::array& vbuf, int length,
                       const mlxgo_rope_spec& rope, float scale, bool causal, const std::optional<mx::array>& mask) {
  check_on();
  const auto dt = q.dtype();
  if (q.ndim() != 4 || kbuf.ndim() != 4 || vbuf.ndim() != 4 || !float_dt(dt) || kbuf.dtype() != dt || vbuf.dtype() != dt)
    throw std::invalid_argument("cache attention: queries and buffers must be [B, H, L, D] of one floating-point dtype");
  const int B = q.shape(0), Hq = q.shape(1), L = q.shape(2), D = q.shape(3), Hkv = kbuf.shape(1);
  if (kbuf.shape(0) != B || vbuf.shape(0) != B || vbuf.shape(1) != Hkv || kbuf.shape(3) != D || Hkv == 0 ||
      Hq % Hkv != 0 || L == 0 || length < L || length > kbuf.shape(2) || length > vbuf.shape(2))
    throw std::invalid_argument("cache attention: queries and cache buffers do not match");
  if (causal && mask) throw std::invalid_argument("cache attention: causal and an array mask");
  AttendParams p{length, scale, causal ? 1 : 0, {}};
  std::vector<mx::array> ins = {q, kbuf, vbuf};
  if (mask) {
    auto m = *mask;
    if (m.ndim() > 4) throw std::invalid_argument("cache attention: a mask of more than 4 dimensions");
    if (m.dtype() != mx::bool_) {
      if (mx::promote_types(m.dtype(), dt) != dt)
        throw std::invalid_argument("cache attention: the mask's dtype does not promote to the queries'");
      m = mx::astype(m, dt);
    }
    p.mask = m.dtype() == mx::bool_ ? 2 : 3;
    ins.push_back(mx::broadcast_to(m, {B, Hq, L, length}));
  }
  p.rope = rope_params(rope, q, ins);
  return node<CacheAttend>({B, L, Hq * vbuf.shape(3)}, dt, p, std::move(ins));
}

}  // namespace mlxgo::cpu

extern "C" {

int mlxgo_cpu_cache_write(mlxgo_array buf, mlxgo_array x, int offset, int keep, int capacity, int transposed,
                          const mlxgo_rope_spec* rope, mlxgo_array* out) {
  MLXGO_BEGIN
  if (rope == nullptr) throw shim::ArgError("cache write: null rope");
  shim::put(out, mlxgo::cpu::cache_write(shim::opt(buf), shim::arr(x, "x"), offset, keep, capacity, transposed != 0, *rope));
  MLXGO_END
}

int mlxgo_cpu_cache_attend(mlxgo_array q, mlxgo_array kbuf, mlxgo_array vbuf, int length, const mlxgo_rope_spec* rope,
                           const float* scale, int causal, mlxgo_array mask, mlxgo_array* out) {
  MLXGO_BEGIN
  if (rope == nullptr || scale == nullptr) throw shim::ArgError("cache attention: null rope or scale");
  shim::put(out, mlxgo::cpu::cache_attend(shim::arr(q, "q"), shim::arr(kbuf, "kbuf"), shim::arr(vbuf, "vbuf"), length,
                                          *rope, *scale, causal != 0, shim::opt(mask)));
  MLXGO_END
}

}  // extern "C"
