// Fabric's accelerator choice (fabric/accelerator.h).
#include "fabric/accelerator.h"

#include "tensor/cuda.h"
#include "tensor/error.h"

namespace weft::fabric {

std::string resolve_accelerator(const std::string& requested, bool cuda_built, bool cuda_available) {
  const bool wants_gpu = requested == "cuda" || requested == "gpu";
  WEFT_CHECK(wants_gpu || requested == "cpu" || requested == "auto",
             "[Fabric] expected accelerator 'cpu', 'cuda', 'gpu' or 'auto', got '", requested, "'");
  WEFT_CHECK(!wants_gpu || cuda_built, "[Fabric] accelerator '", requested, "' needs weft built with the CUDA "
             "backend; this build is CPU-only, use accelerator='cpu'");
  WEFT_CHECK(!wants_gpu || cuda_available, "[Fabric] accelerator '", requested, "' expected a CUDA GPU, got none: "
             "weft is built with CUDA but cuda::is_available() is false (no driver or no device visible); use "
             "accelerator='cpu' or 'auto'");
  return (wants_gpu || (requested == "auto" && cuda_available)) ? "cuda" : "cpu";
}

Device accelerator_device(const std::string& accelerator) {
  return accelerator == "cuda" ? Device(DeviceType::CUDA, cuda::current_device()) : Device(DeviceType::CPU);
}

}  // namespace weft::fabric
