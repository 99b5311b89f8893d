// Faults: a rank that dies, hangs, stops or never arrives makes every other rank fail with an
// error naming it, within the group's timeout (plus the diagnosis), and the launcher leaves no
// process behind. Timeouts here are 2 s, so each case takes seconds.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "harness.h"
#include "distributed/all.h"

using namespace weft;
using namespace std::chrono_literals;

namespace {

constexpr auto kTimeout = 2000ms;

test::RunOptions fault_options() {
  test::RunOptions o;
  o.group_timeout = kTimeout;
  // The survivors must fail on their own, not be killed: the last of them to notice may start
  // its own timeout after the first has failed, and then diagnoses for up to 3 heartbeats, so
  // the launcher waits a second timeout before killing what is left (a 1 s grace once killed a
  // slow survivor of the FSDP case before it had logged).
  o.grace = 2 * kTimeout;
  o.deadline = 60'000ms;
  return o;
}

// What the victim does at step 3 of an all-reduce loop.
void misbehave(const std::string& how) {
  if (how == "exit") ::_exit(3);
  if (how == "sigkill") ::raise(SIGKILL);
  if (how == "sigstop") ::raise(SIGSTOP);
  if (how == "sleep") std::this_thread::sleep_for(std::chrono::hours(1));
}

// True when the process is gone or a zombie (dead, waiting for a parent that is not ours) within
// a second: a SIGKILL sent just before is delivered asynchronously.
bool process_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

// args: how the last rank misbehaves. Every rank first starts a grandchild that sleeps, to check
// that the launcher's kill reaches a rank's own children too.
WEFT_RANK_WORKER(misbehaving_rank) {
  const std::string how = args.at(0);
  auto pg = test::init_group();
  const pid_t child = ::fork();
  if (child == 0) {
    ::sleep(600);
    ::_exit(0);
  }
  std::ofstream(test::run_dir() / ("child" + std::to_string(pg->rank()))) << child;
  Tensor x = ones({1 << 16});
  for (int step = 0; step < 100; ++step) {
    if (step == 3 && pg->rank() == pg->size() - 1) misbehave(how);
    pg->all_reduce(x, distributed::ReduceOp::Avg)->wait();
  }
  return 0;
}

TEST_CASE("a rank that dies or hangs mid-step makes the others fail within the timeout, naming it") {
  struct Case {
    const char* how;
    const char* named;     // what the survivors must say about the last rank
    double max_seconds;    // the whole run, kills included
  };
  // The bounds are the group's timeout (2 s) plus the diagnosis, the launcher's grace and generous
  // room for a loaded or sanitised machine: well below the 60 s after which the harness gives up.
  for (const Case& c : {Case{"exit", "exited (exit code 3)", 20.0}, Case{"sigkill", "exited (killed by signal 9", 20.0},
                        Case{"sigstop", "stopped responding", 20.0}, Case{"sleep", "has not reached collective", 20.0}}) {
    for (int n : {2, 3}) {
      CAPTURE(c.how);
      CAPTURE(n);
      const auto run = test::run_ranks(n, "misbehaving_rank", {c.how}, fault_options());
      INFO(run.logs());
      CHECK_FALSE(run.ok());
      CHECK_FALSE(run.launch.deadline_passed);
      CHECK(run.seconds < c.max_seconds);
      REQUIRE(run.launch.ranks.size() == static_cast<size_t>(n));  // every rank was reaped
      const std::string victim = "rank " + std::to_string(n - 1) + " ";
      for (int r = 0; r + 1 < n; ++r) {
        const std::string log = run.log(r);
        CHECK(log.find("[all_reduce] all_reduce #") != std::string::npos);
        CHECK(log.find("failed on rank " + std::to_string(r) + " of " + std::to_string(n)) != std::string::npos);
        CHECK(log.find(victim + c.named) != std::string::npos);
        CHECK(run.end_of(r)->status != 0);
        CHECK_FALSE(run.end_of(r)->killed_by_launcher);  // the survivors failed on their own
      }
      if (std::string(c.how) == "sigstop" || std::string(c.how) == "sleep")
        CHECK(run.end_of(n - 1)->killed_by_launcher);
      for (int r = 0; r < n; ++r) {
        std::ifstream in(run.dir / ("child" + std::to_string(r)));
        pid_t child = 0;
        REQUIRE(static_cast<bool>(in >> child));
        CHECK(process_gone(child));
      }
    }
  }
}

WEFT_RANK_WORKER(late_rank) {
  if (std::getenv("RANK") == std::string("2")) return 0;  // never joins
  test::init_group();
  return 0;
}

TEST_CASE("a rank that never arrives fails the rendezvous on the others, naming it") {
  const auto run = test::run_ranks(3, "late_rank", {}, fault_options());
  INFO(run.logs());
  CHECK_FALSE(run.ok());
  CHECK(run.seconds < 20.0);
  for (int r = 0; r < 2; ++r) CHECK(run.log(r).find("rank(s) 2 of 3 did not join the rendezvous") != std::string::npos);
}

WEFT_RANK_WORKER(die_while_sending) {
  auto pg = test::init_group();
  Tensor x = ones({1 << 20});
  for (int step = 0; step < 50; ++step) {
    if (step == 2 && pg->rank() == 1) ::raise(SIGKILL);
    pg->all_reduce(x)->wait();
  }
  return 0;
}

TEST_CASE("a peer killed mid-transfer never kills a survivor with SIGPIPE") {
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    const auto run = test::run_ranks(2, "die_while_sending", {}, fault_options());
    INFO(run.logs());
    REQUIRE(run.end_of(0).has_value());
    const int status = run.end_of(0)->status;
    CHECK(WIFEXITED(status));  // an error, not a signal
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(run.log(0).find("rank 1 exited (killed by signal 9") != std::string::npos);
  }
}

WEFT_RANK_WORKER(exit_code) {
  if (std::getenv("RANK") == std::string("1")) return 7;
  return 0;
}

TEST_CASE("weft-run runs N ranks with torchrun's variables and returns the failing rank's exit code") {
  const char* weft_run = std::getenv("WEFT_RUN");
  REQUIRE_MESSAGE(weft_run != nullptr, "WEFT_RUN names the weft-run binary (set by CTest)");
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(len > 0);
  const std::string exe(self, static_cast<size_t>(len));
  const std::string dir = "/tmp/weft-run-test-" + std::to_string(::getpid());
  const auto sh = [&](const std::string& worker, const std::string& tail) {
    const std::string cmd = "WEFT_TEST_WORKER=" + worker + " WEFT_TEST_DIR=" + dir + " OMP_NUM_THREADS=1 " +
                            weft_run + " -n 3 --grace 1 " + exe + tail;
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::filesystem::create_directories(dir);
  CHECK(sh("exit_code", " 2>/dev/null") == 7);
  CHECK(sh("collectives", " >/dev/null 2>&1") == 0);
  const std::string usage = std::string(weft_run) + " 2>/dev/null";
  CHECK(WEXITSTATUS(std::system(usage.c_str())) == 2);  // no -n, no program: usage
  std::filesystem::remove_all(dir);
}

// args: how the last rank misbehaves ("sigkill" or "sleep"), and where ("forward" or "backward").
WEFT_RANK_WORKER(misbehaving_fsdp_rank) {
  const std::string how = args.at(0), where = args.at(1);
  auto pg = test::init_group();
  manual_seed(0);
  nn::Sequential model(nn::Linear(7, 13), nn::ReLU(), nn::Linear(13, 5));
  distributed::FullyShardedDataParallel fsdp(
      model, pg, {.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear"})});
  optim::AdamW opt(fsdp->parameters(), {.lr = 0.01});
  int step = 0;
  const bool victim = pg->rank() == pg->size() - 1;
  // In the middle of step 2: between the two layers' forwards, or when the last layer's gradient
  // arrives in backward.
  model->at<nn::LinearImpl>(0)->register_forward_hook([&](nn::Module&, const Tensor& out) {
    if (victim && step == 2 && where == "forward") misbehave(how);
    return out;
  });
  model->at<nn::LinearImpl>(2)->weight.register_post_accumulate_grad_hook([&](Tensor&) {
    if (victim && step == 2 && where == "backward") misbehave(how);
  });
  for (; step < 10; ++step) {
    opt.zero_grad();
    cross_entropy(fsdp(ones({2, 7})), zeros({2}, kInt64)).backward();
    opt.step();
  }
  return 0;
}

TEST_CASE("an FSDP rank that dies or hangs mid-step, in forward or in backward, fails the others naming it") {
  for (const char* how : {"sigkill", "sleep"})
    for (const char* where : {"forward", "backward"}) {
      CAPTURE(how);
      CAPTURE(where);
      const auto run = test::run_ranks(3, "misbehaving_fsdp_rank", {how, where}, fault_options());
      INFO(run.logs());
      CHECK_FALSE(run.ok());
      CHECK(run.seconds < 20.0);
      for (int r = 0; r < 2; ++r) {
        const std::string log = run.log(r);
        CHECK(log.find("failed on rank " + std::to_string(r) + " of 3") != std::string::npos);
        CHECK(log.find("rank 2 ") != std::string::npos);
      }
    }
}
