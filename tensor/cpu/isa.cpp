// CPUID/XGETBV feature detection and the process-wide active instruction-set level.
//
// Detection follows the CPU vendors' rules: a vector extension is usable only when CPUID reports it
// *and* the OS saves its registers on a context switch (XCR0 bits 1-2 for ymm, 5-7 for zmm).
// __builtin_cpu_supports is not used because clang 14 rejects several of the names needed here.
// AMX adds a third condition: Linux enables the tile data state per process, on request.
#include "tensor/cpu/isa.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "tensor/cpu/isa_probe_kernels.h"
#include "tensor/enum_check.h"
#include "tensor/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace weft {
namespace {

constexpr std::string_view kIsaNames[] = {"scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx"};

#if defined(__x86_64__) || defined(__i386__)
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

// Asks Linux for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, feature 18). The
// permission is process-wide and stays granted; without it the first tile instruction is a SIGILL.
bool request_amx_permission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_saved = (xcr0 & 0x6) == 0x6;
  const bool zmm_saved = (xcr0 & 0xE6) == 0xE6;
  const bool tiles_saved = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  if (!ymm_saved) return f;
  f.fma = fma;
  f.f16c = f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  if (zmm_saved) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512_vnni = c & (1u << 11);
  }
  const bool amx_tile = d & (1u << 24);
  if (tiles_saved && amx_tile && request_amx_permission()) {
    f.amx_tile = true;
    f.amx_bf16 = d & (1u << 22);
    f.amx_int8 = d & (1u << 25);
  }
  __cpuid_count(7, 1, a, b, c, d);
  f.avx_vnni = a & (1u << 4);
  if (zmm_saved) f.avx512_bf16 = a & (1u << 5);
  return f;
}
#else
CpuFeatures detect_features() { return {}; }
#endif

CpuIsa highest_level(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma && f.f16c)) return CpuIsa::Scalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return CpuIsa::Avx2;
  if (!f.avx512_vnni) return CpuIsa::Avx512;
  if (!f.avx512_bf16) return CpuIsa::Avx512Vnni;
  if (!(f.amx_tile && f.amx_int8 && f.amx_bf16)) return CpuIsa::Avx512Bf16;
  return CpuIsa::Amx;
}

void check_supported(CpuIsa isa, const char* where) {
  detail::check_enum(isa, static_cast<int>(std::size(kIsaNames)), where, "CpuIsa");
  WEFT_CHECK(isa <= cpu_isa_supported(), "[", where, "] this CPU supports instruction sets up to ",
             cpu_isa_name(cpu_isa_supported()), ", got a request for ", cpu_isa_name(isa));
}

// The active level; kUnset until the first query reads WEFT_CPU_ISA.
constexpr int kUnset = -1;
std::atomic<int> active_level{kUnset};
std::once_flag env_once;

void read_environment() {
  CpuIsa level = cpu_isa_default();
  if (const char* env = std::getenv("WEFT_CPU_ISA"); env && *env) {
    level = cpu_isa_from_name(env);
    check_supported(level, "WEFT_CPU_ISA");
  }
  int expected = kUnset;
  active_level.compare_exchange_strong(expected, static_cast<int>(level));
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect_features();
  return features;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  detail::check_enum(isa, static_cast<int>(std::size(kIsaNames)), "cpu_isa_name", "CpuIsa");
  return kIsaNames[static_cast<int>(isa)];
}

CpuIsa cpu_isa_from_name(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kIsaNames)); ++i)
    if (kIsaNames[i] == name) return static_cast<CpuIsa>(i);
  WEFT_FAIL("[cpu_isa] expected one of scalar, avx2, avx512, avx512_vnni, avx512_bf16, amx, got '", name, "'");
}

bool cpu_isa_emulated() {
#ifdef WEFT_SIMD_EMULATION
  return true;
#else
  return false;
#endif
}

CpuIsa cpu_isa_supported() {
  // Emulated AVX-512 units run on AVX2, so emulation needs a CPU with AVX2 itself; AMX is never
  // emulated.
  static const CpuIsa hardware = highest_level(cpu_features());
  if (cpu_isa_emulated() && hardware >= CpuIsa::Avx2) return std::max(hardware, CpuIsa::Avx512Bf16);
  return hardware;
}

namespace {

// The least speedup at which BF16 dot products are worth their own kernels (Note [Where BF16 dot
// products pay]): the pairs kernel's tiles hold fewer columns and its packing costs as much, so an
// even rate is not enough.
constexpr double kBf16DotsPay = 4.0 / 3.0;

double measure_bf16_dot_speedup() {
  constexpr int64_t kSteps = 2000;  // 24,000 instructions a loop: ~10-20 microseconds
  double best_dots = std::numeric_limits<double>::infinity(), best_fmas = best_dots;
  volatile float sink = 0;
  const auto seconds = [&sink](float (*chains)(int64_t)) {
    const auto start = std::chrono::steady_clock::now();
    sink = sink + chains(kSteps);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Alternated, best of five: the first rounds also wake the core's upper vector lanes.
  for (int round = 0; round < 5; ++round) {
    best_dots = std::min(best_dots, seconds(detail::bf16_dot_chains_avx512bf16));
    best_fmas = std::min(best_fmas, seconds(detail::fma_chains_avx512bf16));
  }
  return 2 * best_fmas / best_dots;  // each vdpbf16ps is two multiply-adds a lane
}

}  // namespace

double cpu_bf16_dot_speedup() {
  static const double speedup =
      cpu_isa_emulated() || cpu_isa_supported() < CpuIsa::Avx512Bf16 ? 0.0 : measure_bf16_dot_speedup();
  return speedup;
}

CpuIsa cpu_isa_default() {
  const CpuIsa supported = cpu_isa_supported();
  if (supported != CpuIsa::Avx512Bf16 || cpu_isa_emulated()) return supported;
  return cpu_bf16_dot_speedup() >= kBf16DotsPay ? supported : CpuIsa::Avx512Vnni;
}

std::vector<CpuIsa> cpu_isas_supported() {
  std::vector<CpuIsa> levels;
  for (int i = 0; i <= static_cast<int>(cpu_isa_supported()); ++i) levels.push_back(static_cast<CpuIsa>(i));
  return levels;
}

CpuIsa cpu_isa() {
  int level = active_level.load(std::memory_order_relaxed);
  if (level == kUnset) {
    std::call_once(env_once, read_environment);
    level = active_level.load();
  }
  return static_cast<CpuIsa>(level);
}

void set_cpu_isa(CpuIsa isa) {
  check_supported(isa, "set_cpu_isa");
  std::call_once(env_once, [] {});  // an explicit choice wins over the environment
  active_level.store(static_cast<int>(isa));
}

}  // namespace weft
