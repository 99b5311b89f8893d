// SharedMemoryGroup: the all-reduce of ranks that share one host, through a POSIX shared-memory
// segment instead of loopback TCP.
//
// Note [Shared-memory all-reduce]: on loopback the kernel copies every byte twice through socket
// buffers, on the same cores the ranks compute on (for the example MLP's 2.68 MB of gradients,
// ~2 core-ms per rank per step on a 2-core EPYC). Ranks of one host instead map one segment with
// a slot per rank. A round: each rank waits until every peer has finished reading the previous
// round, copies its part of the buffer into its slot and publishes the round number; once every
// rank has published, each reduces all slots in rank order into its own buffer (so every rank
// gets the same bits, with one rounding for narrow floats) and publishes that it is done reading.
// Buffers larger than a slot take several rounds. Waiting spins briefly, then sleeps on a futex
// of the peer's counter, so a rank pinned to one core does not starve its own compute thread; it
// gives up at the group's deadline, or at once when the awaited rank's process is gone.
//
// "One host" means the same hostname, boot and network, mount and PID namespaces: ranks in
// different network namespaces (the multi-host tests) still talk over TCP. The segment is
// unlinked as soon as every rank has mapped it, so nothing is left in /dev/shm if a rank dies.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "distributed/store.h"

namespace weft::distributed::detail {

// What makes two processes "one host" for shared memory (hostname, boot id, namespaces).
std::string host_identity();

class SharedMemoryGroup {
 public:
  // The bytes of each rank's slot: large enough that the MLP's gradients take one round.
  static constexpr size_t kSlotBytes = size_t{4} << 20;

  // Collective over `store` (every rank calls it): null on every rank unless all ranks are on one
  // host and every one mapped the segment (a full or missing /dev/shm falls back to TCP).
  // `enabled` false on any rank (GlooOptions::shared_memory, WEFT_SHARED_MEMORY=0) makes it null on all.
  static std::unique_ptr<SharedMemoryGroup> connect(Store& store, int rank, int size, Milliseconds timeout,
                                                    bool enabled);
  ~SharedMemoryGroup();
  SharedMemoryGroup(const SharedMemoryGroup&) = delete;
  SharedMemoryGroup& operator=(const SharedMemoryGroup&) = delete;

  // data (count elements of dtype) ← the reduction of every rank's data. Throws naming the rank
  // that did not arrive (or whose process is gone) when `timeout` passes.
  void all_reduce(DType dtype, ReduceOp op, void* data, size_t count, Milliseconds timeout);

 private:
  SharedMemoryGroup(void* base, size_t bytes, int rank, int size) : base_(base), bytes_(bytes), rank_(rank), size_(size) {}
  // Where rank r's counters and pid live in the segment, and where the slots begin.
  uint32_t* ready(int r) const;
  uint32_t* done(int r) const;
  int32_t* pid(int r) const;
  uint8_t* slots() const;
  // Waits until every other rank's counter (ready or done) has reached `round`.
  void wait_for_all(uint32_t* (SharedMemoryGroup::*counter)(int) const, uint32_t round,
                    std::chrono::steady_clock::time_point deadline, Milliseconds timeout) const;

  void* base_;
  size_t bytes_;
  int rank_;
  int size_;
  uint32_t round_ = 0;  // rounds this rank has completed; the same on every rank
};

}  // namespace weft::distributed::detail
