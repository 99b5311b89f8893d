// Saving safetensors: the exact bytes (against hand-built files and the reference writer's
// output), round trips of every dtype, views, metadata escaping, and atomic replacement that
// leaves the old file intact on every failure.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <csignal>
#include <cstring>

#include "io/safetensors_test_helpers.h"
#include "io/all.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::data_dir;
using safetensors_test::read_bytes;
using safetensors_test::TempDir;
using safetensors_test::write_bytes;

namespace {

std::vector<uint8_t> raw_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return {p, p + c.nbytes()};
}

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::string save_error(const std::filesystem::path& path, const nn::TensorDict& tensors) {
  try {
    io::save_safetensors(path, tensors);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL_CHECK("expected save_safetensors to throw weft::Error");
  return "";
}

}  // namespace

TEST_CASE("safetensors: save writes exactly the hand-built bytes") {
  nn::TensorDict tensors;
  tensors.insert("b", tensor({1.0, -2.0}, kFloat32));
  tensors.insert("a", scalar_tensor(7, kInt64));
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})"
      "      ";  // 138 bytes of JSON padded to 144
  const std::vector<uint8_t> expected = concat({
      {0x90, 0, 0, 0, 0, 0, 0, 0},
      bytes_of(header),
      {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0},  // 1.0f, -2.0f
      {0x07, 0, 0, 0, 0, 0, 0, 0},                       // int64 7
  });
  CHECK(io::save_safetensors_to_memory(tensors, {{"format", "pt"}}) == expected);

  TempDir dir;
  io::save_safetensors(dir / "m.safetensors", tensors, {{"format", "pt"}});
  CHECK(read_bytes(dir / "m.safetensors") == expected);

  // Loaded tensors own their memory: the buffer they came from can be reused.
  std::vector<uint8_t> buffer = expected;
  const auto loaded = io::load_safetensors_from_memory(buffer.data(), buffer.size());
  std::fill(buffer.begin(), buffer.end(), 0);
  CHECK(loaded.tensors.at("b").to_vector<double>() == std::vector<double>{1.0, -2.0});
  CHECK(loaded.tensors.at("a").item<int64_t>() == 7);
}

TEST_CASE("safetensors: without metadata the key is omitted, and an empty dict is a valid file") {
  nn::TensorDict tensors;
  tensors.insert("x", tensor({1, 2, 255}, kUInt8));
  CHECK(io::save_safetensors_to_memory(tensors) ==
        concat({{56, 0, 0, 0, 0, 0, 0, 0},
                bytes_of(R"({"x":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})"
                         "   "),
                {1, 2, 255}}));
  const std::vector<uint8_t> empty = io::save_safetensors_to_memory(nn::TensorDict());
  CHECK(empty == concat({{8, 0, 0, 0, 0, 0, 0, 0}, bytes_of("{}      ")}));
  const auto loaded = io::load_safetensors_from_memory(empty.data(), empty.size());
  CHECK(loaded.tensors.empty());
  CHECK(loaded.metadata.empty());
}

TEST_CASE("safetensors: weft writes the same bytes as the reference safetensors writer") {
  // tests/io/data/reference_writer.safetensors comes from safetensors.torch.save_file
  // (scripts/safetensors_interop.py).
  nn::TensorDict tensors;
  tensors.insert("step", scalar_tensor(7, kInt64));
  tensors.insert("weight", tensor({1.0, -2.0, 0.5, 4.0, 0.25, -8.0}, kFloat32).view({2, 3}));
  tensors.insert("bias", tensor({0.5, -0.5, 1.5}, kBFloat16));
  tensors.insert("mask", tensor({1, 0}, kBool));
  const auto reference = read_bytes(data_dir() / "reference_writer.safetensors");
  REQUIRE(!reference.empty());
  CHECK(io::save_safetensors_to_memory(tensors, {{"format", "pt"}}) == reference);
}

TEST_CASE("safetensors: every dtype round-trips bit for bit, in saved order") {
  nn::TensorDict tensors;
  tensors.insert("f64", tensor({1.0 / 3.0, -0.0, 1e300}, kFloat64));
  tensors.insert("f32", tensor({1.5, -2.25, 1e-40, 3e38}, kFloat32).view({2, 2}));
  tensors.insert("f16", tensor({1.0, -2.5, 65504.0}, kFloat16));
  tensors.insert("bf16", tensor({1.0, -3.140625}, kBFloat16));
  tensors.insert("f8e4m3", tensor({1.0, -2.0, 448.0}, kFloat8E4M3FN));
  tensors.insert("f8e5m2", tensor({1.0, -2.0, 57344.0}, kFloat8E5M2));
  tensors.insert("i8", tensor({-128, 127}, kInt8));
  tensors.insert("u8", tensor({0, 255}, kUInt8));
  tensors.insert("i32", tensor({-2147483648.0, 2147483647.0}, kInt32));
  tensors.insert("i64", tensor({-5, 1e15}, kInt64));
  tensors.insert("bool", tensor({1, 0, 1}, kBool));
  tensors.insert("empty", zeros({0, 3}, kFloat32));
  tensors.insert("scalar", scalar_tensor(2.5, kFloat32));

  TempDir dir;
  io::save_safetensors(dir / "all.safetensors", tensors, {{"format", "pt"}, {"step", "12"}});
  const io::SafetensorsFile loaded = io::load_safetensors(dir / "all.safetensors");
  CHECK(loaded.metadata == io::SafetensorsMetadata{{"format", "pt"}, {"step", "12"}});
  REQUIRE(loaded.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors.items()[i].first;
    const Tensor& t = tensors.items()[i].second;
    const Tensor& u = loaded.tensors.items()[i].second;
    CAPTURE(name);
    CHECK(loaded.tensors.items()[i].first == name);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.shape() == t.shape());
    CHECK(u.device() == kCPU);
    CHECK(raw_bytes(u) == raw_bytes(t));
  }
}

TEST_CASE("safetensors: views are saved as their own contiguous values") {
  const Tensor m = arange(6, kFloat32).view({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  nn::TensorDict tensors;
  tensors.insert("transposed", m.t());
  tensors.insert("narrowed", m.narrow(1, 1, 2));
  tensors.insert("row", m[1]);
  tensors.insert("trainable", ones({2}).requires_grad_());
  const auto bytes = io::save_safetensors_to_memory(tensors);
  const auto loaded = io::load_safetensors_from_memory(bytes.data(), bytes.size()).tensors;
  CHECK(loaded.at("transposed").shape() == Shape{3, 2});
  CHECK(loaded.at("transposed").to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(loaded.at("narrowed").to_vector<double>() == std::vector<double>{1, 2, 4, 5});
  CHECK(loaded.at("row").to_vector<double>() == std::vector<double>{3, 4, 5});
  CHECK(loaded.at("trainable").to_vector<double>() == std::vector<double>{1, 1});
  CHECK_FALSE(loaded.at("trainable").requires_grad());
  // Only the viewed elements are stored: 6 + 4 + 3 + 2 floats after the header.
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t{bytes[i]} << (8 * i);
  CHECK(bytes.size() - 8 - header_size == 15 * 4);
}

TEST_CASE("safetensors: names and metadata are escaped as JSON and come back unchanged") {
  const std::string name = "layer.\"q\"\\k\xC3\xBC";        // quote, backslash, ü
  const std::string value = "line\nbreak\ttab \x01 \xF0\x9F\xA6\x80";  // control chars, 🦀
  nn::TensorDict tensors;
  tensors.insert(name, tensor({1}, kUInt8));
  const auto bytes = io::save_safetensors_to_memory(tensors, {{"k\"ey", value}});
  const std::string text(bytes.begin() + 8, bytes.end());
  CHECK(contains(text, R"({"__metadata__":{"k\"ey":"line\nbreak\ttab \u0001 )" "\xF0\x9F\xA6\x80" R"("},)"));
  CHECK(contains(text, R"("layer.\"q\"\\k)" "\xC3\xBC" R"(":{"dtype":"U8")"));
  const auto loaded = io::load_safetensors_from_memory(bytes.data(), bytes.size());
  CHECK(loaded.tensors.contains(name));
  CHECK(loaded.metadata.at("k\"ey") == value);
}

TEST_CASE("safetensors: save refuses what the format cannot hold, before touching the disk") {
  TempDir dir;
  const auto path = dir / "x.safetensors";
  nn::TensorDict reserved;
  reserved.insert("__metadata__", ones({1}));
  CHECK(contains(save_error(path, reserved), "[save_safetensors] a tensor cannot be named '__metadata__'"));
  nn::TensorDict undefined;
  undefined.insert("w", Tensor());
  CHECK(contains(save_error(path, undefined), "[save_safetensors] tensor 'w' is undefined"));
  nn::TensorDict lazy;
  lazy.insert("w", detail::make_uninitialized(kFloat32, kCPU, true));
  CHECK(contains(save_error(path, lazy), "tensor 'w' is uninitialized (a lazy parameter before its first forward)"));
  nn::TensorDict bad_name;
  bad_name.insert("w\xFF", ones({1}));
  CHECK(contains(save_error(path, bad_name), "tensor name 'w\xFF' is not valid UTF-8"));
  CHECK(dir.entries().empty());
}

TEST_CASE("safetensors: save into a missing or unusable directory fails clearly") {
  TempDir dir;
  nn::TensorDict tensors;
  tensors.insert("w", ones({2}));
  std::string e = save_error(dir / "no/such/dir/x.safetensors", tensors);
  CHECK(contains(e, "[save_safetensors] cannot create a file in directory '" + (dir / "no/such/dir").string() +
                        "' to write '" + (dir / "no/such/dir/x.safetensors").string() +
                        "': No such file or directory"));
  // An unwritable directory: permission bits where they bind; root ignores them, so /sys then.
  const auto locked = dir / "locked";
  std::filesystem::create_directory(locked);
  std::filesystem::permissions(locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const std::filesystem::path unwritable = ::geteuid() == 0 ? std::filesystem::path("/sys") : locked;
  e = save_error(unwritable / "x.safetensors", tensors);
  CHECK(contains(e, "[save_safetensors] cannot create a file in directory '" + unwritable.string() + "'"));
  CHECK((contains(e, "Permission denied") || contains(e, "Read-only file system")));
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);
  write_bytes(dir / "plain_file", {1});
  CHECK(contains(save_error(dir / "plain_file/x.safetensors", tensors), "Not a directory"));
  CHECK(contains(save_error(dir.path() / "", tensors), "expected a path to a file"));
}

TEST_CASE("safetensors: save replaces the old file and leaves no temporary file") {
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  nn::TensorDict first, second;
  first.insert("w", tensor({1, 2}, kFloat32));
  second.insert("w", tensor({3, 4, 5}, kFloat32));
  io::save_safetensors(path, first);
  io::save_safetensors(path, second);
  CHECK(io::load_safetensors(path).tensors.at("w").to_vector<double>() == std::vector<double>{3, 4, 5});
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("safetensors: a save that fails leaves the old file untouched and removes its temporary file") {
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  nn::TensorDict old_tensors;
  old_tensors.insert("w", tensor({1, 2}, kFloat32));
  io::save_safetensors(path, old_tensors);
  const auto old_bytes = read_bytes(path);

  SUBCASE("a tensor that cannot be saved") {
    nn::TensorDict bad;
    bad.insert("ok", ones({4}));
    bad.insert("lazy", detail::make_uninitialized(kFloat32, kCPU, false));
    CHECK(contains(save_error(path, bad), "tensor 'lazy' is uninitialized"));
  }
  SUBCASE("the disk fills up half way (simulated with a file size limit)") {
    // Past RLIMIT_FSIZE write() fails with EFBIG, as it would with ENOSPC on a full disk; SIGXFSZ
    // is ignored so that the failure is an error code rather than a signal.
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    auto* saved_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = saved;
    small.rlim_cur = 4096;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    nn::TensorDict big;
    big.insert("w", zeros({16384}, kFloat32));
    const std::string e = save_error(path, big);
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, saved_handler);
    CHECK(contains(e, "[save_safetensors] writing '"));
    CHECK(contains(e, "' failed: File too large; '" + path.string() + "' is unchanged"));
  }
  CHECK(read_bytes(path) == old_bytes);
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("safetensors: a failed rename removes the temporary file") {
  TempDir dir;
  const auto path = dir / "ckpt.safetensors";
  io::AtomicFileWriter writer(path, "save_safetensors");
  writer.write("x", 1);
  // A directory appears at the target after the writer checked it: rename() cannot replace it.
  std::filesystem::create_directory(path);
  write_bytes(path / "inside", {1});
  std::string e;
  try {
    writer.commit();
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(contains(e, "[save_safetensors] cannot rename '"));
  CHECK(contains(e, "' over '" + path.string() + "'"));
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
  CHECK(std::filesystem::is_directory(path));
}
