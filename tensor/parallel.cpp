// OpenMP behind parallel_for; Eigen is told the same thread count.
#include "tensor/parallel.h"

#include <omp.h>

#include <Eigen/Core>
#include <mutex>

#include "tensor/error.h"

namespace weft {

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int n) {
  WEFT_CHECK(n >= 1, "[set_num_threads] expected a positive thread count, got ", n);
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

namespace detail {

void parallel_for_impl(int64_t n, const std::function<void(int64_t)>& fn) {
  // Nested calls (a kernel inside a parallel region) run serially rather than oversubscribe.
  if (omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace detail
}  // namespace weft
