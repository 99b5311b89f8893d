// Checks an example program runs on its command-line paths before it starts working, so that a
// run never fails half way (or silently skips its output) for a reason known at the start.
//
// Each returns an empty string when the path is fine, else why it is not, for the caller to put
// after the flag's name. They probe rather than guess: a path to write is tested by creating and
// removing a temporary file beside the file it names (through weft's atomic writer, which
// follows symbolic links and refuses directories, named pipes and devices), so a missing or
// read-only directory is found even when the program runs as root, where access() says yes.
#pragma once

#include <unistd.h>

#include <string>

#include "weft.h"

namespace weft::examples {

// A file the program will create or replace.
inline std::string unwritable_reason(const std::string& path) {
  try {
    io::AtomicFileWriter probe(path, "probe");  // removes its temporary file when it goes
    return "";
  } catch (const Error& e) {
    std::string reason = e.what();
    return reason.substr(reason.find("] ") + 2);  // without the probe's "[probe] " prefix
  }
}

// A file the program will append to: writable where it is, or creatable.
inline std::string unappendable_reason(const std::string& path) {
  if (std::string reason = unwritable_reason(path); !reason.empty()) return reason;
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
    return "'" + path + "' exists and is not writable";
  return "";
}

// A regular file the program will read.
inline std::string unreadable_reason(const std::string& path) {
  try {
    io::InputFile probe(path, "probe");
    return "";
  } catch (const Error& e) {
    std::string reason = e.what();
    return reason.substr(reason.find("] ") + 2);
  }
}

}  // namespace weft::examples
