// MedianTimer: times one benchmark case call by call (after one warm-up call) and reports the
// median call, so a preempted call on a shared machine does not move the figure.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace bench {

class MedianTimer {
 public:
  static constexpr size_t kMinCalls = 5;

  explicit MedianTimer(std::function<void()> fn) : fn_(std::move(fn)) { fn_(); }
  void call() {
    const auto t0 = std::chrono::steady_clock::now();
    fn_();
    calls_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    total_ += calls_.back();
  }
  // At least kMinCalls calls and `min_time` seconds in all.
  bool done(double min_time) const { return total_ >= min_time && calls_.size() >= kMinCalls; }
  double median() {
    std::nth_element(calls_.begin(), calls_.begin() + static_cast<int64_t>(calls_.size() / 2), calls_.end());
    return calls_[calls_.size() / 2];
  }

 private:
  std::function<void()> fn_;
  std::vector<double> calls_;
  double total_ = 0;
};

}  // namespace bench
