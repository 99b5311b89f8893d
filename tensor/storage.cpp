// CPU allocator and Storage lifetime. Device allocators other than the CPU's register themselves
// here from their backend (tensor/cuda/) when weft is built with CUDA.
#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace weft {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    WEFT_CHECK(p != nullptr, "[allocator] out of memory allocating ", nbytes, " bytes on cpu");
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
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

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, nbytes_);
  if (release_) release_();
}

}  // namespace weft
