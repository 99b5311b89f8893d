// Storage: one refcounted block of device memory that any number of tensor views share.
//
// The version counter lives here, not on a tensor, because every view of the same memory must
// see an in-place write: autograd compares it with the version a saved tensor had when it was
// saved (Note [Saved tensor versions] in tensor/autograd.h).
//
// Memory comes from the Allocator of the device's backend (tensor/backend.h); the CPU's caches
// large blocks for reuse (tensor/cpu/caching_allocator.h) and aligns every block to at least 64
// bytes so that vector kernels and Eigen never meet a split cache line. A storage can also wrap
// memory the caller owns (Storage::borrow), in which case it never frees it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace weft {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

// The allocator that new storages on `device` get: its backend's, unless replaced for the device
// type (e.g. a counting allocator in tests); pass nullptr to restore the backend's.
Allocator& allocator_for(Device device);
void set_allocator(Device device, Allocator* allocator);

class Storage {
 public:
  // Allocates nbytes on device.
  Storage(size_t nbytes, Device device);
  // Wraps memory the caller keeps alive; `release` (if given) runs when the last view goes away.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device,
                                         std::function<void()> release = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Gives the storage `nbytes` of fresh, uninitialized memory in place of what it had (0 frees
  // it); every tensor viewing it sees the new memory. Sharded data parallel frees a unit's
  // unsharded parameters this way while the views autograd saved keep the Storage object
  // (Note [FSDP unit lifecycle] in distributed/fsdp.h). Not for borrowed memory.
  void resize_(size_t nbytes);

  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null for borrowed memory
  std::function<void()> release_;
  uint64_t version_ = 0;
};

}  // namespace weft
