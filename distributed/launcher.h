// The launcher: starts one process per rank on this node, supervises them, and leaves nothing
// behind. weft-run (tools/weft_run.cpp), Fabric::launch() and the multi-rank tests use it.
//
// Each rank gets exactly torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK, MASTER_ADDR, MASTER_PORT) plus TORCHELASTIC_USE_AGENT_STORE=True: on node 0 the
// launcher itself serves the store at MASTER_ADDR:MASTER_PORT (rendezvous.h), as torchrun's agent
// does. Every launcher writes an exit note for each rank it reaps into that store (Note
// [Heartbeats]), which is how the surviving ranks learn who died.
//
// Supervision: when a rank exits non-zero (or by a signal), the others get `grace` to fail on
// their own (they do, through the collectives' errors), then are killed; a launcher that is itself
// killed takes its ranks with it (PR_SET_PDEATHSIG), and SIGINT/SIGTERM are passed on. Each rank
// runs in its own process group, so its children die with it. The exit code is 0 when every rank
// succeeded, else the first failing rank's code (128 + signal for a signal).
//
// CPU binding (opt-in, `weft-run --cpu-bind`): each local rank runs on its own share of the CPUs
// the launcher may use, set before exec so that every thread the rank starts (its pool, the
// communication threads) stays there. Ranks then stop trading places on the cores, which on a
// machine with one core per rank is most of the spread in step time (Note [All-reduce of a pair]
// has the figures); weft's thread pool sizes itself to the share.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace weft::distributed {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;           // 0: a free port (single node only)
  std::vector<std::string> command;   // program and arguments; a name without '/' is looked up in PATH
  std::map<std::string, std::string> env;  // extra variables for every rank
  std::chrono::milliseconds grace{5000};   // after the first failure, before the others are killed
  std::optional<std::chrono::milliseconds> deadline;  // kill everything after this long (tests)
  std::optional<std::filesystem::path> log_dir;  // rank r's stdout and stderr go to <log_dir>/rank<r>.log
  bool verbose = true;  // report each rank's end on stderr
  bool bind_cpus = false;  // each local rank on its own share of the launcher's CPUs (cpu_shares)
};

struct RankEnd {
  int rank = 0;
  int status = 0;  // as waitpid reports it
  bool killed_by_launcher = false;
  std::string describe() const;  // "exit code 1", "killed by signal 9 (Killed)"
};

struct LaunchResult {
  int exit_code = 0;
  bool deadline_passed = false;
  std::vector<RankEnd> ranks;  // in the order they ended
};

LaunchResult launch(const LaunchOptions& options);

// `cpus` split into `ranks` contiguous shares whose sizes differ by at most one, the larger first:
// {0,1,2,3,4} over 2 ranks is {0,1,2}, {3,4}. Fails when there are fewer CPUs than ranks.
std::vector<std::vector<int>> cpu_shares(const std::vector<int>& cpus, int ranks);

// The CPUs this process may run on (its affinity mask), in increasing order.
std::vector<int> allowed_cpus();

}  // namespace weft::distributed
