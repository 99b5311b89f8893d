// The launcher's environment, read and checked (see dist_env.h).
#include "distributed/dist_env.h"

#include <cstdlib>

#include "tensor/error.h"

namespace weft::distributed {

std::optional<std::string> detail::env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

int detail::env_int(const char* name, std::optional<int> fallback, int low, int high) {
  const auto text = env(name);
  if (!text) {
    WEFT_CHECK(fallback.has_value(), "[init_process_group] environment variable ", name, " is not set; start the "
               "program with weft-run or torchrun, or pass the value in InitOptions");
    return *fallback;
  }
  char* end = nullptr;
  const long v = std::strtol(text->c_str(), &end, 10);
  WEFT_CHECK(!text->empty() && *end == '\0' && v >= low && v <= high, "[init_process_group] expected ", name,
             " to be an integer in [", low, ", ", high, "], got '", *text, "'");
  return static_cast<int>(v);
}

bool launched_by_launcher() { return detail::env("RANK").has_value() && detail::env("WORLD_SIZE").has_value(); }

DistEnv read_dist_env(bool need_master) {
  using detail::env;
  using detail::env_int;
  DistEnv e;
  e.world_size = env_int("WORLD_SIZE", std::nullopt, 1, 1 << 20);
  e.rank = env_int("RANK", std::nullopt, 0, e.world_size - 1);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = env_int("LOCAL_RANK", e.rank % e.local_world_size, 0, e.local_world_size - 1);
  const auto addr = env("MASTER_ADDR");
  const auto port = env("MASTER_PORT");
  if (need_master || addr || port) {
    WEFT_CHECK(addr && !addr->empty(), "[init_process_group] environment variable MASTER_ADDR is not set");
    e.master_addr = *addr;
    e.master_port = static_cast<uint16_t>(env_int("MASTER_PORT", std::nullopt, 1, 65535));
  }
  const auto agent = env("TORCHELASTIC_USE_AGENT_STORE");
  e.launcher_hosts_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  return e;
}

}  // namespace weft::distributed
