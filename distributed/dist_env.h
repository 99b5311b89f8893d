// DistEnv: the environment a launcher (weft-run, torchrun) gives each rank it starts, read and
// checked. Plain reading of variables, with no process group behind it: the core library carries
// it (CMakeLists.txt, WEFT_CORE_DISTRIBUTED), so a one-process program and Fabric can ask whether
// a launcher started them without linking weft_distributed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft::distributed {

// torchrun's variables, read and checked.
struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;
  uint16_t master_port = 0;
  bool launcher_hosts_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True
};

// True when RANK and WORLD_SIZE are set (this process was started by a launcher).
bool launched_by_launcher();
// Reads the variables; fails naming any that is missing or malformed. MASTER_* may be absent
// when `need_master` is false.
DistEnv read_dist_env(bool need_master = true);

namespace detail {
// The variable's value, if it is set.
std::optional<std::string> env(const char* name);
// The variable as an integer in [low, high]; `fallback` when it is not set (fails without one).
int env_int(const char* name, std::optional<int> fallback, int low, int high);
}  // namespace detail

}  // namespace weft::distributed
