/*
 * mlxgo.h — the C ABI of libmlxgo, the project's shim over MLX's C++ API.
 *
 * Go loads this library with purego (no cgo), so the ABI is plain C with
 * scalar and pointer arguments only:
 *
 *  - Arrays are opaque handles over heap-allocated mx::array objects. Every
 *    handle a function writes to an out pointer must be released with
 *    mlxgo_array_free exactly once. mlxgo_live_arrays counts live handles so
 *    tests can prove that nothing leaks.
 *  - Every function returns an int status (MLXGO_OK on success) and writes its
 *    results through out pointers. Every C++ exception is caught; its message
 *    is kept in a thread-local string read by mlxgo_last_error. Nothing here
 *    prints and nothing exits the process.
 *  - Optional arguments are explicit: a NULL handle, or a has_x flag beside
 *    the value. Argument lists never shift.
 *  - Shapes and axes are (const int* ptr, int n) pairs.
 *  - Floating-point arguments are passed by address (const float*, const
 *    double*), so every argument is integer-class: Go then calls every
 *    function through purego.SyscallN, without the reflection that a float
 *    in a vector register would need (mlx/direct.go; ~1 us per call, ~40
 *    calls per layer of a decode step).
 *  - MLX keeps default streams, random state and caches per OS thread. A
 *    thread must call mlxgo_bind_thread before it may run ops; calls from an
 *    unbound thread fail with MLXGO_ERR_THREAD instead of silently using a
 *    second set of per-thread state. Calls that touch no per-thread MLX
 *    state work on any thread: last error, version, live count, bind and
 *    thread_bound, array info, clone and free.
 *  - Ops are recorded on the calling thread's default stream of the default
 *    device; streams are named by (stream index, device type, device index).
 */
#ifndef MLXGO_H
#define MLXGO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLXGO_API __attribute__((visibility("default")))

typedef struct mlxgo_array_* mlxgo_array;

/* Status codes. */
enum {
  MLXGO_OK = 0,
  MLXGO_ERR_MLX = 1,      /* MLX threw; mlxgo_last_error has its message */
  MLXGO_ERR_ARG = 2,      /* a NULL handle, bad dtype or similar misuse */
  MLXGO_ERR_THREAD = 3,   /* called from a thread without mlxgo_bind_thread */
};

/* Dtype codes: the order of mlx::core::Dtype::Val. */
enum {
  MLXGO_BOOL = 0, MLXGO_UINT8, MLXGO_UINT16, MLXGO_UINT32, MLXGO_UINT64,
  MLXGO_INT8, MLXGO_INT16, MLXGO_INT32, MLXGO_INT64, MLXGO_FLOAT16,
  MLXGO_FLOAT32, MLXGO_FLOAT64, MLXGO_BFLOAT16, MLXGO_COMPLEX64,
};

/* Device types: the order of mlx::core::Device::DeviceType. */
enum { MLXGO_CPU = 0, MLXGO_GPU = 1 };

/* ---- core.cpp: errors, threads, array lifecycle, host data, eval ---- */
MLXGO_API const char* mlxgo_last_error(void);
MLXGO_API const char* mlxgo_version(void);
MLXGO_API int64_t mlxgo_live_arrays(void);
MLXGO_API int mlxgo_bind_thread(void);
MLXGO_API int mlxgo_thread_bound(void);

MLXGO_API int mlxgo_array_free(mlxgo_array a);
MLXGO_API int mlxgo_array_clone(mlxgo_array a, mlxgo_array* out);
/* The name of the op that makes a (its graph node's primitive), or "" when a has none (evaluated and
   detached, or made from data); the string lives as long as that node. */
MLXGO_API int mlxgo_array_op_name(mlxgo_array a, const char** name);
MLXGO_API int mlxgo_array_from_data(const void* data, size_t nbytes, const int* shape, int ndim, int dtype, mlxgo_array* out);
// mlxgo_array_load_bytes is mlxgo_array_from_data for weights: on a CUDA GPU
// the bytes go to plain device memory (as mx.load puts them), copied before
// it returns; elsewhere it is mlxgo_array_from_data.
MLXGO_API int mlxgo_array_load_bytes(const void* data, size_t nbytes, const int* shape, int ndim, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_array_from_float(const float* v, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_array_from_int(int64_t v, int dtype, mlxgo_array* out);
/* Writes dtype, ndim and up to cap dims of the shape. */
MLXGO_API int mlxgo_array_info(mlxgo_array a, int* dtype, int* ndim, int* shape, int cap);
/* Evaluates a and copies its elements, row-major, into dst (exactly nbytes). */
MLXGO_API int mlxgo_array_to_host(mlxgo_array a, void* dst, size_t nbytes);
MLXGO_API int mlxgo_eval(const mlxgo_array* arrs, int n);
MLXGO_API int mlxgo_async_eval(const mlxgo_array* arrs, int n);

/* ---- ops_shape.cpp: construction, casts and shape ops ---- */
MLXGO_API int mlxgo_astype(mlxgo_array a, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_view(mlxgo_array a, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_arange(const double* start, const double* stop, const double* step, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_zeros(const int* shape, int n, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_ones(const int* shape, int n, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_full(const int* shape, int n, mlxgo_array vals, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_reshape(mlxgo_array a, const int* shape, int n, mlxgo_array* out);
MLXGO_API int mlxgo_transpose(mlxgo_array a, const int* axes, int n, mlxgo_array* out);
MLXGO_API int mlxgo_swapaxes(mlxgo_array a, int axis1, int axis2, mlxgo_array* out);
MLXGO_API int mlxgo_expand_dims(mlxgo_array a, const int* axes, int n, mlxgo_array* out);
MLXGO_API int mlxgo_squeeze(mlxgo_array a, const int* axes, int n, mlxgo_array* out);
MLXGO_API int mlxgo_flatten(mlxgo_array a, int start_axis, int end_axis, mlxgo_array* out);
MLXGO_API int mlxgo_broadcast_to(mlxgo_array a, const int* shape, int n, mlxgo_array* out);
MLXGO_API int mlxgo_concatenate(const mlxgo_array* arrs, int n, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_stack(const mlxgo_array* arrs, int n, int axis, mlxgo_array* out);
/* Split into num equal parts; out must have room for num handles. */
MLXGO_API int mlxgo_split_equal(mlxgo_array a, int num, int axis, mlxgo_array* out, int cap);
/* Split at n indices; out must have room for n+1 handles. */
MLXGO_API int mlxgo_split_at(mlxgo_array a, const int* indices, int n, int axis, mlxgo_array* out, int cap);
// n strided views of a as one graph node: view i has shapes[i*ndim ..] and
// strides[i*ndim ..], offsets[i], in elements of a in row-major order.
MLXGO_API int mlxgo_views(mlxgo_array a, int n, int ndim, const int* shapes, const int64_t* strides,
                          const int64_t* offsets, mlxgo_array* out);
MLXGO_API int mlxgo_slice(mlxgo_array a, const int* start, const int* stop, const int* strides, int n, mlxgo_array* out);
MLXGO_API int mlxgo_slice_dynamic(mlxgo_array a, mlxgo_array start, const int* axes, int naxes, const int* sizes, int nsizes, mlxgo_array* out);
MLXGO_API int mlxgo_slice_update(mlxgo_array src, mlxgo_array update, const int* start, const int* stop, const int* strides, int n, mlxgo_array* out);
MLXGO_API int mlxgo_slice_update_dynamic(mlxgo_array src, mlxgo_array update, mlxgo_array start, const int* axes, int naxes, mlxgo_array* out);
MLXGO_API int mlxgo_pad(mlxgo_array a, const int* axes, int n, const int* low, const int* high, mlxgo_array pad_value, const char* mode, mlxgo_array* out);
MLXGO_API int mlxgo_repeat(mlxgo_array a, int repeats, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_tril(mlxgo_array a, int k, mlxgo_array* out);
MLXGO_API int mlxgo_triu(mlxgo_array a, int k, mlxgo_array* out);
MLXGO_API int mlxgo_contiguous(mlxgo_array a, mlxgo_array* out);
MLXGO_API int mlxgo_where(mlxgo_array cond, mlxgo_array x, mlxgo_array y, mlxgo_array* out);

/* ---- ops_math.cpp: elementwise ---- */
#define MLXGO_UNARY(name) MLXGO_API int mlxgo_##name(mlxgo_array a, mlxgo_array* out);
#define MLXGO_BINARY(name) MLXGO_API int mlxgo_##name(mlxgo_array a, mlxgo_array b, mlxgo_array* out);
MLXGO_UNARY(negative) MLXGO_UNARY(exp) MLXGO_UNARY(log) MLXGO_UNARY(log1p)
MLXGO_UNARY(sqrt) MLXGO_UNARY(rsqrt) MLXGO_UNARY(square) MLXGO_UNARY(abs)
MLXGO_UNARY(sin) MLXGO_UNARY(cos) MLXGO_UNARY(tanh) MLXGO_UNARY(sigmoid)
MLXGO_UNARY(erf) MLXGO_UNARY(floor) MLXGO_UNARY(ceil) MLXGO_UNARY(reciprocal)
MLXGO_UNARY(logical_not) MLXGO_UNARY(real) MLXGO_UNARY(imag) MLXGO_UNARY(stop_gradient)
MLXGO_BINARY(add) MLXGO_BINARY(subtract) MLXGO_BINARY(multiply) MLXGO_BINARY(divide)
MLXGO_BINARY(maximum) MLXGO_BINARY(minimum) MLXGO_BINARY(power) MLXGO_BINARY(remainder)
MLXGO_BINARY(floor_divide) MLXGO_BINARY(equal) MLXGO_BINARY(not_equal) MLXGO_BINARY(less)
MLXGO_BINARY(less_equal) MLXGO_BINARY(greater) MLXGO_BINARY(greater_equal)
MLXGO_BINARY(logical_and) MLXGO_BINARY(logical_or)
MLXGO_BINARY(matmul)
#undef MLXGO_UNARY
#undef MLXGO_BINARY
/* a_min / a_max may be NULL (no bound on that side). */
MLXGO_API int mlxgo_clip(mlxgo_array a, mlxgo_array a_min, mlxgo_array a_max, mlxgo_array* out);
MLXGO_API int mlxgo_addmm(mlxgo_array c, mlxgo_array a, mlxgo_array b, const float* alpha, const float* beta, mlxgo_array* out);

/* ---- ops_reduce.cpp: reductions, sorting, indexing ---- */
#define MLXGO_REDUCE(name) MLXGO_API int mlxgo_##name(mlxgo_array a, const int* axes, int n, int keepdims, mlxgo_array* out);
MLXGO_REDUCE(sum) MLXGO_REDUCE(mean) MLXGO_REDUCE(max) MLXGO_REDUCE(min)
MLXGO_REDUCE(prod) MLXGO_REDUCE(logsumexp) MLXGO_REDUCE(all) MLXGO_REDUCE(any)
#undef MLXGO_REDUCE
MLXGO_API int mlxgo_var(mlxgo_array a, const int* axes, int n, int keepdims, int ddof, mlxgo_array* out);
MLXGO_API int mlxgo_argmax(mlxgo_array a, int axis, int keepdims, mlxgo_array* out);
MLXGO_API int mlxgo_argmin(mlxgo_array a, int axis, int keepdims, mlxgo_array* out);
MLXGO_API int mlxgo_cumsum(mlxgo_array a, int axis, int reverse, int inclusive, mlxgo_array* out);
MLXGO_API int mlxgo_softmax(mlxgo_array a, const int* axes, int n, int precise, mlxgo_array* out);
MLXGO_API int mlxgo_sort(mlxgo_array a, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_argsort(mlxgo_array a, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_partition(mlxgo_array a, int kth, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_argpartition(mlxgo_array a, int kth, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_topk(mlxgo_array a, int k, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_take(mlxgo_array a, mlxgo_array indices, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_take_along_axis(mlxgo_array a, mlxgo_array indices, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_put_along_axis(mlxgo_array a, mlxgo_array indices, mlxgo_array values, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_gather(mlxgo_array a, const mlxgo_array* indices, int nidx, const int* axes, int naxes, const int* slice_sizes, int nsizes, mlxgo_array* out);

/* ---- quant.cpp: quantization and matmuls over quantized or gathered weights ---- */
/* out_biases receives NULL when the mode has no biases; global_scale may be NULL. */
MLXGO_API int mlxgo_quantize(mlxgo_array w, int group_size, int bits, const char* mode, mlxgo_array global_scale,
                             mlxgo_array* out_w, mlxgo_array* out_scales, mlxgo_array* out_biases);
MLXGO_API int mlxgo_dequantize(mlxgo_array w, mlxgo_array scales, mlxgo_array biases, int group_size, int bits,
                               const char* mode, mlxgo_array global_scale, int has_dtype, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_quantized_matmul(mlxgo_array x, mlxgo_array w, mlxgo_array scales, mlxgo_array biases,
                                     int transpose, int group_size, int bits, const char* mode, mlxgo_array* out);
MLXGO_API int mlxgo_gather_qmm(mlxgo_array x, mlxgo_array w, mlxgo_array scales, mlxgo_array biases,
                               mlxgo_array lhs_indices, mlxgo_array rhs_indices, int transpose, int group_size,
                               int bits, const char* mode, int sorted_indices, mlxgo_array* out);
MLXGO_API int mlxgo_gather_mm(mlxgo_array a, mlxgo_array b, mlxgo_array lhs_indices, mlxgo_array rhs_indices,
                              int sorted_indices, mlxgo_array* out);

/* ---- fast.cpp: fused ops (mx::fast) ---- */
MLXGO_API int mlxgo_fast_rms_norm(mlxgo_array x, mlxgo_array weight, const float* eps, mlxgo_array* out);
MLXGO_API int mlxgo_fast_layer_norm(mlxgo_array x, mlxgo_array weight, mlxgo_array bias, const float* eps, mlxgo_array* out);
MLXGO_API int mlxgo_fast_rope(mlxgo_array x, int dims, int traditional, int has_base, const float* base,
                              const float* scale, int offset, mlxgo_array freqs, mlxgo_array* out);
MLXGO_API int mlxgo_fast_rope_dynamic(mlxgo_array x, int dims, int traditional, int has_base, const float* base,
                                      const float* scale, mlxgo_array offset, mlxgo_array freqs, mlxgo_array* out);
/* mask_mode is "" (none or array mask) or "causal"; mask and sinks may be NULL. */
MLXGO_API int mlxgo_fast_sdpa(mlxgo_array q, mlxgo_array k, mlxgo_array v, const float* scale, const char* mask_mode,
                              mlxgo_array mask, mlxgo_array sinks, mlxgo_array* out);

/* ---- compiled.cpp: functions mlx-lm compiles (compiled on a GPU, where that changes the result) ---- */
MLXGO_API int mlxgo_gelu_approx(mlxgo_array x, mlxgo_array* out);
MLXGO_API int mlxgo_swiglu(mlxgo_array gate, mlxgo_array x, mlxgo_array* out);
MLXGO_API int mlxgo_swiglu_halves(mlxgo_array gu, mlxgo_array* out);
MLXGO_API int mlxgo_geglu(mlxgo_array gate, mlxgo_array x, mlxgo_array* out);
MLXGO_API int mlxgo_logit_softcap(mlxgo_array x, const float* softcap, mlxgo_array* out);
/* mlx-lm's gated_delta.py compute_g and _gated_delta_step_ops (out: y, state; cap >= 2). */
MLXGO_API int mlxgo_compute_g(mlxgo_array a_log, mlxgo_array a, mlxgo_array dt_bias, mlxgo_array* out);
MLXGO_API int mlxgo_gated_delta_step(mlxgo_array q, mlxgo_array k, mlxgo_array v, mlxgo_array g, mlxgo_array beta,
                                     mlxgo_array state, mlxgo_array* out, int cap);

/* ---- signal.cpp: convolution, FFT, random ---- */
MLXGO_API int mlxgo_conv1d(mlxgo_array input, mlxgo_array weight, int stride, int padding, int dilation, int groups, mlxgo_array* out);
/* kind: 0 fft, 1 ifft, 2 rfft, 3 irfft. */
MLXGO_API int mlxgo_fft(mlxgo_array a, int kind, int has_n, int n, int axis, mlxgo_array* out);
MLXGO_API int mlxgo_random_seed(uint64_t seed);
MLXGO_API int mlxgo_random_key(uint64_t seed, mlxgo_array* out);
MLXGO_API int mlxgo_random_split(mlxgo_array key, int num, mlxgo_array* out);
/* key may be NULL (the thread's global key sequence). */
MLXGO_API int mlxgo_random_categorical(mlxgo_array logits, int axis, int has_num_samples, int num_samples, mlxgo_array key, mlxgo_array* out);
MLXGO_API int mlxgo_random_uniform(mlxgo_array low, mlxgo_array high, const int* shape, int n, int dtype, mlxgo_array key, mlxgo_array* out);
MLXGO_API int mlxgo_random_normal(const int* shape, int n, int dtype, const float* loc, const float* scale, mlxgo_array key, mlxgo_array* out);
MLXGO_API int mlxgo_random_bernoulli(mlxgo_array p, const int* shape, int n, mlxgo_array key, mlxgo_array* out);

/* ---- device.cpp: devices, streams, memory ---- */
MLXGO_API int mlxgo_default_device(int* type, int* index);
MLXGO_API int mlxgo_set_default_device(int type, int index);
MLXGO_API int mlxgo_device_available(int type, int* out);
MLXGO_API int mlxgo_device_count(int type, int* out);
/* Writes "key=value\n" lines describing the device; valid until the next call on this thread. */
MLXGO_API int mlxgo_device_info(int type, int index, const char** out);
MLXGO_API int mlxgo_backends(int* metal, int* cuda);
MLXGO_API int mlxgo_default_stream(int type, int index, int* stream_index);
MLXGO_API int mlxgo_new_stream(int type, int index, int* stream_index);
MLXGO_API int mlxgo_set_default_stream(int stream_index, int type, int index);
MLXGO_API int mlxgo_synchronize(int has_stream, int stream_index, int type, int index);
MLXGO_API int mlxgo_memory_active(size_t* out);
MLXGO_API int mlxgo_memory_peak(size_t* out);
MLXGO_API int mlxgo_memory_reset_peak(void);
MLXGO_API int mlxgo_memory_cache(size_t* out);
MLXGO_API int mlxgo_memory_limit(size_t* out);
MLXGO_API int mlxgo_set_memory_limit(size_t limit, size_t* previous);
MLXGO_API int mlxgo_set_cache_limit(size_t limit, size_t* previous);
MLXGO_API int mlxgo_set_wired_limit(size_t limit, size_t* previous);
MLXGO_API int mlxgo_clear_cache(void);

/* ---- kernels.cpp: mlxgo's CPU kernels (bit-identical to MLX's) ---- */
/* mode 0: MLX's kernels, 1: mlxgo's, 2: mlxgo's with the int8-activation quantized matmul (L3); threads >= 1; isa "" (best for this CPU), "avx512", "avx2" or "base".
 * Applies to graphs built afterwards. */
MLXGO_API int mlxgo_cpu_kernels_set(int mode, int threads, const char* isa);
/* isa points to a static string. */
MLXGO_API int mlxgo_cpu_kernels_info(int* mode, int* threads, const char** isa);
/* Compares a kernel helper with MLX's scalar code on every stride-th float bit pattern, on every instruction set
 * this CPU runs: "exp" (simd::exp), "round_f16", "round_bf16", "store_f16", "store_bf16". NaN matches NaN for the
 * float results; stores are compared bit for bit. */
MLXGO_API int mlxgo_cpu_selftest(const char* what, uint64_t stride, uint64_t* checked, uint64_t* mismatches);
/* Repacks a quantized weight [N][K*bits/32] (affine) for the CPU kernels; evaluates its inputs. */
MLXGO_API int mlxgo_cpu_pack_qweight(mlxgo_array w, mlxgo_array scales, mlxgo_array biases, int group_size, int bits,
                                     mlxgo_array* out);
/* x @ W.T over a packed weight of n rows and k columns; dtype is the scales' dtype code. */
MLXGO_API int mlxgo_cpu_packed_qmm(mlxgo_array x, mlxgo_array packed, int n, int k, int group_size, int bits,
                                   int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_cpu_packed_qmm_add(mlxgo_array x, mlxgo_array packed, int n, int k, int group_size, int bits,
                                       int dtype, mlxgo_array res, mlxgo_array* out);
/* blocks.cpp: rms_norm(x, w, eps) @ W.T over a packed weight [n, k], one node; and a SwiGLU MLP over
   packed gate/up [2*width, hidden] and down [hidden, width] weights, one node:
   res + down(silu(g) * u) with [g | u] = rms_norm(x, w, eps) @ GU.T (w NULL: x itself; res NULL:
   no residual), float32 throughout. */
MLXGO_API int mlxgo_cpu_norm_packed_qmm(mlxgo_array x, mlxgo_array w, const float* eps, mlxgo_array packed, int n,
                                        int k, int group_size, int bits, int dtype, mlxgo_array* out);
MLXGO_API int mlxgo_cpu_packed_mlp(mlxgo_array x, mlxgo_array w, const float* eps, mlxgo_array gate_up,
                                   mlxgo_array down, int hidden, int width, int gu_group_size, int gu_bits,
                                   int gu_dtype, int d_group_size, int d_bits, int d_dtype, mlxgo_array res,
                                   mlxgo_array* out);
/* Rotary embedding of the cache ops below: fast.rope's parameters; dims 0 rotates nothing. */
typedef struct {
  int dims;
  int traditional;
  int has_base;        /* 1: frequencies from base; 0: from freqs */
  float base, scale;
  mlxgo_array freqs;   /* float [dims/2], or NULL */
  mlxgo_array offsets; /* int32 [B]: each row's first position, or NULL: the cache offset */
} mlxgo_rope_spec;
/* mlx-lm's attention middle on the CPU kernels (cache_attention.cpp), in two ops.
   mlxgo_cpu_cache_write: x [B, H, L, D] rotated by rope (dims 0: not rotated) and written into the
   cache buffer buf [B, H, old, D] at offset (KVCache.update_and_fetch), giving the new buffer
   [B, H, capacity, D]; when capacity differs from old the new buffer keeps buf's first keep
   positions and zeros after them; buf is NULL for an empty cache. transposed keeps the buffer laid
   out as [B, H, D, capacity] (keys). mlxgo_cpu_cache_attend: q [B, Hq, L, D] rotated by rope, then
   scaled dot-product attention over the first length positions of the buffers (causal, or with
   mask, a boolean or additive array broadcastable to [B, Hq, L, length], or neither), the heads
   transposed back: [B, L, Hq*Dv]. */
MLXGO_API int mlxgo_cpu_cache_write(mlxgo_array buf, mlxgo_array x, int offset, int keep, int capacity, int transposed,
                                    const mlxgo_rope_spec* rope, mlxgo_array* out);
MLXGO_API int mlxgo_cpu_cache_attend(mlxgo_array q, mlxgo_array kbuf, mlxgo_array vbuf, int length,
                                     const mlxgo_rope_spec* rope, const float* scale, int causal, mlxgo_array mask,
                                     mlxgo_array* out);
/* Rows ids of a packed weight, dequantized: QuantizedEmbedding's lookup. */
MLXGO_API int mlxgo_cpu_packed_embed(mlxgo_array ids, mlxgo_array packed, int n, int k, int group_size, int bits,
                                     int dtype, mlxgo_array* out);

/* ---- grammar.cpp: the constraint engine (llguidance) for structured output ----
 * Any thread; a matcher on one thread at a time. Masks are words of 32 bits,
 * bit i of word i/32 set when token i is allowed. */
typedef struct mlxgo_grammar_tokenizer_* mlxgo_grammar_tokenizer;
typedef struct mlxgo_matcher_* mlxgo_matcher;
MLXGO_API const char* mlxgo_grammar_version(void);
MLXGO_API int mlxgo_grammar_tokenizer_new(const char* tokenizer_json, int vocab_size, const int* eos, int n_eos, mlxgo_grammar_tokenizer* out);
/* The vocabulary as bytes: token i is lens[i] bytes of bytes (concatenated in
 * order); a special token's bytes are 0xFF then its name. */
MLXGO_API int mlxgo_grammar_tokenizer_from_vocab(const uint32_t* lens, const uint8_t* bytes, int vocab_size, const int* eos, int n_eos, mlxgo_grammar_tokenizer* out);
MLXGO_API int mlxgo_grammar_tokenizer_free(mlxgo_grammar_tokenizer t);
/* kind: "json_schema", "regex", "lark" or "llguidance". *warning is 1 when the
 * grammar is valid with a warning (then in mlxgo_last_error). */
MLXGO_API int mlxgo_grammar_validate(mlxgo_grammar_tokenizer t, const char* kind, const char* grammar, int* warning);
MLXGO_API int mlxgo_matcher_new(mlxgo_grammar_tokenizer t, const char* kind, const char* grammar, mlxgo_matcher* out);
MLXGO_API int mlxgo_matcher_free(mlxgo_matcher m);
MLXGO_API int mlxgo_matcher_clone(mlxgo_matcher m, mlxgo_matcher* out);
MLXGO_API int mlxgo_matcher_mask_words(mlxgo_matcher m, size_t* words);
MLXGO_API int mlxgo_matcher_mask(mlxgo_matcher m, uint32_t* dst, size_t words);
MLXGO_API int mlxgo_matcher_consume(mlxgo_matcher m, int token);
MLXGO_API int mlxgo_matcher_rollback(mlxgo_matcher m, int n);
MLXGO_API int mlxgo_matcher_state(mlxgo_matcher m, int* accepting, int* stopped);

/* ---- distributed.cpp: MLX's distributed layer (mlx::core::distributed) ----
 * A group is the set of processes a launcher started (mlx.launch's environment:
 * MLX_RANK and MLX_HOSTFILE for ring, ...). A NULL group handle means MLX's
 * global group. Collectives are lazy like any op; a lost peer is an error at
 * eval. backend: "ring", "mpi", "nccl", "jaccl", or "" / "any" for the first
 * available one. */
typedef struct mlxgo_group_* mlxgo_group;
MLXGO_API int mlxgo_distributed_is_available(const char* backend, int* out);
/* strict: fail when the backend cannot be initialized (else a group of 1). */
MLXGO_API int mlxgo_distributed_init(int strict, const char* backend, mlxgo_group* out);
MLXGO_API int mlxgo_group_free(mlxgo_group g);
MLXGO_API int mlxgo_group_rank(mlxgo_group g, int* out);
MLXGO_API int mlxgo_group_size(mlxgo_group g, int* out);
MLXGO_API int mlxgo_group_split(mlxgo_group g, int color, int key, mlxgo_group* out);
MLXGO_API int mlxgo_all_sum(mlxgo_array x, mlxgo_group g, mlxgo_array* out);
MLXGO_API int mlxgo_all_gather(mlxgo_array x, mlxgo_group g, mlxgo_array* out);
MLXGO_API int mlxgo_all_max(mlxgo_array x, mlxgo_group g, mlxgo_array* out);
MLXGO_API int mlxgo_all_min(mlxgo_array x, mlxgo_group g, mlxgo_array* out);
MLXGO_API int mlxgo_sum_scatter(mlxgo_array x, mlxgo_group g, mlxgo_array* out);
/* send's result is a placeholder to eval (the send happens when it is evaluated). */
MLXGO_API int mlxgo_send(mlxgo_array x, int dst, mlxgo_group g, mlxgo_array* out);
MLXGO_API int mlxgo_recv(const int* shape, int n, int dtype, int src, mlxgo_group g, mlxgo_array* out);
MLXGO_API int mlxgo_recv_like(mlxgo_array x, int src, mlxgo_group g, mlxgo_array* out);
/* mx.depends({x}, {dep})[0]: x, evaluated after dep. */
MLXGO_API int mlxgo_depends(mlxgo_array x, mlxgo_array dep, mlxgo_array* out);

#ifdef __cplusplus
}
#endif
#endif /* MLXGO_H */
