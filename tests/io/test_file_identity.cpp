// A save keeps the identity of the file it replaces: its permission bits, and a symbolic link
// stays a link whose target gets the new bytes. What is not a regular file is refused before
// anything is written.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "safetensors_test_helpers.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::TempDir;

namespace {

mode_t mode_of(const std::filesystem::path& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

nn::TensorDict one_tensor(double value) {
  nn::TensorDict tensors;
  tensors.insert("w", full({2}, value));
  return tensors;
}

}  // namespace

TEST_CASE("saving over something that is not a regular file is refused before anything is written") {
  TempDir dir;
  const auto fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto subdir = dir / "sub";
  std::filesystem::create_directory(subdir);
  CHECK(error_of([&] { io::save_safetensors(fifo, one_tensor(1)); }) ==
        "[save_safetensors] '" + fifo.string() + "' is a named pipe (FIFO); expected a regular file or a new path");
  CHECK(error_of([&] { io::save_safetensors(subdir, one_tensor(1)); }) ==
        "[save_safetensors] '" + subdir.string() + "' is a directory; expected a regular file or a new path");
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(std::filesystem::is_directory(subdir));
  CHECK(dir.entries() == std::vector<std::string>{"pipe", "sub"});
}

TEST_CASE("saving keeps the replaced file's permission bits; a new file gets the umask's") {
  TempDir dir;
  for (const mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0604}}) {
    CAPTURE(mode);
    const auto path = dir / "private.safetensors";
    io::save_safetensors(path, one_tensor(1));
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    io::save_safetensors(path, one_tensor(2));
    CHECK(mode_of(path) == mode);
    CHECK(equal(io::load_safetensors(path).tensors.at("w"), full({2}, 2.0)));
    std::filesystem::remove(path);
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  io::save_safetensors(dir / "new.safetensors", one_tensor(1));
  CHECK(mode_of(dir / "new.safetensors") == (0666 & ~mask));
}

TEST_CASE("saving through a symbolic link replaces the link's target and keeps the link") {
  TempDir dir;
  std::filesystem::create_directory(dir / "real");
  const auto target = dir / "real" / "model.safetensors";
  io::save_safetensors(target, one_tensor(1));
  REQUIRE(::chmod(target.c_str(), 0600) == 0);
  // A relative link to a relative link, as `ln -s` makes them.
  std::filesystem::create_symlink("real/model.safetensors", dir / "latest.safetensors");
  std::filesystem::create_symlink("latest.safetensors", dir / "current.safetensors");

  io::save_safetensors(dir / "current.safetensors", one_tensor(3));
  CHECK(std::filesystem::is_symlink(dir / "current.safetensors"));
  CHECK(std::filesystem::is_symlink(dir / "latest.safetensors"));
  CHECK(std::filesystem::read_symlink(dir / "latest.safetensors") == "real/model.safetensors");
  CHECK(equal(io::load_safetensors(target).tensors.at("w"), full({2}, 3.0)));
  CHECK(mode_of(target) == 0600);
  // No temporary file left beside the link or beside the target.
  CHECK(dir.entries() == std::vector<std::string>{"current.safetensors", "latest.safetensors", "real"});
  CHECK(std::distance(std::filesystem::directory_iterator(dir / "real"), {}) == 1);

  // A dangling link: the save creates its target.
  std::filesystem::create_symlink("real/fresh.safetensors", dir / "fresh.safetensors");
  io::save_safetensors(dir / "fresh.safetensors", one_tensor(4));
  CHECK(std::filesystem::is_symlink(dir / "fresh.safetensors"));
  CHECK(equal(io::load_safetensors(dir / "real" / "fresh.safetensors").tensors.at("w"), full({2}, 4.0)));

  // A loop is an error, not a hang, and writes nothing.
  std::filesystem::create_symlink("loop_b", dir / "loop_a");
  std::filesystem::create_symlink("loop_a", dir / "loop_b");
  CHECK(contains(error_of([&] { io::save_safetensors(dir / "loop_a", one_tensor(5)); }),
                 "levels of symbolic links (a loop?)"));
}

TEST_CASE("a checkpoint saved over a 0600 symlinked file keeps both") {
  TempDir dir;
  nn::Linear model(2, 1);
  const auto target = dir / "run.ckpt";
  io::save_checkpoint(target, *model, nullptr);
  REQUIRE(::chmod(target.c_str(), 0600) == 0);
  std::filesystem::create_symlink("run.ckpt", dir / "last.ckpt");
  io::save_checkpoint(dir / "last.ckpt", *model, nullptr);
  CHECK(std::filesystem::is_symlink(dir / "last.ckpt"));
  CHECK(mode_of(target) == 0600);
  CHECK(io::read_checkpoint(dir / "last.ckpt").model.size() == 2);
}
