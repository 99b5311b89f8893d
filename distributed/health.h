// Heartbeats, and the diagnosis that turns "a collective failed" into "rank 2 stopped".
//
// Note [Heartbeats]: a collective engine reports a dead peer as a closed connection to some
// address, and a hung peer as a timeout on a receive, which in a ring may be a neighbour of the
// culprit rather than the culprit. So every rank runs a small thread that writes
//   hb/<rank> = "<beat> <last issued collective>"
// into the job's store every `interval` (the group's timeout / 8, within [50 ms, 1 s]), and a
// launcher that reaps a rank writes exit/<rank> = how it ended ("exit code 1", "killed by signal
// 9"). When a collective fails, diagnose() reads them: a rank with an exit note exited (unless it
// had itself noted failed/<rank>, a casualty of the same failure rather than its cause); a rank
// whose beat did not advance over 3 intervals stopped (SIGSTOP, a machine gone, a process
// wedged); a rank whose last issued collective is older than the failed one is alive but has not
// reached it (hung in its own code, or issuing collectives in another order). Both threads use
// their own store connections with short deadlines, so a stopped store host cannot block them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/store.h"

namespace weft::distributed::detail {

// The keys launchers and heartbeats write, relative to the job's store.
std::string exit_key(int rank);
std::string heartbeat_key(int rank);
// Written by a rank whose collective failed, before it diagnoses (and then exits).
std::string failed_key(int rank);

class HealthMonitor {
 public:
  // `store` is the job's store; the monitor clones it for its own connections. `issued` reports
  // this rank's last issued collective.
  HealthMonitor(const std::shared_ptr<Store>& store, int rank, int size, Milliseconds timeout,
                std::function<uint64_t()> issued);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Why collective #seq failed, as far as the peers' notes and heartbeats tell ("rank 2 exited
  // (killed by signal 9)"); empty when every peer looks alive and current. Takes at most about
  // three intervals.
  std::string diagnose(uint64_t seq);
  Milliseconds interval() const { return interval_; }

 private:
  void beat_loop();

  int rank_;
  int size_;
  Milliseconds interval_;
  std::function<uint64_t()> issued_;
  std::shared_ptr<Store> beat_store_;
  std::shared_ptr<Store> diagnosis_store_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace weft::distributed::detail
