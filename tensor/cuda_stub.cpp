// The CUDA entry points of a build without CUDA (compiled only when WEFT_CUDA is OFF; a CUDA build
// compiles tensor/cuda/ instead). is_available() is false and device_count() 0; everything else
// fails with the way out. The tensor floor's CUDA kernel pointers are null here (Note [Linking
// kernels by reference] in tensor/kernel_registry.h).
#include "tensor/attention_kernels.h"
#include "tensor/backend.h"
#include "tensor/cuda.h"
#include "tensor/fused_kernels.h"

namespace weft {
namespace {

[[noreturn]] void no_cuda() { WEFT_FAIL("[cuda] weft was built without CUDA (configure with -DWEFT_CUDA=ON)"); }

}  // namespace

namespace detail {
Backend& cuda_backend() { no_cuda(); }

CrossEntropyForwardKernel* const cuda_cross_entropy_forward = nullptr;
CrossEntropyBackwardKernel* const cuda_cross_entropy_backward = nullptr;
LayerNormForwardKernel* const cuda_layer_norm_forward = nullptr;
LayerNormBackwardKernel* const cuda_layer_norm_backward = nullptr;
DropoutKernel* const cuda_dropout = nullptr;
LinearKernel* const cuda_linear = nullptr;
AttentionForwardKernel* const cuda_attention_forward = nullptr;
AttentionBackwardKernel* const cuda_attention_backward = nullptr;
}  // namespace detail

namespace cuda {

bool is_built() { return false; }
bool is_available() { return false; }
int device_count() { return 0; }
int current_device() { no_cuda(); }
void set_device(int) { no_cuda(); }
void synchronize(int) { no_cuda(); }
DeviceProperties get_device_properties(int) { no_cuda(); }

void Stream::synchronize() const { no_cuda(); }
bool Stream::query() const { no_cuda(); }
Stream current_stream(int) { no_cuda(); }
Stream default_stream(int) { no_cuda(); }
Stream new_stream(int) { no_cuda(); }
StreamGuard::StreamGuard(const Stream&) { no_cuda(); }
StreamGuard::~StreamGuard() = default;

Event::Event(bool) { no_cuda(); }
Event::~Event() = default;
Event::Event(Event&&) noexcept = default;
Event& Event::operator=(Event&&) noexcept = default;
void Event::record(const Stream&) { no_cuda(); }
void Event::record() { no_cuda(); }
void Event::wait(const Stream&) const { no_cuda(); }
void Event::synchronize() const { no_cuda(); }
bool Event::query() const { no_cuda(); }
float Event::elapsed_ms(const Event&) const { no_cuda(); }

void record_stream(const Tensor&, const Stream&) { no_cuda(); }
MemoryStats memory_stats(int) { no_cuda(); }
void reset_peak_memory_stats(int) { no_cuda(); }
void empty_cache() { no_cuda(); }
Tensor pin_memory(const Tensor&) { no_cuda(); }
bool is_pinned(const Tensor&) { return false; }
void set_allow_tf32(bool) { no_cuda(); }
bool allow_tf32() { no_cuda(); }

struct Graph::Impl {};
Graph::Graph(int) { no_cuda(); }
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
void Graph::warm_up(const std::function<void()>&) { no_cuda(); }
void Graph::capture(const std::function<void()>&) { no_cuda(); }
void Graph::replay() { no_cuda(); }
bool Graph::is_captured() const { return false; }
Stream Graph::stream() const { no_cuda(); }
bool is_current_stream_capturing() { return false; }

}  // namespace cuda
}  // namespace weft
