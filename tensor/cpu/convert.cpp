// The runtime-dtype chunk converters of tensor/cpu/convert.h: float32 and the narrow floats,
// widened to float32 and rounded back exactly as load_chunk / store_chunk do for a known type.
#include "tensor/cpu/convert.h"

namespace weft::detail {
namespace {

// Calls fn(S{}) with S the storage type of d, which must be computed in float32.
template <class Fn>
void visit_float_computed(DType d, Fn&& fn) {
  WEFT_CHECK(d == kFloat32 || is_narrow_float(d), "[cpu] internal: expected float32 or a narrow float, got ", d);
  visit_dtype(d, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_same_v<Compute<S>, float>) fn(tag);
  });
}

}  // namespace

FloatChunkLoad float_chunk_load(DType d) {
  FloatChunkLoad load = nullptr;
  visit_float_computed(d, [&](auto tag) { load = &load_chunk<decltype(tag)>; });
  return load;
}

FloatChunkStore float_chunk_store(DType d) {
  FloatChunkStore store = nullptr;
  visit_float_computed(d, [&](auto tag) { store = &store_chunk<decltype(tag)>; });
  return store;
}

}  // namespace weft::detail
