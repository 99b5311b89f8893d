// InputFile on POSIX: open(O_NONBLOCK), fstat, refuse anything but a regular file.
#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "tensor/error.h"

namespace weft::io {

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

InputFile::InputFile(const std::filesystem::path& path, const std::string& op) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It changes nothing
  // for the regular files that pass the check below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    WEFT_FAIL("[", op, "] '", path.string(), "': cannot open: ", std::system_category().message(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    WEFT_FAIL("[", op, "] '", path.string(), "': cannot stat: ", std::system_category().message(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    WEFT_FAIL("[", op, "] '", path.string(), "' is ", file_kind(st.st_mode), "; expected a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace weft::io
