// exact_empty, exact_clone and zero_pages (tensor/cpu/exact_memory.h): shapes, values, alignment,
// the memory outside the caching allocator, and zero pages that are not resident until written.
#include <doctest/doctest.h>

#include <vector>

#include "resident_pages.h"
#include "tensor/cpu/caching_allocator.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/ops.h"

using namespace weft;

TEST_CASE("exact_empty and exact_clone: contiguous CPU tensors outside the caching allocator's size classes") {
  const CpuAllocatorStats before = cpu_allocator::stats();
  Tensor t = exact_empty({3, 1000, 1000}, kInt8);  // 2.9 MB: a size class would take 4 MiB
  CHECK(t.shape() == Shape({3, 1000, 1000}));
  CHECK(t.dtype() == kInt8);
  CHECK(t.is_contiguous());
  CHECK(t.nbytes() == 3000000);
  CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
  CHECK(cpu_allocator::stats().in_use_bytes == before.in_use_bytes);
  t.fill_(5);
  CHECK(t.data<int8_t>()[2999999] == 5);

  const Tensor source = arange(12.0, TensorOptions(kFloat32)).reshape({3, 4}).t();  // a transposed view
  const Tensor copy = exact_clone(source);
  CHECK(copy.is_contiguous());
  CHECK(equal(copy, source));
  CHECK(copy.data_ptr() != source.data_ptr());
  CHECK(exact_empty({0, 4}, kFloat32).numel() == 0);
  CHECK_THROWS_WITH_AS(exact_empty({-1, 4}, kFloat32), doctest::Contains("[exact_empty] expected a shape"), Error);
}

TEST_CASE("zero_pages: zeros that hold no resident page until written") {
  Tensor t = zero_pages({1024, 1024}, kFloat32);
  CHECK(t.is_contiguous());
  CHECK(t.dtype() == kFloat32);
  CHECK(resident_pages(t) == 0);
  CHECK(equal(t, zeros({1024, 1024})));
  // Writing a row makes only its pages resident.
  t.narrow(0, 10, 1).fill_(2.0);
  const int64_t page_bytes = ::sysconf(_SC_PAGESIZE);
  CHECK(resident_pages(t.narrow(0, 10, 1)) == (1024 * 4 + page_bytes - 1) / page_bytes);
  CHECK(t.data<float>()[10 * 1024 + 3] == 2.0f);
  CHECK(t.data<float>()[11 * 1024] == 0.0f);
  CHECK(zero_pages({0}, kInt8).numel() == 0);
  CHECK_THROWS_WITH_AS(zero_pages({2, -3}, kInt8), doctest::Contains("[zero_pages] expected a shape"), Error);
}
