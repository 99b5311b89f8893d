// Storage lifetime, and the allocator each storage gets: its device's backend's
// (Backend::allocator; the CPU's is the caching allocator of tensor/cpu/caching_allocator.h),
// unless a test has replaced it for the device type (set_allocator).
#include "tensor/storage.h"

#include "tensor/backend.h"

namespace weft {
namespace {

Allocator* overrides[kNumDeviceTypes] = {};

}  // namespace

Allocator& allocator_for(Device device) {
  if (Allocator* a = overrides[static_cast<int>(device.type)]) return *a;
  return detail::backend(device).allocator(device.index);
}

void set_allocator(Device device, Allocator* allocator) { overrides[static_cast<int>(device.type)] = allocator; }

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
