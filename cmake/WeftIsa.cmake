# Per-instruction-set compile flags for CPU kernel units (Note [ISA kernel units], tensor/cpu/simd.h).
#
# A source named <name>_<isa>.cpp is compiled with that instruction set's flags and nothing else is,
# so one build runs on every x86-64 CPU and picks its kernels at run time (tensor/cpu/isa.h).
# With WEFT_SIMD_EMULATION the AVX-512 units are compiled for AVX2 with SIMDe's portable
# intrinsics instead, which lets a machine without AVX-512 run and test their logic. AMX units are
# always compiled for the real instructions (SIMDe has no tiles); they run only where the CPU has AMX.
set(WEFT_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c)
set(WEFT_ISA_FLAGS_avx512 ${WEFT_ISA_FLAGS_avx2} -mavx512f -mavx512bw -mavx512vl -mavx512dq)
set(WEFT_ISA_FLAGS_avx512vnni ${WEFT_ISA_FLAGS_avx512} -mavx512vnni)
set(WEFT_ISA_FLAGS_avx512bf16 ${WEFT_ISA_FLAGS_avx512vnni} -mavx512bf16)
set(WEFT_ISA_FLAGS_amx ${WEFT_ISA_FLAGS_avx512bf16} -mamx-tile -mamx-int8 -mamx-bf16)

# Sets the compile flags of every ISA kernel unit among `sources` (absolute or relative paths).
function(weft_apply_isa_flags)
  foreach(source ${ARGN})
    if(source MATCHES "_(avx2|avx512|avx512vnni|avx512bf16|amx)\\.cpp$")
      set(isa ${CMAKE_MATCH_1})
      if(WEFT_SIMD_EMULATION AND isa MATCHES "^avx512")
        set(flags ${WEFT_ISA_FLAGS_avx2} -DWEFT_SIMD_EMULATE_UNIT -Wno-psabi)
      else()
        set(flags ${WEFT_ISA_FLAGS_${isa}})
      endif()
      # No interprocedural optimisation across instruction sets: it would move AVX-512 code into
      # callers that run on any CPU.
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS "${flags};-fno-lto")
    endif()
  endforeach()
endfunction()
