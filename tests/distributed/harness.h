// Multi-rank tests: workers that run as spawned ranks, and the parent side that spawns them.
//
//   WEFT_RANK_WORKER(sum_twice) {          // runs in every rank, in its own process
//     auto pg = weft::test::init_group();  // Gloo, env:// from the launcher, test timeouts
//     ...; weft::test::save_result(pg->rank(), tensors);
//     return 0;
//   }
//   auto run = weft::test::run_ranks(3, "sum_twice");   // in a TEST_CASE
//   CHECK(run.ok());  auto r0 = run.result(0);
//
// run_ranks re-executes this test binary through distributed::launch() (so the launcher is
// tested too), with WEFT_TEST_WORKER naming the worker, one OpenMP thread per rank, each rank's
// output in <dir>/rank<r>.log and a deadline on the whole run: a test can fail, never hang. A
// worker that throws prints the error to its log and exits 1.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/all.h"

namespace weft::test {

using Worker = std::function<int(const std::vector<std::string>& args)>;

struct WorkerRegistration {
  WorkerRegistration(const char* name, Worker worker);
};

#define WEFT_RANK_WORKER(name)                                                                   \
  static int weft_worker_##name(const std::vector<std::string>& args);                           \
  static const ::weft::test::WorkerRegistration weft_worker_reg_##name(#name, weft_worker_##name); \
  static int weft_worker_##name([[maybe_unused]] const std::vector<std::string>& args)

// In main(): runs the worker named by WEFT_TEST_WORKER, if any, and returns its exit code.
std::optional<int> run_worker_from_env();

// ---- inside a worker ----
// The run's shared folder (results, stores).
std::filesystem::path run_dir();
// A Gloo group from the launcher's environment, with the collective timeout of the run.
std::shared_ptr<distributed::ProcessGroup> init_group();
std::chrono::milliseconds group_timeout();
void save_result(int rank, const nn::TensorDict& tensors, const std::string& name = "result");

// ---- in the test ----
struct RunOptions {
  std::chrono::milliseconds group_timeout{20'000};  // every collective's timeout in the ranks
  std::chrono::milliseconds deadline{120'000};      // of the whole run
  std::chrono::milliseconds grace{2'000};
  std::map<std::string, std::string> env;
  bool bind_cpus = false;  // distributed::LaunchOptions::bind_cpus
};

struct RankRun {
  distributed::LaunchResult launch;
  std::filesystem::path dir;
  double seconds = 0;
  int world_size = 0;
  std::shared_ptr<void> cleanup;  // removes `dir` with the last copy (WEFT_TEST_KEEP=1 keeps it)

  bool ok() const { return launch.exit_code == 0 && !launch.deadline_passed; }
  std::string log(int rank) const;
  // Every rank's log, for a failure message.
  std::string logs() const;
  nn::TensorDict result(int rank, const std::string& name = "result") const;
  // How rank r ended, or nullopt when it is not in the launch result.
  std::optional<distributed::RankEnd> end_of(int rank) const;
};

RankRun run_ranks(int n, const std::string& worker, const std::vector<std::string>& args = {},
                  const RunOptions& options = {});

// A group of one rank in the test process itself (nothing spawned): for checks that need a group
// but no peers.
std::shared_ptr<distributed::ProcessGroup> solo_group();

// Throws a weft::Error with the message unless cond holds (a check inside a worker).
void require(bool cond, const std::string& message);

}  // namespace weft::test
