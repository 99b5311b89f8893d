// error_of(fn): the message of the weft::Error that fn throws, or "" when it throws none. Every
// test that checks what an error says asks through this one helper.
#pragma once

#include <functional>
#include <string>

#include "tensor/error.h"

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const weft::Error& e) {
    return e.what();
  }
  return "";
}
