// GlooProcessGroup: the CPU backend, on Gloo (Debian's libgloo-dev, the engine PyTorch's CPU
// collectives use), over TCP.
//
// How it maps the collectives (see ../shared/reference/distributed.md §1.5 for the pitfalls):
// - all_reduce, all_gather, broadcast and barrier are Gloo's own; float16 and bfloat16 reduce
//   through our combine function (Gloo's reduce functions are untyped), Avg is a Sum divided
//   locally.
// - reduce_scatter, which Gloo's current API lacks, is an all-to-all of the input's blocks
//   followed by a local reduction of the blocks received, in rank order: the bytes a ring
//   reduce-scatter would send, and one rounding for narrow floats instead of one per hop.
// - Every collective gets its own tag, its sequence number, as concurrent Gloo operations need.
// - SIGPIPE is ignored process-wide before the first connection: a peer that dies mid-send must
//   surface as an error in the survivors, not kill them.
// - Calls return at once; one communication thread runs the collectives in issue order, so a
//   gradient all-reduce overlaps the backward pass that issued it. Gloo's own timeout (the group's
//   timeout) bounds every send and receive; Note [Collective failures] in process_group.h says
//   what a failure reports.
// - A group of one rank runs without Gloo: every collective is a local copy or a no-op.
#pragma once

#include <memory>
#include <string>

#include "distributed/process_group.h"

namespace weft::distributed {

struct GlooOptions {
  Milliseconds timeout{30'000};
  // The local address to bind, reachable by the other ranks; empty: the address this process
  // reaches the store from (TCPStore), else 127.0.0.1.
  std::string address;
};

class GlooProcessGroup final : public ProcessGroup {
 public:
  // Rendezvous through `store` (namespaced per group by the caller), then connect to every peer.
  // Fails naming the ranks that did not arrive within the timeout. `job_store` is where
  // heartbeats and launchers' exit notes live (Note [Heartbeats]).
  GlooProcessGroup(std::shared_ptr<Store> store, std::shared_ptr<Store> job_store, int rank, int size,
                   GlooOptions options = {});
  ~GlooProcessGroup() override;

  std::string backend_name() const override { return "gloo"; }

 protected:
  std::shared_ptr<Work> launch(Collective collective) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

namespace detail {
// Waits until every rank of the group has set "joined/<rank>" in `store`; fails naming the
// missing ranks when the timeout passes first. Shared by the backends.
void rendezvous_barrier(Store& store, int rank, int size, Milliseconds timeout, const char* who);
}  // namespace detail

}  // namespace weft::distributed
