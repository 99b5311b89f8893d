// FileStore: keys as files, values replaced by rename, add() under an exclusive flock.
#include "distributed/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "tensor/error.h"

namespace weft::distributed {
namespace {

std::string escape_key(const std::string& key) {
  static const char* kHex = "0123456789abcdef";
  std::string name = "k_";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  return name;
}

// Unlocks and closes the lock file at the end of add(), also when it throws. Waits for the lock
// at most `timeout` (a process stopped while holding it must not block the others for ever).
class FolderLock {
 public:
  FolderLock(const std::filesystem::path& path, Milliseconds timeout)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    WEFT_CHECK(fd_ >= 0, "[FileStore] cannot open the lock file ", path, ": ", std::strerror(errno));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        ::close(fd_);
        WEFT_FAIL("[FileStore] cannot lock ", path, ": ", std::strerror(errno));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::close(fd_);
        WEFT_FAIL("[FileStore] timed out after ", timeout.count(), " ms waiting for the lock ", path,
                  " (held by a process that stopped?)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~FolderLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_;
};

}  // namespace

FileStore::FileStore(std::filesystem::path folder, Milliseconds timeout) : Store(timeout), folder_(std::move(folder)) {
  std::error_code ec;
  std::filesystem::create_directories(folder_, ec);
  WEFT_CHECK(!ec && std::filesystem::is_directory(folder_), "[FileStore] cannot use ", folder_,
             " as the store folder: ", ec ? ec.message() : "not a directory");
}

std::filesystem::path FileStore::path_of(const std::string& key) const {
  WEFT_CHECK(!key.empty(), "[FileStore] keys must not be empty");
  return folder_ / escape_key(key);
}

void FileStore::write_file(const std::filesystem::path& path, const std::string& value) {
  static std::atomic<uint64_t> counter{0};
  const auto temp = folder_ / (".tmp_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    WEFT_CHECK(out.good(), "[FileStore] cannot write ", temp);
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  WEFT_CHECK(!ec, "[FileStore] cannot rename ", temp, " to ", path, ": ", ec.message());
}

void FileStore::set(const std::string& key, const std::string& value) { write_file(path_of(key), value); }

std::string FileStore::get_existing(const std::string& key) {
  std::ifstream in(path_of(key), std::ios::binary);
  WEFT_CHECK(in.good(), "[FileStore] key '", key, "' vanished from ", folder_);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  FolderLock lock(folder_ / ".lock", timeout());
  int64_t value = 0;
  if (check({key})) {
    const std::string text = get_existing(key);
    std::istringstream is(text);
    WEFT_CHECK(static_cast<bool>(is >> value), "[FileStore] add: key '", key, "' holds '", text,
               "', not a number");
  }
  value += delta;
  write_file(path_of(key), std::to_string(value));
  return value;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    std::error_code ec;
    if (!std::filesystem::exists(path_of(key), ec)) return false;
  }
  return true;
}

bool FileStore::remove(const std::string& key) {
  std::error_code ec;
  return std::filesystem::remove(path_of(key), ec);
}

}  // namespace weft::distributed
