// weft's thread pool behind parallel_for (tensor/cpu/thread_pool.h): every index exactly once
// for any count and thread count, exceptions carried out, nested and concurrent calls, and tail
// stealing: the unstarted share of a thread that is held up is done by another thread; workers
// carry names.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensor/all.h"
#include "thread_names.h"

using namespace weft;

namespace {

// Sets the thread count for a scope.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace

TEST_CASE("parallel_for runs every index exactly once, whatever the count and thread count") {
  for (int threads : {1, 2, 3, 8}) {
    ThreadsGuard guard(threads);
    CHECK(num_threads() == threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 100003}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int repeat = 0; repeat < 3; ++repeat) parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
      int wrong = 0;
      for (auto& h : hits) wrong += h.load() != 3;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("parallel_for carries the first exception out, and the pool keeps working") {
  ThreadsGuard guard(3);
  CHECK_THROWS_WITH_AS(parallel_for(100, [](int64_t i) {
                         if (i == 42) throw Error("[test] index 42");
                       }),
                       "[test] index 42", Error);
  std::atomic<int64_t> sum{0};
  parallel_for(100, [&](int64_t i) { sum += i; });
  CHECK(sum.load() == 4950);
}

TEST_CASE("a parallel_for inside another runs serially and completely") {
  ThreadsGuard guard(2);
  std::vector<std::atomic<int>> hits(20 * 30);
  parallel_for(20, [&](int64_t i) { parallel_for(30, [&](int64_t j) { hits[static_cast<size_t>(i * 30 + j)]++; }); });
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
}

TEST_CASE("parallel_for called from several threads at once completes each call") {
  ThreadsGuard guard(2);
  constexpr int kCallers = 4;
  std::vector<int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([c, &sums] {
      for (int r = 0; r < 50; ++r) {
        std::atomic<int64_t> sum{0};
        parallel_for(1000, [&](int64_t i) { sum += i; });
        sums[static_cast<size_t>(c)] += sum.load();
      }
    });
  for (auto& t : callers) t.join();
  for (int64_t s : sums) CHECK(s == 50 * 499500);
}

TEST_CASE("a held-up thread's unstarted share is taken over (tail stealing)") {
  // Two threads, 8 indices: each thread owns 4, one chunk each. Index 4 is the other thread's
  // first; it waits until the 7 other indices are done. Without stealing, 5, 6 and 7 would wait
  // behind it forever; with it, the caller takes them from the back. A deadline keeps a broken
  // pool from hanging the test.
  ThreadsGuard guard(2);
  for (int repeat = 0; repeat < 20; ++repeat) {
    std::atomic<int> done{0};
    std::atomic<bool> timed_out{false};
    parallel_for(8, [&](int64_t i) {
      if (i == 4) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (done.load() < 7 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        if (done.load() < 7) timed_out = true;
      }
      ++done;
    });
    CHECK(done.load() == 8);
    CHECK_FALSE(timed_out.load());
  }
}

TEST_CASE("set_num_threads refuses non-positive counts") {
  CHECK_THROWS_WITH_AS(set_num_threads(0), "[set_num_threads] expected a positive thread count, got 0", Error);
}

TEST_CASE("the pool's workers are named weft-pool-N, as top and perf show them") {
#if defined(__linux__)
  ThreadsGuard threads(3);
  std::atomic<int> ran{0};
  parallel_for(64, [&](int64_t) { ran.fetch_add(1); });
  REQUIRE(ran.load() == 64);
  const std::set<std::string> names = thread_names();
  CHECK(names.count("weft-pool-1") == 1);
  CHECK(names.count("weft-pool-2") == 1);
  CHECK(names.count("weft-pool-3") == 0);  // the calling thread is the third
#endif
}
