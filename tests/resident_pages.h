// How many of a CPU tensor's pages are resident in this process (mincore): tests of memory that
// must cost nothing until it is written.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "tensor/all.h"

inline int64_t resident_pages(const weft::Tensor& t) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr()) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(t.data_ptr()) + t.nbytes() + page - 1) / page * page;
  std::vector<unsigned char> in_core((end - begin) / page);
  REQUIRE(::mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) == 0);
  int64_t count = 0;
  for (unsigned char c : in_core) count += c & 1;
  return count;
}
