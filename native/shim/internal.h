// internal.h — helpers shared by the shim's .cpp files; not part of the ABI.
//
// Every exported function has the same shape:
//
//   int mlxgo_x(...) {
//     MLXGO_BEGIN
//     ... build results, write out pointers ...
//     MLXGO_END
//   }
//
// MLXGO_BEGIN refuses unbound threads (see mlxgo_bind_thread) and opens a try
// block; MLXGO_END returns MLXGO_OK or turns any exception into a status and a
// thread-local message. Argument checks throw shim::ArgError so they take the
// same path with a distinct status.
#pragma once

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// The headers we use, not mlx/mlx.h: fewer headers keep each file's compile short.
#include "mlx/array.h"
#include "mlx/device.h"
#include "mlx/fast.h"
#include "mlx/fft.h"
#include "mlx/memory.h"
#include "mlx/ops.h"
#include "mlx/random.h"
#include "mlx/stream.h"
#include "mlx/transforms.h"
#include "mlx/version.h"
#include "mlxgo.h"

namespace mx = mlx::core;

struct mlxgo_array_ {
  mx::array a;
};

namespace shim {

// ArgError marks misuse caught by the shim itself (NULL handles, bad codes).
struct ArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

extern std::atomic<int64_t> live_arrays;
extern thread_local bool thread_bound;

int fail(int status, const char* msg);

// wrap moves an array into a new handle and counts it.
inline mlxgo_array wrap(mx::array a) {
  auto* h = new mlxgo_array_{std::move(a)};
  live_arrays.fetch_add(1, std::memory_order_relaxed);
  return h;
}

// put writes a new handle to a required out pointer.
inline void put(mlxgo_array* out, mx::array a) {
  if (out == nullptr) throw ArgError("null out pointer");
  *out = wrap(std::move(a));
}

// put_all writes an op's results to out, which must have room for them.
inline void put_all(const std::vector<mx::array>& parts, mlxgo_array* out, int cap) {
  if (out == nullptr) throw ArgError("null out pointer");
  if (static_cast<size_t>(cap) < parts.size()) {
    throw ArgError("out has room for " + std::to_string(cap) + " arrays, the op made " + std::to_string(parts.size()));
  }
  for (size_t i = 0; i < parts.size(); i++) out[i] = wrap(parts[i]);
}

inline const mx::array& arr(mlxgo_array h, const char* what = "array") {
  if (h == nullptr) throw ArgError(std::string("null ") + what + " handle");
  return h->a;
}

// opt maps a NULL handle to "argument absent".
inline std::optional<mx::array> opt(mlxgo_array h) {
  if (h == nullptr) return std::nullopt;
  return h->a;
}

inline mx::Dtype dtype(int code) {
  switch (code) {
    case MLXGO_BOOL: return mx::bool_;
    case MLXGO_UINT8: return mx::uint8;
    case MLXGO_UINT16: return mx::uint16;
    case MLXGO_UINT32: return mx::uint32;
    case MLXGO_UINT64: return mx::uint64;
    case MLXGO_INT8: return mx::int8;
    case MLXGO_INT16: return mx::int16;
    case MLXGO_INT32: return mx::int32;
    case MLXGO_INT64: return mx::int64;
    case MLXGO_FLOAT16: return mx::float16;
    case MLXGO_FLOAT32: return mx::float32;
    case MLXGO_FLOAT64: return mx::float64;
    case MLXGO_BFLOAT16: return mx::bfloat16;
    case MLXGO_COMPLEX64: return mx::complex64;
  }
  throw ArgError("unknown dtype code " + std::to_string(code));
}

inline mx::Device device(int type, int index) {
  if (type != MLXGO_CPU && type != MLXGO_GPU) {
    throw ArgError("unknown device type " + std::to_string(type));
  }
  return mx::Device(type == MLXGO_CPU ? mx::Device::cpu : mx::Device::gpu, index);
}

inline void check_n(const void* p, int n, const char* what) {
  if (n < 0) throw ArgError(std::string("negative length for ") + what);
  if (n > 0 && p == nullptr) throw ArgError(std::string("null ") + what);
}

inline mx::Shape shape(const int* p, int n, const char* what = "shape") {
  check_n(p, n, what);
  return mx::Shape(p, p + n);
}

inline std::vector<int> ints(const int* p, int n, const char* what = "axes") {
  check_n(p, n, what);
  return std::vector<int>(p, p + n);
}

inline std::vector<mx::array> arrays(const mlxgo_array* p, int n) {
  check_n(p, n, "array list");
  std::vector<mx::array> v;
  v.reserve(n);
  for (int i = 0; i < n; i++) v.push_back(arr(p[i]));
  return v;
}

inline std::string str(const char* s) { return s == nullptr ? std::string() : std::string(s); }

}  // namespace shim

// kernels.cpp: the ops that run mlxgo's own CPU kernels when they are on
// (mlxgo_cpu_kernels_set), and MLX's otherwise.
namespace mlxgo::cpu {
mx::array matmul(const mx::array& a, const mx::array& b);
mx::array addmm(const mx::array& c, const mx::array& a, const mx::array& b, float alpha, float beta);
mx::array quantized_matmul(const mx::array& x, const mx::array& w, const mx::array& scales,
                           const std::optional<mx::array>& biases, bool transpose, int group_size, int bits,
                           const std::string& mode);
mx::array sdpa(const mx::array& queries, const mx::array& keys, const mx::array& values, float scale,
               const std::string& mask_mode, std::optional<mx::array> mask_arr,
               const std::optional<mx::array>& sinks);
// fused.cpp
mx::array rms_norm(const mx::array& x, const std::optional<mx::array>& weight, float eps);
// mlx-lm's swiglu on the CPU: silu(g)·u as multiply(multiply(g, sigmoid(g)), u).
mx::array silu_mul(const mx::array& g, const mx::array& u);
mx::array silu_mul_halves(const mx::array& gu);
// mx::erf, float32 on the CPU as one node of the shim's kernel.
mx::array erf(const mx::array& x);
// mx::logsumexp, its LogSumExp node (a reduction over the last axis) run by
// the shim's kernel on the CPU.
mx::array logsumexp(const mx::array& a, const std::vector<int>& axes, bool keepdims);
mx::array rope(const mx::array& x, int dims, bool traditional, std::optional<float> base, float scale,
               const mx::array& offset, const std::optional<mx::array>& freqs);
// cache_attention.cpp: the KV cache write and the attention over the cache,
// each with its rope (mlxgo_cpu_cache_write, mlxgo_cpu_cache_attend).
mx::array cache_write(const std::optional<mx::array>& buf, const mx::array& x, int offset, int keep, int capacity,
                      bool transposed, const mlxgo_rope_spec& rope);
mx::array cache_attend(const mx::array& q, const mx::array& kbuf, const mx::array& vbuf, int length,
                       const mlxgo_rope_spec& rope, float scale, bool causal, const std::optional<mx::array>& mask);
}  // namespace mlxgo::cpu

#define MLXGO_BEGIN                                                        \
  if (!shim::thread_bound) {                                               \
    return shim::fail(MLXGO_ERR_THREAD,                                    \
                      "mlx call from a thread that is not the executor's " \
                      "(mlxgo_bind_thread was not called on it)");         \
  }                                                                        \
  try {
#define MLXGO_END                                                  \
  return MLXGO_OK;                                                 \
  }                                                                \
  catch (const shim::ArgError& e) {                                \
    return shim::fail(MLXGO_ERR_ARG, e.what());                    \
  }                                                                \
  catch (const std::exception& e) {                                \
    return shim::fail(MLXGO_ERR_MLX, e.what());                    \
  }                                                                \
  catch (...) {                                                    \
    return shim::fail(MLXGO_ERR_MLX, "unknown C++ exception");     \
  }

// MLXGO_ANY_THREAD_BEGIN is MLXGO_BEGIN without the thread check, for calls
// that touch no per-thread MLX state.
#define MLXGO_ANY_THREAD_BEGIN try {
