// Loading a safetensors file with its pages cached: load_safetensors, whose tensors are views of
// the mapped file (Note [Zero-copy loading] in io/safetensors.cpp), against the two copying
// loads it replaced — mapping the file and copying every tensor out of it (weft until issue 47),
// and read() into a buffer then copying — measured in the same run on the same file.
//
// The file (default 500 MB: 50 float32 tensors of 10 MB, in TMPDIR) is written by the bench,
// read once so the page cache holds it, then each way loads it repeatedly (median of at least 5
// loads). "Usable" means every tensor is there with its shape and dtype, and its first and last
// element read back right (which, for the views, faults in one page of each).
//
//   bench_load_safetensors [--megabytes N]
// Prints a table and one JSON line.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "median_timer.h"
#include "weft.h"

using namespace weft;

namespace {

constexpr int64_t kTensorBytes = 10 << 20;

// Every tensor's first and last element, as written.
double checksum(const io::SafetensorsFile& f) {
  double sum = 0;
  for (const auto& [name, t] : f.tensors.items()) {
    const float* p = t.data<float>();
    sum += p[0] + p[t.numel() - 1];
  }
  return sum;
}

double median_seconds(const std::function<io::SafetensorsFile()>& load, double want) {
  bench::MedianTimer timer([&] {
    if (checksum(load()) != want) {
      std::fprintf(stderr, "bench_load_safetensors: a load gave wrong values\n");
      std::exit(1);
    }
  });
  while (!timer.done(0.5)) timer.call();
  return timer.median();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t megabytes = 500;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--megabytes" && i + 1 < argc) {
      megabytes = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_load_safetensors [--megabytes N]\n");
      return 2;
    }
  }
  const auto path = std::filesystem::temp_directory_path() / ("weft_bench_load_" + std::to_string(::getpid()) + ".safetensors");
  nn::TensorDict tensors;
  const int64_t count = std::max<int64_t>(1, (megabytes << 20) / kTensorBytes);
  double want = 0;
  for (int64_t i = 0; i < count; ++i) {
    Tensor t = full({kTensorBytes / 4}, static_cast<double>(i), TensorOptions(kFloat32));
    t.data<float>()[t.numel() - 1] = static_cast<float>(i) + 0.5f;
    want += static_cast<double>(i) + (static_cast<double>(i) + 0.5);
    tensors.insert("layer" + std::to_string(i) + ".weight", t);
  }
  io::save_safetensors(path, tensors);
  tensors = {};
  const auto size = std::filesystem::file_size(path);

  auto read_all = [&] {
    std::vector<uint8_t> bytes(size);
    const int fd = ::open(path.c_str(), O_RDONLY);
    size_t got = 0;
    while (got < size) {
      const ssize_t r = ::read(fd, bytes.data() + got, size - got);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    ::close(fd);
    return bytes;
  };
  read_all();  // the page cache now holds the file

  const double mapped = median_seconds([&] { return io::load_safetensors(path); }, want);
  const double map_copy = median_seconds([&] {
    const int fd = ::open(path.c_str(), O_RDONLY);
    void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    io::SafetensorsFile f = io::load_safetensors_from_memory(static_cast<const uint8_t*>(address), size);
    ::munmap(address, size);
    return f;
  }, want);
  const double read_copy = median_seconds([&] {
    const std::vector<uint8_t> bytes = read_all();
    return io::load_safetensors_from_memory(bytes.data(), bytes.size());
  }, want);
  std::filesystem::remove(path);

  std::printf("loading a %.0f MB safetensors file (%lld float32 tensors), pages cached, median of >= 5 loads\n",
              static_cast<double>(size) / 1e6, static_cast<long long>(count));
  std::printf("%-40s %10s\n", "way", "ms");
  std::printf("%-40s %10.3f\n", "mmap, tensors are views (load_safetensors)", mapped * 1e3);
  std::printf("%-40s %10.3f\n", "mmap + copy (weft before)", map_copy * 1e3);
  std::printf("%-40s %10.3f\n", "read() + copy", read_copy * 1e3);
  std::printf("{\"bench\": \"load_safetensors\", \"bytes\": %llu, \"tensors\": %lld, \"mmap_view_ms\": %.3f, "
              "\"mmap_copy_ms\": %.3f, \"read_copy_ms\": %.3f, \"speedup_vs_mmap_copy\": %.1f, "
              "\"speedup_vs_read_copy\": %.1f}\n",
              static_cast<unsigned long long>(size), static_cast<long long>(count), mapped * 1e3, map_copy * 1e3,
              read_copy * 1e3, map_copy / mapped, read_copy / mapped);
  return 0;
}
