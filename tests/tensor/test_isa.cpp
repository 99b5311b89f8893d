// Instruction-set detection and the active level (tensor/cpu/isa.h). The independent expectation
// for detection is the kernel's own reading of the CPU, the flags line of /proc/cpuinfo.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tensor/all.h"

using namespace weft;

namespace {

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

}  // namespace

TEST_CASE("CPU features agree with /proc/cpuinfo") {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) {
    MESSAGE("no /proc/cpuinfo flags line; detection not cross-checked");
    return;
  }
  const CpuFeatures& f = cpu_features();
  CHECK(f.avx2 == flags.count("avx2"));
  CHECK(f.fma == flags.count("fma"));
  CHECK(f.f16c == flags.count("f16c"));
  CHECK(f.avx512f == flags.count("avx512f"));
  CHECK(f.avx512bw == flags.count("avx512bw"));
  CHECK(f.avx512vl == flags.count("avx512vl"));
  CHECK(f.avx512dq == flags.count("avx512dq"));
  CHECK(f.avx512_vnni == flags.count("avx512_vnni"));
  CHECK(f.avx512_bf16 == flags.count("avx512_bf16"));
  CHECK(f.avx_vnni == flags.count("avx_vnni"));
  // AMX also needs the kernel's permission for this process: never claimed where Linux does not
  // list the flags, and reported when listed but refused.
  if (f.amx_tile) CHECK(flags.count("amx_tile"));
  if (f.amx_int8) CHECK(flags.count("amx_int8"));
  if (f.amx_bf16) CHECK(flags.count("amx_bf16"));
  if (flags.count("amx_tile") && !f.amx_tile) MESSAGE("the CPU lists AMX but Linux refused this process its tile state");
  const std::string level = std::string(cpu_isa_name(cpu_isa_supported())) +
                            (cpu_isa_emulated() ? " (AVX-512 emulated)" : "");
  MESSAGE("supported instruction set: " << level);
}

TEST_CASE("the supported level is the highest whose features are all present") {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  const bool amx = f.amx_tile && f.amx_int8 && f.amx_bf16;
  CpuIsa expected = !avx2 ? CpuIsa::Scalar
                    : !avx512 ? CpuIsa::Avx2
                    : !f.avx512_vnni ? CpuIsa::Avx512
                    : !f.avx512_bf16 ? CpuIsa::Avx512Vnni
                    : !amx ? CpuIsa::Avx512Bf16
                           : CpuIsa::Amx;
  if (cpu_isa_emulated() && avx2 && expected < CpuIsa::Avx512Bf16) expected = CpuIsa::Avx512Bf16;
  CHECK(cpu_isa_supported() == expected);
  const auto levels = cpu_isas_supported();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == CpuIsa::Scalar);
  CHECK(levels.back() == expected);
  CHECK(levels.size() == static_cast<size_t>(expected) + 1);
}

TEST_CASE("the default level drops AVX-512 BF16 only where its dot products are slower than FMAs") {
  // Note [Where BF16 dot products pay]: Zen 4 issues vdpbf16ps as fast as FMAs (speedup ~2), the
  // Sapphire / Emerald Rapids cores at half their pace (~0.5). A figure far outside both would
  // mean the loops measured something else (a chain dropped, a loop folded away).
  const CpuIsa supported = cpu_isa_supported();
  const double speedup = cpu_bf16_dot_speedup();
  CHECK(cpu_bf16_dot_speedup() == speedup);  // measured once
  if (supported < CpuIsa::Avx512Bf16 || cpu_isa_emulated()) {
    CHECK(speedup == 0.0);
    CHECK(cpu_isa_default() == supported);
    return;
  }
  MESSAGE("vdpbf16ps does " << speedup << "x the multiply-adds per second of vfmadd231ps");
  CHECK(speedup > 0.2);
  CHECK(speedup < 5.0);
  const CpuIsa expected = supported == CpuIsa::Avx512Bf16 && speedup < 4.0 / 3.0 ? CpuIsa::Avx512Vnni : supported;
  CHECK(cpu_isa_default() == expected);
  if (!std::getenv("WEFT_CPU_ISA")) CHECK(cpu_isa() == expected);  // where the level started (every guard restores it)
}

TEST_CASE("names parse back and bad names are refused with the list") {
  for (CpuIsa isa :
       {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Vnni, CpuIsa::Avx512Bf16, CpuIsa::Amx})
    CHECK(cpu_isa_from_name(cpu_isa_name(isa)) == isa);
  CHECK(cpu_isa_name(CpuIsa::Avx512Vnni) == "avx512_vnni");
  CHECK(cpu_isa_name(CpuIsa::Amx) == "amx");
  CHECK_THROWS_WITH_AS(cpu_isa_from_name("sse9"),
                       "[cpu_isa] expected one of scalar, avx2, avx512, avx512_vnni, avx512_bf16, amx, got 'sse9'",
                       Error);
}

TEST_CASE("the active level can be lowered, restored, and never raised above the CPU") {
  const CpuIsa before = cpu_isa();
  {
    CpuIsaGuard guard(CpuIsa::Scalar);
    CHECK(cpu_isa() == CpuIsa::Scalar);
  }
  CHECK(cpu_isa() == before);
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CHECK(cpu_isa() == isa);
  }
  if (cpu_isa_supported() != CpuIsa::Amx) {
    const auto above = static_cast<CpuIsa>(static_cast<int>(cpu_isa_supported()) + 1);
    CHECK_THROWS_WITH_AS(set_cpu_isa(above),
                         doctest::Contains("this CPU supports instruction sets up to"), Error);
    CHECK(cpu_isa() == before);
  }
}

// Run by CTest with WEFT_CPU_ISA set (tests/CMakeLists.txt: isa_env_scalar, isa_env_bogus); in
// the plain run the variable is unset and the environment is not consulted at all.
TEST_CASE("WEFT_CPU_ISA sets the starting level, and a bad value is an error at first use") {
  const char* env = std::getenv("WEFT_CPU_ISA");
  if (!env) return;
  const std::string value = env;
  if (value == "scalar") {
    CHECK(cpu_isa() == CpuIsa::Scalar);
  } else {
    CHECK_THROWS_WITH_AS(cpu_isa(), doctest::Contains(("got '" + value + "'").c_str()), Error);
    CHECK_THROWS_AS(cpu_isa(), Error);  // stays an error, not a silent default
  }
}
