// ops_shape.cpp — construction, casts and shape ops.
#include "internal.h"

using shim::arr;
using shim::put;
using shim::put_all;

extern "C" {

int mlxgo_astype(mlxgo_array a, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::astype(arr(a), shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_view(mlxgo_array a, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::view(arr(a), shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_arange(const double* start, const double* stop, const double* step, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::arange(*start, *stop, *step, shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_zeros(const int* shape, int n, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::zeros(shim::shape(shape, n), shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_ones(const int* shape, int n, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::ones(shim::shape(shape, n), shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_full(const int* shape, int n, mlxgo_array vals, int dtype, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::full(shim::shape(shape, n), arr(vals, "vals"), shim::dtype(dtype)));
  MLXGO_END
}

int mlxgo_reshape(mlxgo_array a, const int* shape, int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::reshape(arr(a), shim::shape(shape, n)));
  MLXGO_END
}

int mlxgo_transpose(mlxgo_array a, const int* axes, int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::transpose(arr(a), shim::ints(axes, n)));
  MLXGO_END
}

int mlxgo_swapaxes(mlxgo_array a, int axis1, int axis2, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::swapaxes(arr(a), axis1, axis2));
  MLXGO_END
}

int mlxgo_expand_dims(mlxgo_array a, const int* axes, int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::expand_dims(arr(a), shim::ints(axes, n)));
  MLXGO_END
}

int mlxgo_squeeze(mlxgo_array a, const int* axes, int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::squeeze(arr(a), shim::ints(axes, n)));
  MLXGO_END
}

int mlxgo_flatten(mlxgo_array a, int start_axis, int end_axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::flatten(arr(a), start_axis, end_axis));
  MLXGO_END
}

int mlxgo_broadcast_to(mlxgo_array a, const int* shape, int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::broadcast_to(arr(a), shim::shape(shape, n)));
  MLXGO_END
}

int mlxgo_concatenate(const mlxgo_array* arrs, int n, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::concatenate(shim::arrays(arrs, n), axis));
  MLXGO_END
}

int mlxgo_stack(const mlxgo_array* arrs, int n, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::stack(shim::arrays(arrs, n), axis));
  MLXGO_END
}

int mlxgo_split_equal(mlxgo_array a, int num, int axis, mlxgo_array* out, int cap) {
  MLXGO_BEGIN
  put_all(mx::split(arr(a), num, axis), out, cap);
  MLXGO_END
}

int mlxgo_split_at(mlxgo_array a, const int* indices, int n, int axis, mlxgo_array* out, int cap) {
  MLXGO_BEGIN
  put_all(mx::split(arr(a), shim::shape(indices, n, "indices"), axis), out, cap);
  MLXGO_END
}

int mlxgo_slice(mlxgo_array a, const int* start, const int* stop, const int* strides, int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::slice(arr(a), shim::shape(start, n, "start"), shim::shape(stop, n, "stop"),
                     shim::shape(strides, n, "strides")));
  MLXGO_END
}

int mlxgo_slice_dynamic(mlxgo_array a, mlxgo_array start, const int* axes, int naxes, const int* sizes, int nsizes,
                        mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::slice(arr(a), arr(start, "start"), shim::ints(axes, naxes), shim::shape(sizes, nsizes, "sizes")));
  MLXGO_END
}

int mlxgo_slice_update(mlxgo_array src, mlxgo_array update, const int* start, const int* stop, const int* strides,
                       int n, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::slice_update(arr(src, "src"), arr(update, "update"), shim::shape(start, n, "start"),
                            shim::shape(stop, n, "stop"), shim::shape(strides, n, "strides")));
  MLXGO_END
}

int mlxgo_slice_update_dynamic(mlxgo_array src, mlxgo_array update, mlxgo_array start, const int* axes, int naxes,
                               mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::slice_update(arr(src, "src"), arr(update, "update"), arr(start, "start"), shim::ints(axes, naxes)));
  MLXGO_END
}

int mlxgo_pad(mlxgo_array a, const int* axes, int n, const int* low, const int* high, mlxgo_array pad_value,
              const char* mode, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::pad(arr(a), shim::ints(axes, n), shim::shape(low, n, "low"), shim::shape(high, n, "high"),
                   arr(pad_value, "pad value"), shim::str(mode)));
  MLXGO_END
}

int mlxgo_repeat(mlxgo_array a, int repeats, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::repeat(arr(a), repeats, axis));
  MLXGO_END
}

int mlxgo_tril(mlxgo_array a, int k, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::tril(arr(a), k));
  MLXGO_END
}

int mlxgo_triu(mlxgo_array a, int k, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::triu(arr(a), k));
  MLXGO_END
}

int mlxgo_contiguous(mlxgo_array a, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::contiguous(arr(a)));
  MLXGO_END
}

int mlxgo_where(mlxgo_array cond, mlxgo_array x, mlxgo_array y, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::where(arr(cond, "condition"), arr(x, "x"), arr(y, "y")));
  MLXGO_END
}

}  // extern "C"
