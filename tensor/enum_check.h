// Checking an enum value that came through a public entry point.
//
// A C++ enum parameter can hold any value of its underlying type (static_cast<CpuIsa>(42)); used
// as a table index or a switch without a case, it crashes or computes garbage. Every public
// function that takes one of weft's enums checks it on entry with check_enum, which names the op,
// the enum and the value it got. Valid values are 0 .. count-1 (weft's enums number their
// enumerators from 0 without gaps).
#pragma once

#include <type_traits>

#include "tensor/error.h"

namespace weft::detail {

template <class E>
void check_enum(E value, int count, const char* op, const char* enum_name) {
  static_assert(std::is_enum_v<E>);
  const auto raw = static_cast<long long>(static_cast<std::underlying_type_t<E>>(value));
  WEFT_CHECK(raw >= 0 && raw < count, "[", op, "] expected a valid ", enum_name, " (0 to ", count - 1,
             "), got the value ", raw);
}

}  // namespace weft::detail
