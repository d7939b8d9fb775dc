// core.cpp — errors, thread binding, array lifecycle, host data and eval.
#include <cstring>
#include <limits>

#include "internal.h"
#include "mlx/primitives.h"
#include "mlx/backend/cuda/cuda.h"
#include "mlx/io.h"
#include "mlx/io/load.h"

namespace shim {

std::atomic<int64_t> live_arrays{0};
thread_local bool thread_bound = false;

// The last error is per thread: the Go executor reads it on the same OS
// thread that made the failing call, right after the call returns.
static thread_local std::string last_error;

int fail(int status, const char* msg) {
  try {
    last_error = msg == nullptr ? "unknown error" : msg;
  } catch (...) {
    // Out of memory while keeping the message: the status still reports it.
  }
  return status;
}

}  // namespace shim

namespace {

// typed_array copies host bytes into a new MLX array of the same element type,
// so the copy is bit-exact (no conversion through another type).
template <typename T>
mx::array typed(const void* data, mx::Shape shape, mx::Dtype dt) {
  return mx::array(static_cast<const T*>(data), std::move(shape), dt);
}

mx::array from_host(const void* data, mx::Shape shape, mx::Dtype dt) {
  switch (dt) {
    case mx::bool_: return typed<bool>(data, std::move(shape), dt);
    case mx::uint8: return typed<uint8_t>(data, std::move(shape), dt);
    case mx::uint16: return typed<uint16_t>(data, std::move(shape), dt);
    case mx::uint32: return typed<uint32_t>(data, std::move(shape), dt);
    case mx::uint64: return typed<uint64_t>(data, std::move(shape), dt);
    case mx::int8: return typed<int8_t>(data, std::move(shape), dt);
    case mx::int16: return typed<int16_t>(data, std::move(shape), dt);
    case mx::int32: return typed<int32_t>(data, std::move(shape), dt);
    case mx::int64: return typed<int64_t>(data, std::move(shape), dt);
    case mx::float16: return typed<mx::float16_t>(data, std::move(shape), dt);
    case mx::float32: return typed<float>(data, std::move(shape), dt);
    case mx::float64: return typed<double>(data, std::move(shape), dt);
    case mx::bfloat16: return typed<mx::bfloat16_t>(data, std::move(shape), dt);
    case mx::complex64: return typed<mx::complex64_t>(data, std::move(shape), dt);
  }
  throw shim::ArgError("unsupported dtype for host data");
}

// host_shape checks the byte count before MLX reads from data: a short
// buffer would be read past its end.
mx::Shape host_shape(const void* data, size_t nbytes, const int* shape, int ndim, mx::Dtype dt) {
  auto sh = shim::shape(shape, ndim);
  size_t count = 1;
  for (int d : sh) {
    if (d < 0) throw shim::ArgError("negative dimension in shape");
    if (d != 0 && count > std::numeric_limits<size_t>::max() / static_cast<size_t>(d)) {
      throw shim::ArgError("shape too large");
    }
    count *= static_cast<size_t>(d);
  }
  if (count > std::numeric_limits<size_t>::max() / mx::size_of(dt) || count * mx::size_of(dt) != nbytes) {
    throw shim::ArgError("host data is " + std::to_string(nbytes) + " bytes, shape and dtype need " +
                         std::to_string(count * mx::size_of(dt)));
  }
  if (count > 0 && data == nullptr) throw shim::ArgError("null host data");
  return sh;
}

// HostNpy is an io::Reader presenting host bytes the caller owns as a .npy
// file of nbytes uint8 (numpy's header, then the bytes), which is what
// mx::load reads. It is read once, by the Load primitive that to_device
// evaluates before returning, while the caller still holds the bytes.
class HostNpy : public mx::io::Reader {
 public:
  HostNpy(const void* data, size_t n) : data_(static_cast<const char*>(data)), n_(n) {
    std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
    // Version 1: magic, 2-byte little-endian header length, header padded
    // with spaces and ended by a newline so that the data starts at a
    // multiple of 64, as numpy writes it.
    size_t len = dict.size() + 1;
    len += (64 - (10 + len) % 64) % 64;
    dict.resize(len - 1, ' ');
    dict += '\n';
    head_ = std::string("\x93NUMPY\x01\x00", 8);
    head_ += static_cast<char>(len & 0xff);
    head_ += static_cast<char>(len >> 8);
    head_ += dict;
  }
  bool is_open() const override { return true; }
  bool good() const override { return pos_ <= size(); }
  size_t tell() override { return pos_; }
  void seek(int64_t off, std::ios_base::seekdir way) override {
    pos_ = way == std::ios_base::beg ? static_cast<size_t>(off)
         : way == std::ios_base::cur ? pos_ + off
                                     : size() + off;
  }
  void read(char* out, size_t n) override {
    read(out, n, pos_);
    pos_ += n;
  }
  void read(char* out, size_t n, size_t offset) override {
    if (offset > size() || n > size() - offset) throw std::runtime_error("[mlxgo] read past the end of host bytes");
    if (offset < head_.size()) {
      size_t k = std::min(n, head_.size() - offset);
      std::memcpy(out, head_.data() + offset, k);
      out += k, n -= k, offset += k;
    }
    if (n > 0) std::memcpy(out, data_ + (offset - head_.size()), n);
  }
  std::string label() const override { return "host bytes"; }

 private:
  size_t size() const { return head_.size() + n_; }
  std::string head_;
  const char* data_;
  size_t n_;
  size_t pos_ = 0;
};

// to_device puts host bytes in plain device memory the way mlx-lm's mx.load
// does on a CUDA GPU: a Load primitive on the GPU stream, whose eval copies
// into a cudaMallocAsync buffer. An array made from host data lives in
// managed memory instead, which the GPU pages in on first touch (slowing the
// first prefill) and which a card oversubscribes silently. The bytes load as
// uint8 and are viewed (no copy) as dt; evaluated at once, since the caller
// may unmap the bytes when this returns.
mx::array to_device(const void* data, size_t nbytes, mx::Shape shape, mx::Dtype dt) {
  auto s = mx::default_stream(mx::default_device());
  auto bytes = mx::load(std::make_shared<HostNpy>(data, nbytes), s);
  auto a = mx::reshape(mx::view(bytes, dt, s), std::move(shape), s);
  a.eval();
  return a;
}

bool weights_on_device() {
  return mx::cu::is_available() && mx::default_device() == mx::Device::gpu;
}

}  // namespace

extern "C" {

const char* mlxgo_last_error(void) { return shim::last_error.c_str(); }

const char* mlxgo_version(void) { return mx::version(); }

int64_t mlxgo_live_arrays(void) { return shim::live_arrays.load(std::memory_order_relaxed); }

int mlxgo_bind_thread(void) {
  shim::thread_bound = true;
  return MLXGO_OK;
}

int mlxgo_thread_bound(void) { return shim::thread_bound ? 1 : 0; }

// Free works on any thread: dropping a reference is atomic in MLX, and the
// scheduler holds its own references to arrays it is still computing.
int mlxgo_array_free(mlxgo_array a) {
  if (a == nullptr) return MLXGO_OK;
  delete a;
  shim::live_arrays.fetch_sub(1, std::memory_order_relaxed);
  return MLXGO_OK;
}

int mlxgo_array_clone(mlxgo_array a, mlxgo_array* out) {
  MLXGO_ANY_THREAD_BEGIN
  shim::put(out, shim::arr(a));
  MLXGO_END
}

int mlxgo_array_op_name(mlxgo_array a, const char** name) {
  MLXGO_ANY_THREAD_BEGIN
  if (name == nullptr) throw shim::ArgError("null name pointer");
  const auto& x = shim::arr(a);
  *name = x.has_primitive() ? x.primitive().name() : "";
  MLXGO_END
}

int mlxgo_array_from_data(const void* data, size_t nbytes, const int* shape, int ndim, int dtype,
                          mlxgo_array* out) {
  MLXGO_BEGIN
  auto dt = shim::dtype(dtype);
  auto sh = host_shape(data, nbytes, shape, ndim, dt);
  shim::put(out, from_host(data, std::move(sh), dt));
  MLXGO_END
}

int mlxgo_array_load_bytes(const void* data, size_t nbytes, const int* shape, int ndim, int dtype,
                           mlxgo_array* out) {
  MLXGO_BEGIN
  auto dt = shim::dtype(dtype);
  auto sh = host_shape(data, nbytes, shape, ndim, dt);
  if (nbytes > 0 && weights_on_device()) {
    shim::put(out, to_device(data, nbytes, std::move(sh), dt));
  } else {
    shim::put(out, from_host(data, std::move(sh), dt));
  }
  MLXGO_END
}

int mlxgo_array_from_float(const float* v, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, mx::array(*v, shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_array_from_int(int64_t v, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, mx::array(v, shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_array_info(mlxgo_array a, int* dtype, int* ndim, int* shape, int cap) {
  MLXGO_ANY_THREAD_BEGIN
  const auto& x = shim::arr(a);
  if (dtype == nullptr || ndim == nullptr) throw shim::ArgError("null out pointer");
  shim::check_n(shape, cap, "shape buffer");
  *dtype = static_cast<int>(x.dtype().val());
  *ndim = static_cast<int>(x.ndim());
  for (int i = 0; i < cap && i < *ndim; i++) shape[i] = x.shape(i);
  MLXGO_END
}

int mlxgo_array_to_host(mlxgo_array a, void* dst, size_t nbytes) {
  MLXGO_BEGIN
  auto x = shim::arr(a);
  if (x.nbytes() != nbytes) {
    throw shim::ArgError("destination is " + std::to_string(nbytes) + " bytes, array has " +
                         std::to_string(x.nbytes()));
  }
  if (nbytes == 0) return MLXGO_OK;
  if (dst == nullptr) throw shim::ArgError("null destination");
  x.eval();
  // Views (transposes, broadcasts, strided slices) are not laid out
  // row-major; copy them into a fresh row-major array first.
  if (!x.flags().row_contiguous) {
    x = mx::contiguous(x);
    x.eval();
  }
  std::memcpy(dst, x.data<uint8_t>(), nbytes);
  MLXGO_END
}

int mlxgo_eval(const mlxgo_array* arrs, int n) {
  MLXGO_BEGIN
  mx::eval(shim::arrays(arrs, n));
  MLXGO_END
}

int mlxgo_async_eval(const mlxgo_array* arrs, int n) {
  MLXGO_BEGIN
  mx::async_eval(shim::arrays(arrs, n));
  MLXGO_END
}

}  // extern "C"
