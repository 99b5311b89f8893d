// The pool of Note [A pool that survives a busy machine] (thread_pool.h): job publication,
// chunk claiming with tail stealing, and the yield-then-futex wait of idle workers.
#include "tensor/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace weft::detail {
namespace {

// How long an idle worker keeps yielding before it sleeps: long enough to bridge the gap between
// the parallel loops of one training step, short enough that an idle pool costs nothing.
constexpr auto kYieldTime = std::chrono::microseconds(100);
constexpr int kMaxYields = 2000;
// Chunks per thread: the granularity at which an early finisher can take over another's share.
constexpr int64_t kChunksPerThread = 4;

thread_local bool t_inside_job = false;

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word.wait(expected);
#endif
}

void futex_wake_all(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
  word.notify_all();
#endif
}

constexpr uint64_t pack(uint64_t front, uint64_t back) { return front << 32 | back; }

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)), cursors_(new Cursor[std::max(1, threads)]) {
  workers_.reserve(static_cast<size_t>(threads_ - 1));
  for (int i = 1; i < threads_; ++i) {
    workers_.emplace_back([this, i] { worker_main(i); });
#if defined(__linux__)
    // Named here, not by the worker itself: the name is there when the constructor returns.
    pthread_setname_np(workers_.back().native_handle(), ("weft-pool-" + std::to_string(i)).c_str());
#endif
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(busy_);
    stop_.store(true);
    generation_.fetch_add(2);
    futex_wake_all(generation_);
  }
  for (auto& w : workers_) w.join();
}

bool ThreadPool::inside_job() { return t_inside_job; }

void ThreadPool::run(int64_t n, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  if (threads_ == 1 || t_inside_job || !busy_.try_lock()) {
    fn(ctx, 0, n);
    return;
  }
  std::lock_guard<std::mutex> lock(busy_, std::adopt_lock);

  // Odd generation: workers that saw the previous job leave it; rewrite once none is inside.
  generation_.fetch_add(1);
  while (inside_.load() != 0) sched_yield();
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  chunks_per_thread_ = std::clamp<int64_t>((n + threads_ - 1) / threads_, 1, kChunksPerThread);
  error_ = nullptr;
  failed_.store(false, std::memory_order_relaxed);
  for (int t = 0; t < threads_; ++t)
    cursors_[t].chunks.store(pack(0, static_cast<uint64_t>(chunks_per_thread_)), std::memory_order_relaxed);
  remaining_.store(chunks_per_thread_ * threads_, std::memory_order_relaxed);
  generation_.fetch_add(1);  // even again: published
  if (sleepers_.load() > 0) futex_wake_all(generation_);

  participate(0);
  // Only chunks already running on other threads are left; their owners cannot be helped.
  while (remaining_.load(std::memory_order_acquire) != 0) sched_yield();
  if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::worker_main(int index) {
  // The generation the pool was created with, not the current one: a job posted (or the stop
  // signalled) before this thread got to run must still be seen as new.
  uint32_t seen = 0;
  for (;;) {
    wait_for_job(seen);
    if (stop_.load()) return;
    inside_.fetch_add(1);
    if (generation_.load() == seen) participate(index);
    inside_.fetch_sub(1);
  }
}

void ThreadPool::wait_for_job(uint32_t& seen) {
  auto start = std::chrono::steady_clock::now();
  int yields = 0;
  for (;;) {
    const uint32_t g = generation_.load(std::memory_order_acquire);
    if (g != seen && (g & 1) == 0) {
      seen = g;
      return;
    }
    if (g & 1 || (yields < kMaxYields && std::chrono::steady_clock::now() - start < kYieldTime)) {
      sched_yield();
      ++yields;
      continue;
    }
    // Announce the sleep before the last look, so that a caller publishing now sees the sleeper.
    sleepers_.fetch_add(1);
    if (generation_.load() == seen) futex_wait(generation_, seen);
    sleepers_.fetch_sub(1);
    start = std::chrono::steady_clock::now();
    yields = 0;
  }
}

void ThreadPool::participate(int self) {
  int64_t chunk = 0;
  while (claim_front(self, chunk)) run_chunk(self, chunk);
  for (int d = 1; d < threads_; ++d) {
    const int victim = (self + d) % threads_;
    while (claim_back(victim, chunk)) run_chunk(victim, chunk);
  }
}

bool ThreadPool::claim_front(int owner, int64_t& chunk) {
  auto& word = cursors_[owner].chunks;
  uint64_t v = word.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t front = v >> 32, back = v & 0xffffffffu;
    if (front >= back) return false;
    if (word.compare_exchange_weak(v, pack(front + 1, back), std::memory_order_acq_rel)) {
      chunk = static_cast<int64_t>(front);
      return true;
    }
  }
}

bool ThreadPool::claim_back(int victim, int64_t& chunk) {
  auto& word = cursors_[victim].chunks;
  uint64_t v = word.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t front = v >> 32, back = v & 0xffffffffu;
    if (front >= back) return false;
    if (word.compare_exchange_weak(v, pack(front, back - 1), std::memory_order_acq_rel)) {
      chunk = static_cast<int64_t>(back - 1);
      return true;
    }
  }
}

void ThreadPool::run_chunk(int owner, int64_t chunk) {
  // Thread `owner` owns the items [lo, hi), cut into chunks_per_thread_ nearly equal pieces.
  const int64_t lo = n_ * owner / threads_, hi = n_ * (owner + 1) / threads_;
  const int64_t begin = lo + (hi - lo) * chunk / chunks_per_thread_;
  const int64_t end = lo + (hi - lo) * (chunk + 1) / chunks_per_thread_;
  if (begin < end && !failed_.load(std::memory_order_relaxed)) {
    t_inside_job = true;
    try {
      fn_(ctx_, begin, end);
    } catch (...) {
      if (!failed_.exchange(true)) error_ = std::current_exception();
    }
    t_inside_job = false;
  }
  remaining_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace weft::detail
