// Casting what goes into and comes out of a model: floating tensors only, wherever they sit in
// nested standard containers. This is what every precision plugin's convert_input (cast to the
// plugin's dtype) and convert_output (cast back to the default dtype at call time) does, like
// Lightning's _convert_fp_tensor applied through apply_to_collection.
//
// apply_to_tensors walks Tensor, std::vector, std::array, std::pair, std::tuple, std::map and
// std::unordered_map (values), std::optional and nn::TensorDict, recursively, and returns a value
// of the same type; anything else (numbers, strings, user types) is returned unchanged.
// Integer and bool tensors (indices, masks, labels) are never cast.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/tensor_dict.h"
#include "tensor/tensor.h"

namespace weft::detail {
template <class T> struct IsStdVector : std::false_type {};
template <class T, class A> struct IsStdVector<std::vector<T, A>> : std::true_type {};
template <class T> struct IsStdArray : std::false_type {};
template <class T, size_t N> struct IsStdArray<std::array<T, N>> : std::true_type {};
template <class T> struct IsStdMap : std::false_type {};
template <class K, class V, class C, class A> struct IsStdMap<std::map<K, V, C, A>> : std::true_type {};
template <class K, class V, class H, class E, class A>
struct IsStdMap<std::unordered_map<K, V, H, E, A>> : std::true_type {};
template <class T> struct IsStdPair : std::false_type {};
template <class A, class B> struct IsStdPair<std::pair<A, B>> : std::true_type {};
template <class T> struct IsStdTuple : std::false_type {};
template <class... T> struct IsStdTuple<std::tuple<T...>> : std::true_type {};
template <class T> struct IsStdOptional : std::false_type {};
template <class T> struct IsStdOptional<std::optional<T>> : std::true_type {};
}  // namespace weft::detail

namespace weft::precision {

// `data` with every Tensor t inside replaced by fn(t).
template <class T, class Fn>
T apply_to_tensors(const T& data, const Fn& fn) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return fn(data);
  } else if constexpr (detail::IsStdVector<T>::value || detail::IsStdArray<T>::value) {
    T out = data;
    for (auto& item : out) item = apply_to_tensors(item, fn);
    return out;
  } else if constexpr (detail::IsStdMap<T>::value) {
    T out = data;
    for (auto& entry : out) entry.second = apply_to_tensors(entry.second, fn);
    return out;
  } else if constexpr (detail::IsStdPair<T>::value) {
    return T(apply_to_tensors(data.first, fn), apply_to_tensors(data.second, fn));
  } else if constexpr (detail::IsStdTuple<T>::value) {
    return std::apply([&fn](const auto&... items) { return T(apply_to_tensors(items, fn)...); }, data);
  } else if constexpr (detail::IsStdOptional<T>::value) {
    if (!data) return data;
    return T(apply_to_tensors(*data, fn));
  } else if constexpr (std::is_same_v<T, nn::TensorDict>) {
    nn::TensorDict out;
    for (const auto& [name, tensor] : data) out.insert(name, fn(tensor));
    return out;
  } else {
    return data;
  }
}

// t cast to `dtype` when it is floating; other tensors (and undefined ones) unchanged.
inline Tensor convert_fp_tensor(const Tensor& t, DType dtype) {
  return t.defined() && t.is_floating_point() ? t.to(dtype) : t;
}

// Every floating tensor inside `data` cast to `dtype`.
template <class T>
T convert_fp_tensors(const T& data, DType dtype) {
  return apply_to_tensors(data, [dtype](const Tensor& t) { return convert_fp_tensor(t, dtype); });
}

}  // namespace weft::precision
