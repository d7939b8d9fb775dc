// ops_reduce.cpp — reductions, softmax, sorting and indexing.
#include "internal.h"

using shim::arr;
using shim::put;

// Reductions take an explicit axis list; the Go side spells out "all axes"
// rather than the ABI having a second, axis-less entry point.
#define REDUCE(name)                                                                          \
  int mlxgo_##name(mlxgo_array a, const int* axes, int n, int keepdims, mlxgo_array* out) { \
    MLXGO_BEGIN                                                                               \
    put(out, mx::name(arr(a), shim::ints(axes, n), keepdims != 0));                           \
    MLXGO_END                                                                                 \
  }

extern "C" {

REDUCE(sum)
REDUCE(mean)
REDUCE(max)
REDUCE(min)
REDUCE(prod)
REDUCE(all)
REDUCE(any)

int mlxgo_logsumexp(mlxgo_array a, const int* axes, int n, int keepdims, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mlxgo::cpu::logsumexp(arr(a), shim::ints(axes, n), keepdims != 0));
  MLXGO_END
}

int mlxgo_var(mlxgo_array a, const int* axes, int n, int keepdims, int ddof, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::var(arr(a), shim::ints(axes, n), keepdims != 0, ddof));
  MLXGO_END
}

int mlxgo_argmax(mlxgo_array a, int axis, int keepdims, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::argmax(arr(a), axis, keepdims != 0));
  MLXGO_END
}

int mlxgo_argmin(mlxgo_array a, int axis, int keepdims, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::argmin(arr(a), axis, keepdims != 0));
  MLXGO_END
}

int mlxgo_cumsum(mlxgo_array a, int axis, int reverse, int inclusive, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::cumsum(arr(a), axis, reverse != 0, inclusive != 0));
  MLXGO_END
}

int mlxgo_softmax(mlxgo_array a, const int* axes, int n, int precise, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::softmax(arr(a), shim::ints(axes, n), precise != 0));
  MLXGO_END
}

int mlxgo_sort(mlxgo_array a, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::sort(arr(a), axis));
  MLXGO_END
}

int mlxgo_argsort(mlxgo_array a, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::argsort(arr(a), axis));
  MLXGO_END
}

int mlxgo_partition(mlxgo_array a, int kth, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::partition(arr(a), kth, axis));
  MLXGO_END
}

int mlxgo_argpartition(mlxgo_array a, int kth, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::argpartition(arr(a), kth, axis));
  MLXGO_END
}

int mlxgo_topk(mlxgo_array a, int k, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::topk(arr(a), k, axis));
  MLXGO_END
}

int mlxgo_take(mlxgo_array a, mlxgo_array indices, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::take(arr(a), arr(indices, "indices"), axis));
  MLXGO_END
}

int mlxgo_take_along_axis(mlxgo_array a, mlxgo_array indices, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::take_along_axis(arr(a), arr(indices, "indices"), axis));
  MLXGO_END
}

int mlxgo_put_along_axis(mlxgo_array a, mlxgo_array indices, mlxgo_array values, int axis, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::put_along_axis(arr(a), arr(indices, "indices"), arr(values, "values"), axis));
  MLXGO_END
}

int mlxgo_gather(mlxgo_array a, const mlxgo_array* indices, int nidx, const int* axes, int naxes,
                 const int* slice_sizes, int nsizes, mlxgo_array* out) {
  MLXGO_BEGIN
  put(out, mx::gather(arr(a), shim::arrays(indices, nidx), shim::ints(axes, naxes),
                      shim::shape(slice_sizes, nsizes, "slice sizes")));
  MLXGO_END
}

}  // extern "C"
