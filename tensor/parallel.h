// CPU threading: how many threads kernels may use, and the one parallel loop they use.
//
// The loop runs on weft's own pool (tensor/cpu/thread_pool.h, Note [A pool that survives a busy
// machine]): the calling thread plus num_threads() − 1 workers that yield, then sleep, when idle,
// so a machine shared with other work slows weft down by about its fair share and no more.
// parallel_for(n, fn) runs fn(i) for every i in [0, n): each thread takes a contiguous range of
// indices, and threads that finish early take over what others have not started. The first
// exception thrown inside is carried out to the caller (indices not started by then are skipped).
// A call made inside another parallel_for runs serially on its thread.
//
// The thread count starts at WEFT_NUM_THREADS, else OMP_NUM_THREADS (as OpenMP programs read
// it), else the number of CPUs this process may run on; set_num_threads() changes it.
// weft itself uses no OpenMP: a library linked beside it that does (OpenBLAS's OpenMP build) is
// only ever called on one thread at a time from this pool (tensor/cpu/matmul.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

namespace weft {

int num_threads();
void set_num_threads(int n);

namespace detail {
using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
void parallel_for_impl(int64_t n, RangeFn fn, void* ctx);

// Names the calling thread as top, perf, gdb and /proc/<pid>/task/<tid>/comm show it; Linux keeps
// the first 15 bytes. Every thread weft starts is named "weft-…" (pool workers weft-pool-N,
// a process group's weft-comm and weft-health, the TCP store's weft-store).
void name_this_thread(const char* name);
}  // namespace detail

template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
  if (n <= 1) {
    if (n == 1) fn(int64_t{0});
    return;
  }
  using F = std::remove_reference_t<Fn>;
  detail::parallel_for_impl(
      n,
      [](void* ctx, int64_t begin, int64_t end) {
        F& f = *static_cast<F*>(ctx);
        for (int64_t i = begin; i < end; ++i) f(i);
      },
      const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
}

// parallel_for(n, fn) where `worth_threads`, else the same loop on the calling thread: for work
// that is sometimes too small to be worth waking the pool (the caller judges, in its own units).
template <class Fn>
void parallel_for_if(bool worth_threads, int64_t n, Fn&& fn) {
  if (worth_threads) return parallel_for(n, fn);
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace weft
