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

// How long the submitting thread spins for the calls workers claimed before
// it yields its core instead. A claimed call is one tile (microseconds);
// waiting longer means the worker was taken off its core mid-call (another
// process, or on 2 cores MLX's and Go's own threads), and it may be waiting
// for exactly the core this thread spins on. MLXGO_WAIT_SPIN_US overrides it.
long wait_spin_us() {
  static const long us = [] {
    const char* s = std::getenv("MLXGO_WAIT_SPIN_US");
    return s ? std::atol(s) : 20L;
  }();
  return us;
}

}  // namespace

struct Pool::Impl {
  std::mutex run_mu;  // one run at a time
  // state is the current job's number (high 32 bits) and its next unclaimed
  // index (low 32 bits). A thread claims index i of job J by moving state
  // from (J, i) to (J, i + 1), so a worker that wakes late, after its job
  // is over, claims nothing of the next one: the state it read is gone.
  // A run takes two numbers: it first closes the pool (an odd job whose
  // index, kClosed, is past any bound), then sets fn, n and done, then opens
  // the even job at index 0.
  std::atomic<uint64_t> state{0};
  std::atomic<int> n{0};
  std::atomic<const std::function<void(int)>*> fn{nullptr};
  std::atomic<int> done{0};  // calls of the current job that returned
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  std::atomic<int> want{1};
  std::mutex sleep_mu;
  std::condition_variable cv;

  static uint32_t job_of(uint64_t s) { return uint32_t(s >> 32); }

  static constexpr uint32_t kClosed = 0xFFFFFFFFu;

  // work claims and runs indices of the current job until none is left.
  // n and fn are read after state: they belong to the job state names or
  // to a later one. A later run stored the closed state before them
  // (release; read here with acquire), so in that case the claim fails,
  // and a call never runs with another job's function or bound.
  void work() {
    uint64_t s = state.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t i = uint32_t(s);
      const uint32_t nn = uint32_t(n.load(std::memory_order_acquire));
      const auto* f = fn.load(std::memory_order_acquire);
      if (i >= nn) return;
      if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        (*f)(int(i));
        done.fetch_add(1, std::memory_order_release);
        s++;
      }
    }
  }

  void worker_loop(uint32_t seen) {
    for (;;) {
      uint32_t j = wait_new(seen);
      if (stop.load()) return;
      seen = j;
      work();
    }
  }

  uint32_t wait_new(uint32_t seen) {
    using clock = std::chrono::steady_clock;
    const auto limit = std::chrono::microseconds(spin_us());
    auto start = clock::now();
    for (int spins = 0;; spins++) {
      uint32_t j = job_of(state.load(std::memory_order_acquire));
      if (j != seen || stop.load(std::memory_order_relaxed)) return j;
      _mm_pause();
      if ((spins & 63) == 63 && clock::now() - start > limit) break;
    }
    std::unique_lock<std::mutex> lk(sleep_mu);
    sleepers.fetch_add(1);
    cv.wait(lk, [&] { return job_of(state.load()) != seen || stop.load(); });
    sleepers.fetch_sub(1);
    return job_of(state.load(std::memory_order_acquire));
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
    uint32_t j = job_of(state.load());
    for (int i = 0; i < nworkers; i++) workers.emplace_back([this, j] { worker_loop(j); });
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

// The caller waits for the calls that were claimed, not for the workers: a
// worker the OS has not scheduled yet (another process on the core) finds
// the job over when it runs, and the caller has done its share meanwhile.
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
  const uint32_t j = (Impl::job_of(s->state.load(std::memory_order_relaxed)) | 1u) + 2u;  // odd: closed
  s->state.store(uint64_t(j) << 32 | Impl::kClosed);
  s->fn.store(&fn, std::memory_order_release);
  s->n.store(n, std::memory_order_release);
  s->done.store(0, std::memory_order_relaxed);
  s->state.store(uint64_t(j + 1) << 32);  // seq_cst: pairs with the sleepers check in wait_new
  if (s->sleepers.load() > 0) {
    std::lock_guard<std::mutex> g(s->sleep_mu);
    s->cv.notify_all();
  }
  s->work();
  using clock = std::chrono::steady_clock;
  const auto limit = std::chrono::microseconds(wait_spin_us());
  const auto start = clock::now();
  bool yielding = false;
  for (int spins = 0; s->done.load(std::memory_order_acquire) != n; spins++) {
    if (yielding) {
      std::this_thread::yield();
      continue;
    }
    _mm_pause();
    if ((spins & 63) == 63 && clock::now() - start > limit) yielding = true;
  }
}

}  // namespace mlxgo::cpu
