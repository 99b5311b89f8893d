// The CPU backend's allocator: 64-byte aligned blocks from malloc (tensor/cpu/cpu_allocator.cpp).
#pragma once

#include "tensor/storage.h"

namespace weft::detail {

Allocator& default_cpu_allocator();

}  // namespace weft::detail
