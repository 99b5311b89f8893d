// AtomicFileWriter: writes a file so that readers see either the old file or the whole new one,
// never a torn mix, even if the process dies or the disk fills up half way.
//
// The bytes go to a temporary file in the target's directory (rename is atomic only within one
// file system), which is fsync'ed and then renamed over the target. Until commit() succeeds the
// target is untouched; if anything fails, or the writer is destroyed without commit(), the
// temporary file is removed. Errors name the op given at construction and the OS's reason.
//
// The target keeps its identity: when it exists, the new file gets its permission bits (a 0600
// file stays 0600), and when the path is a symbolic link the link stays and its target is
// replaced, atomically in the target's directory. A target that exists but is no regular file (a
// directory, a named pipe, a device) is refused before anything is written.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>

namespace weft::io {

class AtomicFileWriter {
 public:
  AtomicFileWriter(std::filesystem::path target, std::string op);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  // Replaces `nbytes` already written, `offset` bytes from the start (a field of a header whose
  // value is known only once what follows it has been written).
  void overwrite(size_t offset, const void* data, size_t nbytes);
  // Flushes the data to disk and renames the temporary file over the target.
  void commit();

  const std::filesystem::path& temp_path() const { return temp_path_; }
  // The file that commit() replaces: the target with its symbolic links followed.
  const std::filesystem::path& resolved_target() const { return resolved_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  // write (offset < 0: at the end) or overwrite.
  void put(const void* data, size_t nbytes, off_t offset);
  void discard() noexcept;

  std::filesystem::path target_;
  std::filesystem::path resolved_;
  std::filesystem::path temp_path_;
  std::string op_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace weft::io
