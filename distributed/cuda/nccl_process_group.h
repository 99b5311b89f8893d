// NcclProcessGroup: the GPU backend, on NCCL (shipped with the CUDA toolkit), one process per GPU.
// Built only with -DWEFT_CUDA=ON; every collective takes tensors on this rank's GPU.
//
// - The communicator's unique id is minted by rank 0 and passed through the group's store
//   ("nccl_id"), the same rendezvous the Gloo backend uses; initialisation is non-blocking and
//   polled against the timeout, so a missing rank fails the others instead of hanging them.
// - Each collective is enqueued on the group's communication stream after that stream waits for
//   the work already queued on the calling thread's stream (cudaStreamPerThread: the inputs are
//   ready); after Work::wait, that stream waits for the collective's completion event, so the
//   kernels queued next read the results. NCCL's own
//   Avg, Max, Min and Sum do the reductions, in every dtype weft reduces (float16 and bfloat16
//   included).
// - NCCL has no timeouts: Work::wait polls the completion event and ncclCommGetAsyncError until
//   the group's timeout, then aborts the communicator (ncclCommAbort) and fails with the
//   heartbeat diagnosis (Note [Collective failures] in process_group.h), as the Gloo backend does.
// - NCCL refuses two ranks on one GPU, so a single-GPU machine can run world size 1 only: the
//   collectives have run on one H100 at one rank (tests/distributed/test_nccl.cpp), never across
//   ranks. Max and min with a NaN on some ranks therefore follow NCCL's own reduction, unchecked,
//   where the Gloo backend's keep the NaN and give every rank the same bits.
#pragma once

#include <memory>
#include <string>

#include "distributed/process_group.h"

namespace weft::distributed {

class NcclProcessGroup final : public ProcessGroup {
 public:
  // `device`: the GPU of this rank (LOCAL_RANK under a launcher).
  NcclProcessGroup(std::shared_ptr<Store> store, std::shared_ptr<Store> job_store, int rank, int size,
                   Milliseconds timeout, int device);
  ~NcclProcessGroup() override;

  std::string backend_name() const override { return "nccl"; }
  Device device() const override;

  struct State;  // the implementation's

 protected:
  std::shared_ptr<Work> launch(Collective collective) override;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace weft::distributed
