// The process-wide thread pool behind parallel_for, and its size.
#include "tensor/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "tensor/cpu/thread_pool.h"
#include "tensor/error.h"

namespace weft {
namespace {

int threads_from_environment() {
  for (const char* name : {"WEFT_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    WEFT_CHECK(*end == '\0' && n >= 1 && n <= 4096, "[num_threads] expected ", name,
               " to be a positive thread count, got '", value, "'");
    return static_cast<int>(n);
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex pool_mutex;
std::shared_ptr<detail::ThreadPool> pool;  // created on first use

std::shared_ptr<detail::ThreadPool> current_pool() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (!pool) pool = std::make_shared<detail::ThreadPool>(threads_from_environment());
  return pool;
}

}  // namespace

int num_threads() { return current_pool()->threads(); }

void set_num_threads(int n) {
  WEFT_CHECK(n >= 1, "[set_num_threads] expected a positive thread count, got ", n);
  WEFT_CHECK(!detail::ThreadPool::inside_job(), "[set_num_threads] cannot resize the thread pool from inside a parallel_for");
  std::shared_ptr<detail::ThreadPool> old;
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (pool && pool->threads() == n) return;
    old = std::move(pool);
    pool = std::make_shared<detail::ThreadPool>(n);
  }
  // `old` joins its workers here, once no running parallel_for holds it any more.
}

namespace detail {

void parallel_for_impl(int64_t n, RangeFn fn, void* ctx) {
  if (ThreadPool::inside_job()) {
    fn(ctx, 0, n);
    return;
  }
  current_pool()->run(n, fn, ctx);
}

void name_this_thread(const char* name) {
#if defined(__linux__)
  char truncated[16] = {};  // pthread_setname_np refuses longer names
  std::snprintf(truncated, sizeof(truncated), "%s", name);
  pthread_setname_np(pthread_self(), truncated);
#else
  (void)name;
#endif
}

}  // namespace detail
}  // namespace weft
