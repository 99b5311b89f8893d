// FlatParam: one FSDP unit's parameters as a single padded flat buffer, its shard, and the
// collectives that move between the two (Note [FSDP unit lifecycle] in fsdp.h).
//
// Layout: the unit's parameters, flattened in registration order, then zero padding up to
//   padded = W·ceil(numel / W)        (W = world size; 1 under NO_SHARD)
// Rank r owns elements [r·s, (r+1)·s), s = padded / W: its shard, a leaf tensor in the
// parameters' own dtype (the master copy under mixed precision) that the optimizer updates. The
// padding of the shard, of its gradient and of the optimizer's state stays exactly zero: padded
// gradients are zero and every update of a zero parameter with a zero gradient is zero.
//
// The shard's gradient is in grad_dtype: the master dtype, or reduce_dtype under
// keep_low_precision_grads (precision/fsdp_precision.h). Note [Low-precision gradient shards]:
// a reduced shard accumulates into an existing gradient (several synchronised backward passes
// without zero_grad) in that dtype: each element is widened, the two are summed in float32 and the
// sum is rounded once. PyTorch widens the kept gradient into an fp32 _saved_grad_shard at the start
// of a backward pass, adds the reduced shard there and casts back at the end; with one reduction
// per unit and pass that is the same single rounding of the same float32 sum, so the bits agree,
// without holding an fp32 shard. Each accumulated pass still rounds, so M passes drift from the
// fp32-accumulating default by up to M/2 units in the last place of reduce_dtype.
// (no_sync accumulates in the unsharded compute-dtype gradients, before any reduction, as by default.)
//
// The unsharded parameters live in `full`, a (padded) tensor in the compute dtype whose storage
// is resized to zero bytes when the unit is resharded (the original parameters then become empty
// tensors) and back when it is gathered. Under NO_SHARD without a dtype change, `full` is the
// shard itself and is never freed.
//
// Note [Frozen byte storage]: a unit's 4-bit weights (QLoRA's frozen base: Linear4bit's packed
// uint8 codes and its block statistics, float32 or uint8) are one FlatParam of raw bytes, as
// PyTorch's FSDP keeps bitsandbytes' weights when bnb_4bit_quant_storage is uint8. Each entry is
// the bytes of one tensor, at an offset aligned to kByteStorageAlign so that its view in its own
// dtype is aligned; the gaps and the tail padding are zero. The buffer is sharded and gathered like
// any other, never cast (the compute dtype is uint8 under every mixed precision), never reduced
// and never given a gradient: it has no optimizer state.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"

namespace weft::distributed::detail {

struct FlatParamEntry {
  std::string fqn;  // dotted name in the wrapped module's state_dict
  Tensor param;     // the original parameter (its handle, shared with the layer)
  Shape shape;
  int64_t numel = 0;   // in the flat buffer's elements (bytes in a byte-storage unit)
  int64_t offset = 0;  // in the flat buffer
  DType dtype = kFloat32;  // of the original tensor (a byte-storage unit views its bytes as it)
};

// Bytes between the starts of two entries of a byte-storage unit (a cache line).
inline constexpr int64_t kByteStorageAlign = 64;

class FlatParam {
 public:
  // Flattens `entries` (their current values, which must be rank 0's: the caller broadcast them).
  FlatParam(std::string name, std::vector<FlatParamEntry> entries, int rank, int world, bool sharded,
            DType compute_dtype, DType reduce_dtype, DType grad_dtype);
  // A frozen byte-storage unit (Note [Frozen byte storage]) over `entries` of any dtypes.
  static std::unique_ptr<FlatParam> byte_storage(std::string name, std::vector<FlatParamEntry> entries, int rank,
                                                 int world, bool sharded);

  const std::string& name() const { return name_; }
  const std::vector<FlatParamEntry>& entries() const { return entries_; }
  int64_t numel() const { return numel_; }
  int64_t padded_numel() const { return padded_; }
  int64_t shard_numel() const { return shard_numel_; }
  int64_t shard_offset() const { return shard_offset_; }  // of this rank's shard in the flat buffer
  bool sharded() const { return sharded_; }
  bool byte_storage() const { return bytes_; }
  bool requires_grad() const { return requires_grad_; }
  const Tensor& shard() const { return shard_; }
  DType master_dtype() const { return shard_.dtype(); }
  DType compute_dtype() const { return compute_dtype_; }
  DType grad_dtype() const { return grad_dtype_; }

  // ---- unsharding ----
  bool unsharded() const { return unsharded_; }
  bool gathering() const { return gather_work_ != nullptr; }
  // Allocates the full storage and starts its all-gather (a local cast when not sharded).
  void start_gather(ProcessGroup& pg);
  // Waits for the gather (starting it first if needed) and points the parameters at it.
  void finish_gather(ProcessGroup& pg);
  // Frees the full storage and makes the parameters empty; never for an aliasing NO_SHARD unit.
  void reshard();
  bool can_free() const { return !full_aliases_shard_; }

  // ---- gradients ----
  // Counts a parameter's gradient in this backward; true when it was the last one the unit needs.
  bool grad_ready(size_t entry);
  bool all_grads_ready() const { return pending_grads_ == 0; }
  // Flattens the gradients (missing ones as zeros) into reduce_dtype, drops them from the
  // parameters, and starts the reduce-scatter (all-reduce when not sharded) with Avg.
  void start_reduce(ProcessGroup& pg);
  bool reducing() const { return reduce_work_ != nullptr; }
  // Waits and accumulates the reduced shard into shard().grad() in grad_dtype.
  void finish_reduce();
  // Forgets this backward's readiness (after the end-of-backward work).
  void reset_grads();

  // Copies `flat` (numel or padded elements, master dtype) into the shard, zero padding.
  void load_shard_from_full(const Tensor& flat);
  // `values` (one per entry, in entry order) as the unit's flat buffer in the master dtype: cast
  // and concatenated, or their bytes at the entries' offsets in a byte-storage unit.
  Tensor flatten(const std::vector<Tensor>& values) const;
  // Entry k's part of a flat buffer (a view), in the entry's shape and dtype.
  Tensor entry_view(const Tensor& flat, size_t k) const;

 private:
  struct ByteStorageTag {};
  FlatParam(ByteStorageTag, std::string name, std::vector<FlatParamEntry> entries, int rank, int world, bool sharded);
  // Lays out the entries, builds the shard from their values and frees them (both constructors).
  void init(int64_t align);
  void point_params_at_full();
  void empty_params();

  std::string name_;
  std::vector<FlatParamEntry> entries_;
  int rank_;
  int world_;
  bool sharded_;
  bool bytes_ = false;
  bool requires_grad_ = false;
  int64_t numel_ = 0;
  int64_t padded_ = 0;
  int64_t shard_numel_ = 0;
  int64_t shard_offset_ = 0;
  DType compute_dtype_;
  DType reduce_dtype_;
  DType grad_dtype_;
  Tensor shard_;
  Tensor full_;
  bool full_aliases_shard_ = false;
  bool unsharded_ = false;
  Tensor gather_input_;  // the shard cast to the compute dtype, kept alive while gathering
  std::shared_ptr<Work> gather_work_;
  std::vector<bool> grad_seen_;
  size_t pending_grads_ = 0;
  Tensor reduce_input_;
  Tensor reduce_output_;
  std::shared_ptr<Work> reduce_work_;
};

}  // namespace weft::distributed::detail
