// AtomicFileWriter on POSIX: follow the target's symbolic links, open(O_EXCL) a unique temporary
// name beside the real file, give it the old file's mode, write, fsync, rename.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "io/input_file.h"
#include "tensor/error.h"

namespace weft::io {
namespace {

std::string os_reason(int err) { return std::system_category().message(err); }

// The path a write to `path` lands on: symbolic links followed, as open() follows them, but the
// last one may dangle (the write then creates its target).
std::filesystem::path follow_symlinks(std::filesystem::path path, const std::string& op) {
  constexpr int kMaxLinks = 40;  // as Linux's ELOOP limit
  for (int hops = 0; hops < kMaxLinks; ++hops) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    std::error_code error;
    const std::filesystem::path link = std::filesystem::read_symlink(path, error);
    WEFT_CHECK(!error, "[", op, "] cannot read the symbolic link '", path.string(), "': ", error.message());
    path = link.is_absolute() ? link : path.parent_path() / link;
  }
  WEFT_FAIL("[", op, "] '", path.string(), "': more than ", kMaxLinks, " levels of symbolic links (a loop?)");
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target, std::string op)
    : target_(std::move(target)), op_(std::move(op)) {
  WEFT_CHECK(target_.has_filename(), "[", op_, "] expected a path to a file, got '", target_.string(), "'");
  resolved_ = follow_symlinks(target_, op_);
  WEFT_CHECK(resolved_.has_filename(), "[", op_, "] '", target_.string(), "' links to '", resolved_.string(),
             "', which is not a path to a file");
  struct stat existing {};
  const bool exists = ::stat(resolved_.c_str(), &existing) == 0;
  WEFT_CHECK(!exists || S_ISREG(existing.st_mode), "[", op_, "] '", target_.string(), "' is ",
             file_kind(existing.st_mode), "; expected a regular file or a new path");
  const std::filesystem::path dir = resolved_.has_parent_path() ? resolved_.parent_path() : ".";
  // pid + counter makes the name unique among writers; O_EXCL settles any remaining race.
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    std::string name = ".";
    name += resolved_.filename().string();
    name += ".tmp.";
    name += std::to_string(::getpid());
    name += '.';
    name += std::to_string(counter++);
    temp_path_ = dir / name;
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    const int err = errno;
    if (err != EEXIST || attempt == 100) {
      temp_path_.clear();
      WEFT_FAIL("[", op_, "] cannot create a file in directory '", dir.string(), "' to write '",
                target_.string(), "': ", os_reason(err));
    }
  }
  // The replacement gets the permission bits of the file it replaces (a new file gets the umask's).
  if (exists && ::fchmod(fd_, existing.st_mode & 07777) != 0) {
    const int err = errno;
    fail("cannot give '" + temp_path_.string() + "' the mode of the file it replaces", err);
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFileWriter::fail(const std::string& what, int err) {
  discard();
  WEFT_FAIL("[", op_, "] ", what, ": ", os_reason(err), "; '", target_.string(), "' is unchanged");
}

void AtomicFileWriter::write(const void* data, size_t nbytes) { put(data, nbytes, -1); }

void AtomicFileWriter::overwrite(size_t offset, const void* data, size_t nbytes) {
  put(data, nbytes, static_cast<off_t>(offset));
}

void AtomicFileWriter::put(const void* data, size_t nbytes, off_t offset) {
  WEFT_CHECK(fd_ >= 0, "[", op_, "] write after the file was committed or discarded");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t n = offset < 0 ? ::write(fd_, p, nbytes) : ::pwrite(fd_, p, nbytes, offset);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      fail("writing '" + temp_path_.string() + "' failed", err);
    }
    p += n;
    nbytes -= static_cast<size_t>(n);
    if (offset >= 0) offset += n;
  }
}

void AtomicFileWriter::commit() {
  WEFT_CHECK(fd_ >= 0, "[", op_, "] commit after the file was committed or discarded");
  // errno is read before the message is built: building it may allocate, which may set errno.
  if (::fsync(fd_) != 0) {
    const int err = errno;
    fail("flushing '" + temp_path_.string() + "' to disk failed", err);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    fail("closing '" + temp_path_.string() + "' failed", err);
  }
  if (::rename(temp_path_.c_str(), resolved_.c_str()) != 0) {
    const int err = errno;
    fail("cannot rename '" + temp_path_.string() + "' over '" + resolved_.string() + "'", err);
  }
  committed_ = true;
  // Makes the rename itself durable. Best effort: the new file is already in place, and some
  // file systems refuse fsync on a directory.
  const std::filesystem::path dir = resolved_.has_parent_path() ? resolved_.parent_path() : ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace weft::io
