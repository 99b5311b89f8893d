// Heartbeats and failure diagnosis (Note [Heartbeats] in health.h).
#include "distributed/health.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "tensor/parallel.h"

namespace weft::distributed::detail {
namespace {

struct Beat {
  bool present = false;
  uint64_t count = 0;
  uint64_t issued = 0;
};

Beat read_beat(Store& store, int rank) {
  Beat b;
  if (!store.check({heartbeat_key(rank)})) return b;
  std::istringstream is(store.get(heartbeat_key(rank), Milliseconds(0)));
  b.present = static_cast<bool>(is >> b.count >> b.issued);
  return b;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace

std::string exit_key(int rank) { return "exit/" + std::to_string(rank); }
std::string heartbeat_key(int rank) { return "hb/" + std::to_string(rank); }
std::string failed_key(int rank) { return "failed/" + std::to_string(rank); }

HealthMonitor::HealthMonitor(const std::shared_ptr<Store>& store, int rank, int size, Milliseconds timeout,
                             std::function<uint64_t()> issued)
    : rank_(rank),
      size_(size),
      interval_(std::clamp(timeout / 8, Milliseconds(50), Milliseconds(1000))),
      issued_(std::move(issued)) {
  if (size_ == 1) return;
  beat_store_ = store->clone();
  diagnosis_store_ = store->clone();
  for (auto* s : {beat_store_.get(), diagnosis_store_.get()}) s->set_timeout(interval_ * 2);
  beat_store_->set(heartbeat_key(rank_), "0 0");
  thread_ = std::thread([this] { beat_loop(); });
}

HealthMonitor::~HealthMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::beat_loop() {
  weft::detail::name_this_thread("weft-health");
  uint64_t count = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    lock.unlock();
    try {
      beat_store_->set(heartbeat_key(rank_), std::to_string(++count) + " " + std::to_string(issued_()));
    } catch (const std::exception&) {
      // The store is gone or stopped; diagnosis on the peers reports that. Keep trying.
    }
    lock.lock();
  }
}

std::string HealthMonitor::diagnose(uint64_t seq) {
  if (size_ == 1) return {};
  try {
    Store& store = *diagnosis_store_;
    // Say first that this rank is a casualty, so that peers diagnosing the same failure do not
    // take its exit (which follows) for the cause.
    store.set(failed_key(rank_), std::to_string(seq));
    std::vector<Beat> first(size_);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) first[r] = read_beat(store, r);
    // Exit notes first: a launcher writes them within milliseconds of reaping the rank, so poll
    // for them across the whole observation window.
    std::vector<std::string> exited;
    for (int step = 0; step <= 6 && exited.empty(); ++step) {
      if (step > 0) std::this_thread::sleep_for(interval_ / 2);
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && store.check({exit_key(r)}) && !store.check({failed_key(r)}))
          exited.push_back("rank " + std::to_string(r) + " exited (" + store.get(exit_key(r), Milliseconds(0)) + ")");
    }
    if (!exited.empty()) return join(exited);
    std::vector<std::string> silent, behind;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || store.check({failed_key(r)})) continue;
      const Beat now = read_beat(store, r);
      if (!now.present || now.count == first[r].count) {
        silent.push_back("rank " + std::to_string(r) + " stopped responding (no heartbeat for " +
                         std::to_string((interval_ * 3).count()) + " ms: stopped, hung in the kernel, or dead)");
      } else if (now.issued < seq) {
        behind.push_back("rank " + std::to_string(r) + " has not reached collective #" + std::to_string(seq) +
                         " (it is alive, and its last collective is #" + std::to_string(now.issued) + ")");
      }
    }
    if (!silent.empty()) return join(silent);
    return join(behind);
  } catch (const std::exception& e) {
    return std::string("the store is unreachable, so its host (rank 0 or the launcher) may have died: ") + e.what();
  }
}

}  // namespace weft::distributed::detail
