// distributed.cpp — MLX's distributed layer (mlx::core::distributed): backend
// availability, the group a launcher's environment describes, and the
// collectives tensor and pipeline parallelism need. The transport is MLX's own
// (ring over TCP, MPI, NCCL, JACCL); the shim only hands groups and arrays over.
#include "internal.h"
#include "mlx/distributed/distributed.h"
#include "mlx/distributed/ops.h"

namespace md = mx::distributed;

struct mlxgo_group_ {
  md::Group g;
};

namespace {

// group maps a NULL handle to MLX's global group (init's cached result), as
// Python's group=None does.
std::optional<md::Group> group(mlxgo_group g) {
  if (g == nullptr) return std::nullopt;
  return g->g;
}

void put_group(mlxgo_group* out, md::Group g) {
  if (out == nullptr) throw shim::ArgError("null out pointer");
  *out = new mlxgo_group_{std::move(g)};
}

const md::Group& grp(mlxgo_group g) {
  if (g == nullptr) throw shim::ArgError("null group handle");
  return g->g;
}

}  // namespace

extern "C" {

int mlxgo_distributed_is_available(const char* backend, int* out) {
  MLXGO_BEGIN
  if (out == nullptr) throw shim::ArgError("null out pointer");
  std::string b = shim::str(backend);
  *out = (b.empty() ? md::is_available() : md::is_available(b)) ? 1 : 0;
  MLXGO_END
}

int mlxgo_distributed_init(int strict, const char* backend, mlxgo_group* out) {
  MLXGO_BEGIN
  std::string b = shim::str(backend);
  put_group(out, md::init(strict != 0, b.empty() ? "any" : b));
  MLXGO_END
}

int mlxgo_group_free(mlxgo_group g) {
  delete g;
  return MLXGO_OK;
}

int mlxgo_group_rank(mlxgo_group g, int* out) {
  MLXGO_BEGIN
  if (out == nullptr) throw shim::ArgError("null out pointer");
  *out = grp(g).rank();
  MLXGO_END
}

int mlxgo_group_size(mlxgo_group g, int* out) {
  MLXGO_BEGIN
  if (out == nullptr) throw shim::ArgError("null out pointer");
  *out = grp(g).size();
  MLXGO_END
}

int mlxgo_group_split(mlxgo_group g, int color, int key, mlxgo_group* out) {
  MLXGO_BEGIN
  put_group(out, grp(g).split(color, key));
  MLXGO_END
}

int mlxgo_all_sum(mlxgo_array x, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::all_sum(shim::arr(x), group(g)));
  MLXGO_END
}

int mlxgo_all_gather(mlxgo_array x, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::all_gather(shim::arr(x), group(g)));
  MLXGO_END
}

int mlxgo_all_max(mlxgo_array x, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::all_max(shim::arr(x), group(g)));
  MLXGO_END
}

int mlxgo_all_min(mlxgo_array x, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::all_min(shim::arr(x), group(g)));
  MLXGO_END
}

int mlxgo_sum_scatter(mlxgo_array x, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::sum_scatter(shim::arr(x), group(g)));
  MLXGO_END
}

int mlxgo_send(mlxgo_array x, int dst, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::send(shim::arr(x), dst, group(g)));
  MLXGO_END
}

int mlxgo_recv(const int* shape, int n, int dtype, int src, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::recv(shim::shape(shape, n), shim::dtype(dtype), src, group(g)));
  MLXGO_END
}

int mlxgo_recv_like(mlxgo_array x, int src, mlxgo_group g, mlxgo_array* out) {
  MLXGO_BEGIN
  shim::put(out, md::recv_like(shim::arr(x), src, group(g)));
  MLXGO_END
}

// depends is mx.depends for one input: x's value, evaluated only after dep
// (pipeline parallelism ties a rank's send to its kv cache, so that
// evaluating the cache after a prefill chunk sends the hidden state on).
int mlxgo_depends(mlxgo_array x, mlxgo_array dep, mlxgo_array* out) {
  MLXGO_BEGIN
  std::vector<mx::array> r = mx::depends({shim::arr(x)}, {shim::arr(dep)});
  shim::put(out, r.at(0));
  MLXGO_END
}

}  // extern "C"
