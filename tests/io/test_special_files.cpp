// Readers refuse anything but a regular file at once, naming what the path is: a named pipe would
// otherwise block the reader forever, and a device would be read without end.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>

#include "safetensors_test_helpers.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::TempDir;

namespace {

// The error `load` ends in, run on another thread with a deadline: a load still blocked on the
// FIFO after it fails the test and is then released by opening the FIFO's writing end (the
// reader then sees end of file), so this test can never hang.
std::string error_within_deadline(const std::function<void()>& load, const std::filesystem::path& fifo) {
  auto done = std::async(std::launch::async, [&] { return error_of(load); });
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    FAIL_CHECK("reading the named pipe '", fifo.string(), "' blocked");
    while (done.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  return done.get();
}

}  // namespace

TEST_CASE("every file reader refuses a named pipe at once, naming what the path is") {
  TempDir dir;
  const auto fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string expected = "'" + fifo.native() + "' is a named pipe (FIFO); expected a regular file";
  CHECK(contains(error_within_deadline([&] { io::load_safetensors(fifo); }, fifo), "[load_safetensors] " + expected));
  CHECK(contains(error_within_deadline([&] { io::read_checkpoint(fifo); }, fifo), expected));
  nn::Linear model(2, 1);
  CHECK(contains(error_within_deadline([&] { io::load_checkpoint(fifo, *model, nullptr); }, fifo), expected));
  CHECK(contains(error_within_deadline([&] { io::read_idx(fifo.string()); }, fifo), "[read_idx] " + expected));
}

TEST_CASE("file readers refuse a directory and a device") {
  TempDir dir;
  for (const std::filesystem::path& path : {dir.path(), std::filesystem::path("/dev/null")}) {
    CAPTURE(path);
    const std::string kind = path == dir.path() ? "a directory" : "a character device";
    const std::string expected = "'" + path.native() + "' is " + kind + "; expected a regular file";
    CHECK(error_of([&] { io::load_safetensors(path); }) == "[load_safetensors] " + expected);
    CHECK(error_of([&] { io::read_idx(path.string()); }) == "[read_idx] " + expected);
    nn::Linear model(2, 1);
    CHECK(contains(error_of([&] { io::load_checkpoint(path, *model, nullptr); }), expected));
  }
}
