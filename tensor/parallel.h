// CPU threading: how many threads kernels may use, and the one parallel loop they use.
//
// weft uses OpenMP (the same pool Eigen's matrix products use), so set_num_threads() governs
// both. parallel_for(n, fn) runs fn(i) for i in [0, n) and spreads the calls over the threads
// when n > 1; exceptions thrown inside are carried out to the caller.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>

namespace weft {

int num_threads();
void set_num_threads(int n);

namespace detail {
void parallel_for_impl(int64_t n, const std::function<void(int64_t)>& fn);
}

template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
  if (n <= 1) {
    if (n == 1) fn(int64_t{0});
    return;
  }
  detail::parallel_for_impl(n, std::function<void(int64_t)>(std::forward<Fn>(fn)));
}

}  // namespace weft
