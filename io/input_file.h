// InputFile: a path opened for reading only when it names a regular file.
//
// Every weft reader that takes a path (safetensors, checkpoints, the IDX reader) opens it here, so
// a named pipe, a directory or a device is refused at once with an error naming what the path is,
// instead of a read that blocks forever (a FIFO's open() waits for a writer) or parses a device's
// endless bytes. The path is opened without blocking, then checked with fstat on the descriptor,
// so the file checked is the file read, even if the path is replaced in between.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>

namespace weft::io {

class InputFile {
 public:
  // Throws "[op] 'path': ..." when the path cannot be opened or is not a regular file.
  InputFile(const std::filesystem::path& path, const std::string& op);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  size_t size() const { return size_; }

 private:
  int fd_ = -1;
  size_t size_ = 0;
};

// "a directory", "a named pipe (FIFO)", ... for what a stat mode says a path is.
std::string file_kind(mode_t mode);

}  // namespace weft::io
