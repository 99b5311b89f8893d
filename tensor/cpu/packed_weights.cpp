// The packed-weight cache (tensor/packed_weights.h, tensor/cpu/packed_weights.h).
//
// Entries are keyed by the weight's data pointer and checked, on every use, against the weight:
// the same storage (held weakly, so a freed weight's entry is never matched by a new tensor at the
// same address), shape, strides, storage version and instruction-set level. A stale entry is
// replaced; expired ones (their storage freed) are dropped whenever a copy is made. The products
// hold their entry's packed copy by shared_ptr, so another thread may replace it meanwhile.
#include "tensor/cpu/packed_weights.h"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/cpu/gemm_library.h"
#include "tensor/packed_weights.h"

namespace weft {
namespace detail {
namespace {

struct Entry {
  std::weak_ptr<Storage> storage;
  Shape shape, strides;
  uint64_t version = 0;
  CpuIsa isa = CpuIsa::Scalar;
  std::shared_ptr<const GemmPackedB> packed;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<const void*, Entry> entries;
  int64_t limit = 0, bytes = 0;

  void erase(std::unordered_map<const void*, Entry>::iterator it) {
    bytes -= static_cast<int64_t>(it->second.packed->bytes());
    entries.erase(it);
  }
  void drop_expired() {
    for (auto it = entries.begin(); it != entries.end();) {
      auto next = std::next(it);
      if (it->second.storage.expired()) erase(it);
      it = next;
    }
  }
  void clear() {
    entries.clear();
    bytes = 0;
  }
};

Cache& cache() {
  static Cache instance;
  return instance;
}

bool matches(const Entry& e, const Tensor& weight, CpuIsa isa) {
  return e.storage.lock() == weight.storage() && e.shape == weight.shape() && e.strides == weight.strides() &&
         e.version == weight.version() && e.isa == isa;
}

// weight's packed copy (B = weightᵀ: in × out), made now if it has none; null when it does not fit.
std::shared_ptr<const GemmPackedB> packed_for(const Tensor& weight, const GemmMatrix& b, int64_t k, int64_t n) {
  Cache& c = cache();
  const CpuIsa isa = cpu_isa();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.limit <= 0) return nullptr;
  const auto it = c.entries.find(weight.data_ptr());
  if (it != c.entries.end()) {
    if (matches(it->second, weight, isa)) return it->second.packed;
    c.erase(it);
  }
  c.drop_expired();
  const int64_t elements = static_cast<int64_t>(weight.numel());
  if (c.bytes + elements * 2 > c.limit) return nullptr;  // at least the weight's size, before padding
  auto packed = std::make_shared<const GemmPackedB>(gemm_pack_b(k, n, b));
  if (c.bytes + static_cast<int64_t>(packed->bytes()) > c.limit) return nullptr;
  c.bytes += static_cast<int64_t>(packed->bytes());
  c.entries[weight.data_ptr()] = Entry{weight.storage(), weight.shape(), weight.strides(), weight.version(), isa,
                                       packed};
  return packed;
}

}  // namespace

bool linear_with_packed_weight(const Tensor& x, const Tensor& weight, const Tensor& out, bool accumulate) {
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  if (m < 2 || x.dtype() != kBFloat16 || weight.dtype() != kBFloat16 || out.dtype() != kBFloat16 ||
      !out.is_contiguous() || cpu_gemm_library() != GemmLibrary::Weft || !gemm_packs_b_ahead(k, n))
    return false;
  const GemmMatrix a{x.data_ptr(), x.stride(0), x.stride(1), true};
  const GemmMatrix b{weight.data_ptr(), weight.stride(1), weight.stride(0), true};  // B(p, j) = W(j, p)
  const std::shared_ptr<const GemmPackedB> packed = packed_for(weight, b, k, n);
  if (!packed) return false;
  if (gemm_stores_bf16(m, n, k)) {
    gemm_packed(m, n, k, a, *packed, nullptr, n, accumulate, static_cast<uint16_t*>(out.data_ptr()));
    return true;
  }
  // The product in float32, rounded once into out (the bias, when accumulating, widened first).
  const Tensor sums = make_tensor({m, n}, kFloat32, kCPU);
  if (accumulate) cpu_backend().copy(out, sums);
  gemm_packed(m, n, k, a, *packed, sums.data<float>(), n, accumulate);
  cpu_backend().copy(sums, out);
  return true;
}

}  // namespace detail

void set_packed_weight_limit(int64_t bytes) {
  detail::Cache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.limit = bytes > 0 ? bytes : 0;
  if (c.bytes > c.limit) c.clear();
}

int64_t packed_weight_limit() {
  detail::Cache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.limit;
}

int64_t packed_weight_bytes() {
  detail::Cache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void clear_packed_weights() {
  detail::Cache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.clear();
}

}  // namespace weft
