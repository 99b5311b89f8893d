// CommThread: the thread that runs a process group's collectives in issue order, and the Work
// handles it hands out.
//
// A collective waits in the queue, runs, and ends done or failed. Work::wait() has a deadline
// (Note [Collective failures]): `budget` after the collective started, or, while it still waits
// in the queue, `budget` after the collective ahead of it started. When the deadline passes, the
// wait fails and the group is marked broken even though the engine never answered. When a
// collective fails, every one queued behind it fails with the same message: the peers' state is
// unknown, so nothing more may be sent.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/process_group.h"

namespace weft::distributed::detail {

class CommThread {
 public:
  // Runs one collective on the thread; throws on failure.
  using Runner = std::function<void(const Collective&)>;
  // Turns a failure into the message every waiter sees (and marks the group broken).
  using Failure = std::function<std::string(const Collective&, const std::string& what)>;

  CommThread(Runner run, Failure fail, std::chrono::milliseconds budget);
  // Fails what is still queued ("the process group was destroyed") and joins the thread.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  std::shared_ptr<Work> enqueue(Collective collective);

  struct Shared;  // state shared with the Work handles (defined in comm_thread.cpp)

 private:
  void loop();

  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace weft::distributed::detail
