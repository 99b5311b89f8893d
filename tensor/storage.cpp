// CPU allocator and Storage lifetime. Device allocators other than the CPU's register themselves
// here from their backend (tensor/cuda/) when weft is built with CUDA.
#include "tensor/storage.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace weft {
namespace {

// Aligns by hand rather than with aligned_alloc: glibc's memalign carves the block out of a
// larger chunk and frees the pieces around it, which costs several plain mallocs and fragments
// the heap (it was the largest single cost of an op on a tiny tensor). The pointer malloc gave
// is kept in the word just below the aligned block, for deallocate.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* raw = std::malloc(nbytes + kAlignment + sizeof(void*));
    WEFT_CHECK(raw != nullptr, "[allocator] out of memory allocating ", nbytes, " bytes on cpu");
    const auto first = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
    void* aligned = reinterpret_cast<void*>((first + kAlignment - 1) / kAlignment * kAlignment);
    static_cast<void**>(aligned)[-1] = raw;
    return aligned;
  }
  void deallocate(void* ptr, size_t) override {
    if (ptr != nullptr) std::free(static_cast<void**>(ptr)[-1]);
  }
};

CpuAllocator& default_cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator* cpu_override = nullptr;
Allocator* cuda_allocator = nullptr;

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_override ? *cpu_override : default_cpu_allocator();
  WEFT_CHECK(cuda_allocator != nullptr, "[allocator] no allocator for ", device,
             ": weft was built without CUDA (rebuild with -DWEFT_CUDA=ON)");
  return *cuda_allocator;
}

void set_allocator(Device device, Allocator* allocator) {
  (device.is_cpu() ? cpu_override : cuda_allocator) = allocator;
}

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(nbytes);
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device,
                                         std::function<void()> release) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->release_ = std::move(release);
  return s;
}

void Storage::resize_(size_t nbytes) {
  WEFT_CHECK(allocator_ != nullptr, "[Storage::resize_] cannot resize memory the storage borrowed");
  allocator_->deallocate(data_, nbytes_);
  data_ = nullptr;
  nbytes_ = 0;
  data_ = allocator_->allocate(nbytes);
  nbytes_ = nbytes;
}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, nbytes_);
  if (release_) release_();
}

}  // namespace weft
