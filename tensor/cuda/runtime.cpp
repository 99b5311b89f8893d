// Devices, streams, events and errors of the CUDA build (tensor/cuda.h, tensor/cuda/runtime.h).
//
// Availability is asked once: without a driver cudaGetDeviceCount fails with
// cudaErrorInsufficientDriver (35) and leaves the count untouched, without a GPU it fails with
// cudaErrorNoDevice (100); both mean "no CUDA here", not an error.
#include "tensor/cuda/runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "tensor/cuda.h"
#include "tensor/cuda/capture.h"

namespace weft::cuda {
namespace detail {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceState {
  std::once_flag once;
  cudaStream_t default_stream = nullptr;
  DeviceError* error = nullptr;
};
std::array<DeviceState, kMaxDevices> devices;
std::atomic<bool> device_dead[kMaxDevices] = {};

thread_local int current = 0;
thread_local std::array<cudaStream_t, kMaxDevices> current_streams = {};

bool is_sticky(cudaError_t rc) {
  return rc == cudaErrorIllegalAddress || rc == cudaErrorMisalignedAddress || rc == cudaErrorAssert ||
         rc == cudaErrorLaunchFailure || rc == cudaErrorHardwareStackError || rc == cudaErrorIllegalInstruction;
}

DeviceState& state_of(int device) {
  DeviceState& s = devices[static_cast<size_t>(device)];
  std::call_once(s.once, [&] {
    DeviceGuard guard(device);
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s.default_stream, cudaStreamNonBlocking));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.error), sizeof(DeviceError)));
    WEFT_CUDA_CHECK(cudaMemsetAsync(s.error, 0, sizeof(DeviceError), s.default_stream));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(s.default_stream));
  });
  return s;
}

const char* op_of(DeviceErrorCode code) {
  switch (code) {
    case DeviceErrorCode::IndexSelect: return "index_select";
    case DeviceErrorCode::IndexAdd: return "index_add";
    case DeviceErrorCode::Gather: return "gather";
    case DeviceErrorCode::ScatterAdd: return "scatter_add";
    case DeviceErrorCode::CrossEntropyTarget: return "cross_entropy";
    case DeviceErrorCode::None: break;
  }
  return "kernel";
}

}  // namespace

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();  // a failed call leaves its error behind; the next check must not see it
  if (is_sticky(rc)) {
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess && device < kMaxDevices) device_dead[device] = true;
  }
  WEFT_FAIL("[cuda] ", what, ": ", cudaGetErrorName(rc), " (", static_cast<int>(rc), "): ", cudaGetErrorString(rc),
            is_sticky(rc) ? "; the device cannot be used again by this process (rerun with CUDA_LAUNCH_BLOCKING=1 "
                            "to find the kernel)"
                          : "");
}

void check_launch(const char* op) { check(cudaGetLastError(), op); }

int resolve_device(int device) {
  const int d = device < 0 ? current : device;
  WEFT_CHECK(d < cuda::device_count(), "[cuda] device ", d, " requested but ", cuda::device_count(),
             " CUDA device(s) are visible");
  WEFT_CHECK(!device_dead[d], "[cuda] device ", d, " had a fault earlier in this process and cannot be used");
  return d;
}

cudaStream_t stream_of(int device) {
  const int d = resolve_device(device);
  cudaStream_t s = current_streams[static_cast<size_t>(d)];
  return s != nullptr ? s : state_of(d).default_stream;
}

DeviceGuard::DeviceGuard(int device) {
  WEFT_CUDA_CHECK(cudaGetDevice(&previous_));
  if (device != previous_) WEFT_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() { cudaSetDevice(previous_); }

DeviceError* device_error(int device) { return state_of(resolve_device(device)).error; }

void raise_deferred_errors(int device, cudaStream_t stream) {
  DeviceError* slot = device_error(device);
  DeviceError found{};
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&found, slot, sizeof found, cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (found.code == 0) return;
  WEFT_CUDA_CHECK(cudaMemsetAsync(slot, 0, sizeof found, stream));
  WEFT_FAIL("[", op_of(static_cast<DeviceErrorCode>(found.code)), "] index ", found.value,
            " is out of bounds for size ", found.bound, " (found on cuda:", device, ")");
}

}  // namespace detail

namespace {
constexpr const char* kHostWaits = "the host would wait for work that is only being recorded; wait after replay()";
constexpr const char* kRecordedNotRun = "the captured work is recorded, not run, so it has no progress to ask about";
}  // namespace

bool is_built() { return true; }
bool is_available() { return device_count() > 0; }

int device_count() {
  static const int count = [] {
    int n = 0;
    const cudaError_t rc = cudaGetDeviceCount(&n);
    cudaGetLastError();
    return rc == cudaSuccess ? std::min(n, detail::kMaxDevices) : 0;
  }();
  return count;
}

int current_device() { return detail::current; }

void set_device(int device) {
  detail::current = detail::resolve_device(device);
  WEFT_CUDA_CHECK(cudaSetDevice(detail::current));
}

void synchronize(int device) {
  detail::refuse_during_capture("synchronize()", kHostWaits);
  const int d = detail::resolve_device(device);
  detail::DeviceGuard guard(d);
  WEFT_CUDA_CHECK(cudaDeviceSynchronize());
  detail::raise_deferred_errors(d, detail::stream_of(d));
}

DeviceProperties get_device_properties(int device) {
  const int d = detail::resolve_device(device);
  cudaDeviceProp p{};
  WEFT_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
  return {p.name, p.major, p.minor, p.multiProcessorCount, static_cast<int64_t>(p.totalGlobalMem)};
}

void Stream::synchronize() const {
  detail::refuse_during_capture("Stream::synchronize()", kHostWaits);
  detail::DeviceGuard guard(device_);
  WEFT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(native_)));
  detail::raise_deferred_errors(device_, static_cast<cudaStream_t>(native_));
}

bool Stream::query() const {
  detail::refuse_during_capture("Stream::query()", kRecordedNotRun);
  const cudaError_t rc = cudaStreamQuery(static_cast<cudaStream_t>(native_));
  if (rc == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  detail::check(rc, "cudaStreamQuery");
  return true;
}

Stream current_stream(int device) {
  const int d = detail::resolve_device(device);
  return Stream(detail::stream_of(d), d);
}

Stream default_stream(int device) {
  const int d = detail::resolve_device(device);
  return Stream(detail::state_of(d).default_stream, d);
}

Stream new_stream(int device) {
  const int d = detail::resolve_device(device);
  detail::DeviceGuard guard(d);
  cudaStream_t s = nullptr;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s, d);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  detail::current_streams[static_cast<size_t>(stream.device())] = static_cast<cudaStream_t>(stream.native());
}

StreamGuard::~StreamGuard() {
  detail::current_streams[static_cast<size_t>(previous_.device())] = static_cast<cudaStream_t>(previous_.native());
}

Event::Event(bool timing) : device_(current_device()), timing_(timing) {
  detail::DeviceGuard guard(detail::resolve_device(device_));
  cudaEvent_t e = nullptr;
  WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  native_ = e;
}

Event::~Event() {
  if (native_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(native_));
}

Event::Event(Event&& other) noexcept : native_(other.native_), device_(other.device_), timing_(other.timing_) {
  other.native_ = nullptr;
}

Event& Event::operator=(Event&& other) noexcept {
  std::swap(native_, other.native_);
  std::swap(device_, other.device_);
  std::swap(timing_, other.timing_);
  return *this;
}

void Event::record(const Stream& stream) {
  WEFT_CHECK(stream.device() == device_, "[cuda] an event of cuda:", device_, " recorded on a stream of cuda:",
             stream.device());
  WEFT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(native_), static_cast<cudaStream_t>(stream.native())));
}

void Event::record() { record(current_stream(device_)); }

void Event::wait(const Stream& stream) const {
  WEFT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.native()), static_cast<cudaEvent_t>(native_), 0));
}

void Event::synchronize() const {
  detail::refuse_during_capture("Event::synchronize()", kHostWaits);
  WEFT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(native_)));
}

bool Event::query() const {
  detail::refuse_during_capture("Event::query()", kRecordedNotRun);
  const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(native_));
  if (rc == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  detail::check(rc, "cudaEventQuery");
  return true;
}

float Event::elapsed_ms(const Event& later) const {
  WEFT_CHECK(timing_ && later.timing_, "[cuda] elapsed_ms needs two events created with timing");
  float ms = 0;
  WEFT_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(native_), static_cast<cudaEvent_t>(later.native_)));
  return ms;
}

namespace {
std::atomic<bool> tf32_allowed{false};
}

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

}  // namespace weft::cuda
