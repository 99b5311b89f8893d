// Rendezvous: how a rank learns who it is and meets the others, configured exactly as torchrun
// configures a PyTorch worker.
//
//   // torchrun --nproc-per-node 2 --no-python ./train   or   weft-run -n 2 ./train
//   auto pg = distributed::init_process_group();           // env://, Gloo
//
// env:// reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The
// store at MASTER_ADDR:MASTER_PORT is served by the launcher when TORCHELASTIC_USE_AGENT_STORE is
// "True" (torchrun's agent, or weft-run, which sets it), else by rank 0. tcp://host:port is the
// same with the address given; file:///folder uses a FileStore there (RANK and WORLD_SIZE still
// from the environment unless given). Keys live under "weft/" (plus torchrun's run id and restart
// count when set), so a torchrun restart never reads the previous attempt's keys.
//
// The collectives bind to the local address this rank reaches the store from, which on a
// multi-homed host is the interface facing MASTER_ADDR; GLOO_SOCKET_IFNAME overrides it with an
// interface's address, as in PyTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "distributed/dist_env.h"
#include "distributed/process_group.h"
#include "distributed/store.h"

namespace weft::distributed {

struct InitOptions {
  std::string backend = "gloo";        // "gloo", or "nccl" in CUDA builds
  std::string init_method = "env://";  // "env://", "tcp://host:port", "file:///folder"
  std::optional<int> rank;             // override RANK
  std::optional<int> world_size;       // override WORLD_SIZE
  Milliseconds timeout{1'800'000};     // of the rendezvous and of every collective (PyTorch: 30 min)
};

// Rendezvous and connect; every rank calls it with the same options.
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

// The job-level store and this rank's identity, for callers that need the store itself (a
// second process group over the same ranks, a launcher writing exit notes).
struct Rendezvous {
  std::shared_ptr<Store> job_store;  // already namespaced under "weft/..."
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;         // this rank's GPU under NCCL
  std::string local_address;  // where this rank's collectives should bind
};
Rendezvous rendezvous(const InitOptions& options);

// The namespace every weft key lives under for this job ("weft", or "weft/<run id>/<restart>").
std::string job_prefix();

}  // namespace weft::distributed
