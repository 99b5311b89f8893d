// The default generator shared by threads (Note [Generator locking] in tensor/generator.h): each
// random factory call gets one contiguous run of the stream, so concurrent calls neither repeat
// nor lose numbers. The ThreadSanitizer job runs this file too (scripts/run-tests.sh --tsan).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "tensor/all.h"

using namespace weft;

TEST_CASE("threads drawing from the default generator at once each get whole runs of its stream") {
  constexpr int kThreads = 4;
  constexpr int kCalls = 100;
  constexpr int64_t kRun = 32;
  manual_seed(2024);
  std::vector<std::vector<std::vector<double>>> runs(kThreads);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&runs, t] {
        for (int c = 0; c < kCalls; ++c) runs[t].push_back(rand({kRun}, kFloat64).to_vector<double>());
      });
    for (auto& thread : threads) thread.join();
  }
  // The same stream drawn on one thread; a 53-bit uniform names its position.
  Generator reference(2024);
  std::map<double, int64_t> position;
  for (int64_t i = 0; i < kThreads * kCalls * kRun; ++i) position.emplace(reference.uniform(), i);
  REQUIRE(position.size() == static_cast<size_t>(kThreads * kCalls * kRun));

  std::vector<bool> run_taken(kThreads * kCalls, false);
  bool all_whole_runs = true;
  for (const auto& thread_runs : runs) {
    for (const auto& run : thread_runs) {
      const auto first = position.find(run[0]);
      bool whole = first != position.end() && first->second % kRun == 0;
      for (int64_t i = 1; whole && i < kRun; ++i) {
        const auto at = position.find(run[static_cast<size_t>(i)]);
        whole = at != position.end() && at->second == first->second + i;
      }
      whole = whole && !run_taken[static_cast<size_t>(first->second / kRun)];
      if (whole) run_taken[static_cast<size_t>(first->second / kRun)] = true;
      all_whole_runs = all_whole_runs && whole;
    }
  }
  CHECK(all_whole_runs);
  CHECK(std::all_of(run_taken.begin(), run_taken.end(), [](bool taken) { return taken; }));
}

TEST_CASE("a generator copied while another thread draws from it gets a consistent state") {
  Generator shared(5);
  std::thread drawer([&] {
    for (int i = 0; i < 2000; ++i) shared.normal();
  });
  for (int i = 0; i < 50; ++i) {
    Generator copy = shared;
    const auto state = copy.state();
    Generator again(0);
    again.set_state(state);
    CHECK(again.next_u64() == copy.next_u64());
  }
  drawer.join();
}
