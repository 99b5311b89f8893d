// weft's own CPU thread pool: N−1 workers plus the calling thread, built to degrade gracefully
// when the machine is shared with other CPU-bound processes.
//
// Note [A pool that survives a busy machine]
// OpenMP runtimes spin for a long time after a parallel region (libgomp ~300k spins, OpenBLAS
// ~0.1 s of nops) so that the next region starts fast. When another process wants a core, the
// spinner holds it while the thread it waits for is preempted, and an epoch can take 10-30× its
// idle time. This pool instead:
//   - lets idle workers call sched_yield() for a short while (nearly free on an idle core, and it
//     hands a contended core over at once), then sleep on a futex; the caller issues the futex wake
//     only when someone sleeps;
//   - splits [0, n) statically into one contiguous range per thread (each thread keeps its data in
//     its own caches), cut into a few chunks; a thread takes its own chunks from the front, and a
//     thread that runs out takes the unclaimed chunks of others from the back ("tail stealing"),
//     so the share of a preempted worker is done by whoever is running instead of waited for;
//   - runs nested calls, and calls from a second thread while the pool is busy, serially.
// A job's description is published under a generation word used as a seqlock: odd while the
// caller rewrites it, even once it is readable; a worker announces itself (`inside_`) before
// checking that the generation it saw is still current, and the caller waits for `inside_` to
// drop to zero before rewriting, so no worker ever reads a half-written job.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::detail {

class ThreadPool {
 public:
  // fn(ctx, begin, end) processes the items [begin, end).
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);

  explicit ThreadPool(int threads);  // threads ≥ 1, the caller included
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }

  // Runs fn over [0, n) on every thread of the pool and returns when all items are done. The
  // first exception thrown by fn is rethrown here once the running chunks have finished; chunks
  // not started by then are skipped. Called while the pool is busy (from inside fn, or from
  // another thread) it runs fn(ctx, 0, n) serially.
  void run(int64_t n, RangeFn fn, void* ctx);

  // True on a thread that is executing a chunk of a job of some pool.
  static bool inside_job();

 private:
  struct alignas(64) Cursor {
    // Claimable chunks [front, back) of one thread's range, as (front << 32) | back.
    std::atomic<uint64_t> chunks{0};
  };

  void worker_main(int index);
  void wait_for_job(uint32_t& seen);
  void participate(int self);
  bool claim_front(int owner, int64_t& chunk);
  bool claim_back(int victim, int64_t& chunk);
  void run_chunk(int owner, int64_t chunk);

  const int threads_;
  std::vector<std::thread> workers_;
  std::unique_ptr<Cursor[]> cursors_;
  std::mutex busy_;  // held by the thread whose job the pool runs

  // The current job (rewritten only while generation_ is odd and inside_ is zero).
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunks_per_thread_ = 1;
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};

  alignas(64) std::atomic<uint32_t> generation_{0};  // the futex word
  alignas(64) std::atomic<int64_t> remaining_{0};    // chunks not yet finished
  alignas(64) std::atomic<int> inside_{0};            // workers between announce and leave
  alignas(64) std::atomic<int> sleepers_{0};          // workers in (or entering) futex_wait
  std::atomic<bool> stop_{false};
};

}  // namespace weft::detail
