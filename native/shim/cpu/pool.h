// pool.h — the shim's own worker threads for the CPU kernels.
//
// MLX runs each CPU stream's tasks on one thread; a kernel task of ours
// splits its outputs over that thread plus the pool's workers. The pool is
// sized once (threads - 1 workers: the calling thread works too) so nothing
// oversubscribes the cores, and workers spin briefly between tasks before
// sleeping: a decode step is hundreds of small matmuls a few microseconds
// apart, and waking a sleeping thread costs more than one of them.
#pragma once

#include <functional>

namespace mlxgo::cpu {

class Pool {
 public:
  // Pool shared by every kernel. set_threads takes effect for the next run.
  static Pool& get();

  void set_threads(int n);
  int threads() const;

  // run calls fn(i) for every i in [0, n) on the calling thread and the
  // workers, returning when all calls are done. A run that finds the pool
  // busy (another stream's kernel) runs serially on the caller. fn must not
  // throw.
  void run(int n, const std::function<void(int)>& fn);

 private:
  Pool() = default;
  struct Impl;
  Impl* impl();
  Impl* impl_ = nullptr;
};

}  // namespace mlxgo::cpu
