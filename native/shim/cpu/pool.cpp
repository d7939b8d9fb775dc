// pool.cpp — see pool.h.
#include "pool.h"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace mlxgo::cpu {

namespace {

// How long an idle worker spins before it sleeps. A decode step's matmuls
// are separated by MLX's small ops (tens of microseconds); a sleeping worker
// takes about as long to wake. Spinning longer than that takes a core from
// MLX's own two threads (the one building the graph and the stream's): 300 us
// cost a third of decode speed on 2 cores. MLXGO_SPIN_US overrides it (0:
// always sleep).
long spin_us() {
  static const long us = [] {
    const char* s = std::getenv("MLXGO_SPIN_US");
    return s ? std::atol(s) : 50L;
  }();
  return us;
}

}  // namespace

struct Pool::Impl {
  std::mutex run_mu;  // one run at a time
  std::atomic<uint64_t> gen{0};
  std::atomic<int> next{0};
  std::atomic<int> pending{0};
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  int n = 0;
  const std::function<void(int)>* fn = nullptr;
  std::vector<std::thread> workers;
  std::atomic<int> want{1};
  std::mutex sleep_mu;
  std::condition_variable cv;

  void work() {
    for (;;) {
      int i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      (*fn)(i);
    }
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      uint64_t g = wait_new(seen);
      if (stop.load()) return;
      seen = g;
      work();
      pending.fetch_sub(1, std::memory_order_release);
    }
  }

  uint64_t wait_new(uint64_t seen) {
    using clock = std::chrono::steady_clock;
    const auto limit = std::chrono::microseconds(spin_us());
    auto start = clock::now();
    for (int spins = 0;; spins++) {
      uint64_t g = gen.load(std::memory_order_acquire);
      if (g != seen || stop.load(std::memory_order_relaxed)) return g;
      _mm_pause();
      if ((spins & 63) == 63 && clock::now() - start > limit) break;
    }
    std::unique_lock<std::mutex> lk(sleep_mu);
    sleepers.fetch_add(1);
    cv.wait(lk, [&] { return gen.load() != seen || stop.load(); });
    sleepers.fetch_sub(1);
    return gen.load(std::memory_order_acquire);
  }

  // resize runs under run_mu with no job in flight.
  void resize(int nworkers) {
    if (int(workers.size()) == nworkers) return;
    if (!workers.empty()) {
      stop.store(true);
      {
        std::lock_guard<std::mutex> lk(sleep_mu);
        cv.notify_all();
      }
      for (auto& t : workers) t.join();
      workers.clear();
      stop.store(false);
    }
    uint64_t g = gen.load();
    for (int i = 0; i < nworkers; i++) workers.emplace_back([this, g] { worker_loop(g); });
  }
};

Pool& Pool::get() {
  // Never destroyed: the process may exit with workers parked, and joining
  // them from a static destructor would race with MLX's own teardown.
  static Pool* p = new Pool();
  return *p;
}

Pool::Impl* Pool::impl() {
  static std::once_flag once;
  std::call_once(once, [this] { impl_ = new Impl(); });
  return impl_;
}

void Pool::set_threads(int n) { impl()->want.store(n < 1 ? 1 : n); }

int Pool::threads() const { return const_cast<Pool*>(this)->impl()->want.load(); }

void Pool::run(int n, const std::function<void(int)>& fn) {
  Impl* s = impl();
  if (n <= 0) return;
  std::unique_lock<std::mutex> lk(s->run_mu, std::try_to_lock);
  int nworkers = s->want.load() - 1;
  if (!lk.owns_lock() || n == 1 || nworkers <= 0) {
    for (int i = 0; i < n; i++) fn(i);
    return;
  }
  s->resize(nworkers);
  s->fn = &fn;
  s->n = n;
  s->next.store(0, std::memory_order_relaxed);
  s->pending.store(nworkers, std::memory_order_relaxed);
  s->gen.fetch_add(1);  // seq_cst: pairs with the sleepers check in wait_new
  if (s->sleepers.load() > 0) {
    std::lock_guard<std::mutex> g(s->sleep_mu);
    s->cv.notify_all();
  }
  s->work();
  while (s->pending.load(std::memory_order_acquire) != 0) _mm_pause();
  s->fn = nullptr;
}

}  // namespace mlxgo::cpu
