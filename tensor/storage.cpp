// Storage lifetime and the allocator registry. The CPU's default is the caching allocator
// (tensor/cpu/caching_allocator.h); device allocators other than the CPU's register themselves
// here from their backend (tensor/cuda/) when weft is built with CUDA.
#include "tensor/storage.h"

#include "tensor/cpu/caching_allocator.h"
#include "tensor/error.h"

namespace weft {
namespace {

Allocator* cpu_override = nullptr;
Allocator* cuda_allocator = nullptr;

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_override ? *cpu_override : detail::default_cpu_allocator();
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
