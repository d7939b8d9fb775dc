// device.cpp — devices, streams and memory statistics and limits.
//
// Streams cross the ABI as (stream index, device type, device index): MLX's
// Stream is exactly that value, so no handle or free is needed.
#include <sstream>
#include <variant>

#include "internal.h"
#include "mlx/backend/cuda/cuda.h"
#include "mlx/backend/metal/metal.h"

namespace {

void put_size(size_t* out, size_t v) {
  if (out == nullptr) throw shim::ArgError("null out pointer");
  *out = v;
}

void put_int(int* out, int v) {
  if (out == nullptr) throw shim::ArgError("null out pointer");
  *out = v;
}

thread_local std::string device_info_text;

}  // namespace

extern "C" {

int mlxgo_default_device(int* type, int* index) {
  MLXGO_BEGIN
  const auto& d = mx::default_device();
  put_int(type, d.type == mx::Device::cpu ? MLXGO_CPU : MLXGO_GPU);
  put_int(index, d.index);
  MLXGO_END
}

int mlxgo_set_default_device(int type, int index) {
  MLXGO_BEGIN
  mx::set_default_device(shim::device(type, index));
  MLXGO_END
}

int mlxgo_device_available(int type, int* out) {
  MLXGO_BEGIN
  put_int(out, mx::is_available(shim::device(type, 0)) ? 1 : 0);
  MLXGO_END
}

int mlxgo_device_count(int type, int* out) {
  MLXGO_BEGIN
  auto d = shim::device(type, 0);
  put_int(out, mx::device_count(d.type));
  MLXGO_END
}

int mlxgo_device_info(int type, int index, const char** out) {
  MLXGO_BEGIN
  if (out == nullptr) throw shim::ArgError("null out pointer");
  std::ostringstream s;
  for (const auto& [k, v] : mx::device_info(shim::device(type, index))) {
    s << k << '=';
    std::visit([&s](const auto& x) { s << x; }, v);
    s << '\n';
  }
  device_info_text = s.str();
  *out = device_info_text.c_str();
  MLXGO_END
}

int mlxgo_backends(int* metal, int* cuda) {
  MLXGO_BEGIN
  put_int(metal, mx::metal::is_available() ? 1 : 0);
  put_int(cuda, mx::cu::is_available() ? 1 : 0);
  MLXGO_END
}

int mlxgo_default_stream(int type, int index, int* stream_index) {
  MLXGO_BEGIN
  put_int(stream_index, mx::default_stream(shim::device(type, index)).index);
  MLXGO_END
}

int mlxgo_new_stream(int type, int index, int* stream_index) {
  MLXGO_BEGIN
  put_int(stream_index, mx::new_stream(shim::device(type, index)).index);
  MLXGO_END
}

int mlxgo_set_default_stream(int stream_index, int type, int index) {
  MLXGO_BEGIN
  mx::set_default_stream(mx::Stream(stream_index, shim::device(type, index)));
  MLXGO_END
}

int mlxgo_synchronize(int has_stream, int stream_index, int type, int index) {
  MLXGO_BEGIN
  if (has_stream) {
    mx::synchronize(mx::Stream(stream_index, shim::device(type, index)));
  } else {
    mx::synchronize();
  }
  MLXGO_END
}

int mlxgo_memory_active(size_t* out) {
  MLXGO_BEGIN
  put_size(out, mx::get_active_memory());
  MLXGO_END
}

int mlxgo_memory_peak(size_t* out) {
  MLXGO_BEGIN
  put_size(out, mx::get_peak_memory());
  MLXGO_END
}

int mlxgo_memory_reset_peak(void) {
  MLXGO_BEGIN
  mx::reset_peak_memory();
  MLXGO_END
}

int mlxgo_memory_cache(size_t* out) {
  MLXGO_BEGIN
  put_size(out, mx::get_cache_memory());
  MLXGO_END
}

int mlxgo_memory_limit(size_t* out) {
  MLXGO_BEGIN
  put_size(out, mx::get_memory_limit());
  MLXGO_END
}

int mlxgo_set_memory_limit(size_t limit, size_t* previous) {
  MLXGO_BEGIN
  put_size(previous, mx::set_memory_limit(limit));
  MLXGO_END
}

int mlxgo_set_cache_limit(size_t limit, size_t* previous) {
  MLXGO_BEGIN
  put_size(previous, mx::set_cache_limit(limit));
  MLXGO_END
}

int mlxgo_set_wired_limit(size_t limit, size_t* previous) {
  MLXGO_BEGIN
  put_size(previous, mx::set_wired_limit(limit));
  MLXGO_END
}

int mlxgo_clear_cache(void) {
  MLXGO_BEGIN
  mx::clear_cache();
  MLXGO_END
}

}  // extern "C"
