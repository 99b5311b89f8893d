# The CUDA build of weft (-DWEFT_CUDA=ON): nvcc, the CUDA runtime, cuBLAS, cuBLASLt and NCCL from the
# toolkit (/usr/local/cuda), linked shared (libcublasLt alone is half a gigabyte).
#
# WEFT_CUDA_ARCHITECTURES lists the GPUs the kernels are compiled for (CMake's CUDA_ARCHITECTURES
# syntax). The default, 80;90, gives machine code and PTX for the A100 (sm_80) and the H100/H200
# (sm_90); newer GPUs run the sm_90 PTX. Each architecture costs a full compile of every .cu file,
# so CI and development builds pass just 90. Features of sm_89 and later (FP8 tensor cores) are
# chosen at run time from the device's compute capability, never by #if on the architecture.
# "native" is refused: it fails to configure on a machine without a GPU, which is where CI runs.
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "weft: WEFT_CUDA=ON but no CUDA compiler was found; put nvcc on PATH or pass "
                      "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
endif()
set(WEFT_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures the CUDA kernels are compiled for")
if(WEFT_CUDA_ARCHITECTURES MATCHES "native|all")
  message(FATAL_ERROR "weft: WEFT_CUDA_ARCHITECTURES=${WEFT_CUDA_ARCHITECTURES} is not supported; list the "
                      "architectures, e.g. 90 (H100) or 80;90")
endif()
set(CMAKE_CUDA_ARCHITECTURES ${WEFT_CUDA_ARCHITECTURES})
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
message(STATUS "weft: CUDA ${CUDAToolkit_VERSION}, kernels for ${WEFT_CUDA_ARCHITECTURES}")
# NCCL, the GPU collectives of distributed/, ships beside the toolkit's libraries.
find_library(WEFT_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)

# CMake 3.25 knows no nvcc flag for C++20 and fails to generate a target with CUDA sources and
# C++20 ("requires the language dialect CUDA20"); nvcc 13 takes -std=c++20, so CMake is told.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")

# The .cu kernels form an object library of their own, added to `target`. -lineinfo lets compute-sanitizer name source lines. No --use_fast_math: expf must stay expf for
# CPU-equal results.
function(weft_link_cuda target)
  add_library(${target}_cuda_kernels OBJECT ${ARGN})
  target_compile_options(${target}_cuda_kernels PRIVATE -lineinfo --expt-relaxed-constexpr)
  target_include_directories(${target}_cuda_kernels PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(${target}_cuda_kernels PROPERTIES CUDA_ARCHITECTURES "${WEFT_CUDA_ARCHITECTURES}"
                                                          POSITION_INDEPENDENT_CODE ON CUDA_STANDARD 20)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:${target}_cuda_kernels>)
  target_link_libraries(${target} PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt)
endfunction()
