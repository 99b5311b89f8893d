// The communication thread and its Work handles (see comm_thread.h).
#include "distributed/comm_thread.h"

#include "tensor/error.h"
#include "tensor/parallel.h"

namespace weft::distributed::detail {

using Clock = std::chrono::steady_clock;

namespace {

enum class Status { Queued, Running, Done, Failed };

struct Item;

}  // namespace

struct CommThread::Shared {
  Runner run;
  Failure fail;
  std::chrono::milliseconds budget;
  std::mutex mutex;
  std::condition_variable cv;  // signals new work to the thread and completions to waiters
  std::deque<std::shared_ptr<Item>> queue;
  bool stop = false;
  std::string broken;                  // set after the first failure
  Clock::time_point running_since{};   // start of the collective now running
  bool running = false;
};

namespace {

struct Item final : Work {
  Collective collective;
  std::shared_ptr<CommThread::Shared> shared;
  Status status = Status::Queued;
  Clock::time_point started{};
  std::string error;

  void wait() override {
    std::unique_lock<std::mutex> lock(shared->mutex);
    while (status == Status::Queued || status == Status::Running) {
      // Queued: the collective ahead of it has the deadline; running: this one has.
      const Clock::time_point since = status == Status::Running ? started : shared->running_since;
      const bool clock_on = status == Status::Running || shared->running;
      if (clock_on && Clock::now() >= since + shared->budget) {
        const Collective late = collective;
        const std::string what = weft::detail::cat(late.describe(), " did not complete within ",
                                                   shared->budget.count(),
                                                   " ms and the communication engine reported nothing");
        lock.unlock();
        const std::string message = shared->fail(late, what);
        lock.lock();
        if (shared->broken.empty()) shared->broken = message;
        WEFT_FAIL(message);
      }
      shared->cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    WEFT_CHECK(status == Status::Done, error);
  }

  bool is_completed() const override {
    std::lock_guard<std::mutex> lock(shared->mutex);
    return status == Status::Done || status == Status::Failed;
  }
};

}  // namespace

CommThread::CommThread(Runner run, Failure fail, std::chrono::milliseconds budget)
    : shared_(std::make_shared<Shared>()) {
  shared_->run = std::move(run);
  shared_->fail = std::move(fail);
  shared_->budget = budget;
  thread_ = std::thread([this] { loop(); });
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  thread_.join();
}

std::shared_ptr<Work> CommThread::enqueue(Collective collective) {
  auto item = std::make_shared<Item>();
  item->collective = std::move(collective);
  item->shared = shared_;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (!shared_->broken.empty()) {
      item->status = Status::Failed;
      item->error = shared_->broken;
      return item;
    }
    shared_->queue.push_back(item);
  }
  shared_->cv.notify_all();
  return item;
}

void CommThread::loop() {
  weft::detail::name_this_thread("weft-comm");
  std::unique_lock<std::mutex> lock(shared_->mutex);
  while (true) {
    shared_->cv.wait(lock, [&] { return shared_->stop || !shared_->queue.empty(); });
    if (shared_->queue.empty()) break;  // stop requested and nothing left
    auto item = shared_->queue.front();
    shared_->queue.pop_front();
    if (shared_->stop || !shared_->broken.empty()) {
      item->status = Status::Failed;
      item->error = shared_->broken.empty()
                        ? weft::detail::cat("[", item->collective.describe(),
                                            "] the process group was destroyed before this collective ran")
                        : shared_->broken;
      shared_->cv.notify_all();
      continue;
    }
    item->status = Status::Running;
    item->started = shared_->running_since = Clock::now();
    shared_->running = true;
    lock.unlock();
    std::string failure;
    try {
      shared_->run(item->collective);
    } catch (const std::exception& e) {
      failure = shared_->fail(item->collective, e.what());
    }
    lock.lock();
    shared_->running = false;
    if (failure.empty()) {
      item->status = Status::Done;
    } else {
      if (shared_->broken.empty()) shared_->broken = failure;
      item->status = Status::Failed;
      item->error = shared_->broken;
    }
    item->collective = Collective{};  // release the buffers as soon as the collective is over
    shared_->cv.notify_all();
  }
}

}  // namespace weft::distributed::detail
