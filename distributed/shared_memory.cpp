// The shared-memory all-reduce of shared_memory.h (Note [Shared-memory all-reduce]).
#include "distributed/shared_memory.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>

#include "distributed/reduce_kernels.h"
#include "tensor/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace weft::distributed::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The segment: a header line, each rank's pid, each rank's two counters on their own cache lines
// (a rank spinning on one does not slow the writer of another), then the slots, page aligned.
constexpr uint64_t kMagic = 0x7765667473686d31;  // "weftshm1"
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
struct Header {
  uint64_t magic;
  uint64_t size;
  uint64_t slot_bytes;
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t pids_offset() { return kLine; }
size_t counters_offset(int size) { return pids_offset() + round_up(sizeof(int32_t) * static_cast<size_t>(size), kLine); }
size_t slots_offset(int size) { return round_up(counters_offset(size) + 2 * kLine * static_cast<size_t>(size), kPage); }
size_t segment_bytes(int size) {
  return slots_offset(size) + SharedMemoryGroup::kSlotBytes * static_cast<size_t>(size);
}

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_target(const char* path) {
  char buffer[256];
  const ssize_t n = ::readlink(path, buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

// Maps `bytes` of the named segment; "" or why not.
std::string map_segment(const std::string& name, size_t bytes, bool create, void** base) {
  const int fd = create ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600) : ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return "shm_open(" + name + "): " + std::strerror(errno);
  std::string failure;
  if (create) {
    // Reserve the pages now: a /dev/shm too small to hold them fails here, not with SIGBUS later.
    if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0)
      failure = "reserving " + std::to_string(bytes) + " bytes in /dev/shm: " + std::strerror(rc);
  } else {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes)
      failure = "segment " + name + " holds " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(bytes);
  }
  if (failure.empty()) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) failure = std::string("mmap: ") + std::strerror(errno);
    else *base = p;
  }
  ::close(fd);
  if (!failure.empty() && create) ::shm_unlink(name.c_str());
  return failure;
}

bool process_alive(int32_t pid) { return pid <= 0 || ::kill(pid, 0) == 0 || errno == EPERM; }

void publish(uint32_t* word, uint32_t round) {
  std::atomic_ref<uint32_t>(*word).store(round, std::memory_order_release);
  // Not FUTEX_PRIVATE: the waiters are other processes mapping the same page.
  ::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool reached(uint32_t value, uint32_t round) { return static_cast<int32_t>(value - round) >= 0; }  // wraps

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "|" + read_first_line("/proc/sys/kernel/random/boot_id") + "|" +
         link_target("/proc/self/ns/net") + "|" + link_target("/proc/self/ns/mnt") + "|" +
         link_target("/proc/self/ns/pid");
}

std::unique_ptr<SharedMemoryGroup> SharedMemoryGroup::connect(Store& store, int rank, int size, Milliseconds timeout,
                                                              bool enabled) {
  if (size < 2) return nullptr;
  // A disabled rank publishes an identity no other rank has, so all of them decide alike.
  store.set("shm/host/" + std::to_string(rank), enabled ? host_identity() : "off " + std::to_string(rank));
  const std::string first = store.get("shm/host/0", timeout);
  bool one_host = true;
  for (int r = 1; r < size; ++r) one_host = store.get("shm/host/" + std::to_string(r), timeout) == first && one_host;
  if (!one_host) return nullptr;

  const size_t bytes = segment_bytes(size);
  void* base = nullptr;
  std::string name, failure;
  if (rank == 0) {
    std::random_device entropy;
    name = "/weft-" + std::to_string(::getpid()) + "-" + std::to_string(entropy());
    failure = map_segment(name, bytes, true, &base);
    if (failure.empty()) *static_cast<Header*>(base) = {kMagic, static_cast<uint64_t>(size), kSlotBytes};
    store.set("shm/name", failure.empty() ? name : "");
  } else {
    name = store.get("shm/name", timeout);
    failure = name.empty() ? "rank 0 could not create the segment" : map_segment(name, bytes, false, &base);
    if (failure.empty()) {
      const Header& h = *static_cast<const Header*>(base);
      if (h.magic != kMagic || h.size != static_cast<uint64_t>(size) || h.slot_bytes != kSlotBytes)
        failure = "segment " + name + " is not this group's";
    }
  }
  std::unique_ptr<SharedMemoryGroup> group;
  if (failure.empty()) {
    group.reset(new SharedMemoryGroup(base, bytes, rank, size));
    std::atomic_ref<int32_t>(*group->pid(rank)).store(static_cast<int32_t>(::getpid()), std::memory_order_release);
  }
  store.set("shm/mapped/" + std::to_string(rank), failure.empty() ? "1" : "0");
  bool everyone = true;
  for (int r = 0; r < size; ++r) everyone = store.get("shm/mapped/" + std::to_string(r), timeout) == "1" && everyone;
  if (rank == 0 && !name.empty()) ::shm_unlink(name.c_str());  // every rank has it mapped (or gave up)
  if (!everyone) group.reset();
  return group;
}

SharedMemoryGroup::~SharedMemoryGroup() { ::munmap(base_, bytes_); }

uint32_t* SharedMemoryGroup::ready(int r) const {
  return reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(base_) + counters_offset(size_) + 2 * kLine * static_cast<size_t>(r));
}
uint32_t* SharedMemoryGroup::done(int r) const {
  return reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(ready(r)) + kLine);
}
int32_t* SharedMemoryGroup::pid(int r) const {
  return reinterpret_cast<int32_t*>(static_cast<uint8_t*>(base_) + pids_offset()) + r;
}
uint8_t* SharedMemoryGroup::slots() const { return static_cast<uint8_t*>(base_) + slots_offset(size_); }

void SharedMemoryGroup::wait_for_all(uint32_t* (SharedMemoryGroup::*counter)(int) const, uint32_t round,
                                     Clock::time_point deadline, Milliseconds timeout) const {
  constexpr int kSpins = 2000;  // a few microseconds: a peer a step behind is usually that close
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    uint32_t* word = (this->*counter)(peer);
    std::atomic_ref<uint32_t> value(*word);
    for (int spin = 0; spin < kSpins && !reached(value.load(std::memory_order_acquire), round); ++spin) cpu_relax();
    for (;;) {
      const uint32_t seen = value.load(std::memory_order_acquire);
      if (reached(seen, round)) break;
      const auto now = Clock::now();
      WEFT_CHECK(now < deadline, "shared memory: rank ", peer, " did not reach round ", round, " within ",
                 timeout.count(), " ms");
      const int32_t peer_pid = std::atomic_ref<int32_t>(*pid(peer)).load(std::memory_order_acquire);
      WEFT_CHECK(process_alive(peer_pid), "shared memory: rank ", peer, " (pid ", peer_pid, ") is gone");
      // Sleep until the peer publishes, in slices so that its death is noticed within one.
      const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(50));
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
      timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      ::syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, nullptr, 0);
    }
  }
}

void SharedMemoryGroup::all_reduce(DType dtype, ReduceOp op, void* data, size_t count, Milliseconds timeout) {
  const size_t item = itemsize(dtype);
  const size_t per_round = kSlotBytes / item;
  const auto deadline = Clock::now() + timeout;
  auto* bytes = static_cast<uint8_t*>(data);
  for (size_t begin = 0; begin < count; begin += per_round) {
    const size_t n = std::min(per_round, count - begin);
    const uint32_t round = round_ + 1;
    // The slots are reused: every peer must have finished reading the previous round's.
    wait_for_all(&SharedMemoryGroup::done, round - 1, deadline, timeout);
    // This round's slots are one (size, n) array, so the reduction is one call in rank order.
    std::memcpy(slots() + static_cast<size_t>(rank_) * n * item, bytes + begin * item, n * item);
    publish(ready(rank_), round);
    wait_for_all(&SharedMemoryGroup::ready, round, deadline, timeout);
    reduce_blocks(dtype, op, bytes + begin * item, slots(), static_cast<size_t>(size_), n);
    publish(done(rank_), round);
    round_ = round;
  }
}

}  // namespace weft::distributed::detail
