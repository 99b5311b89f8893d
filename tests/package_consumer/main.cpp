// Builds against the installed headers and the core library only (weft::weft, or pkg-config's
// weft) and checks one real computation, and that asking Fabric for a multi-process strategy
// without weft_distributed says what to link.
#include <weft.h>

#include <string>

int main() {
  using namespace weft;
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = mul(x, x).sum();
  y.backward();
  // d/dx Σx² = 2x = (2, 4, 6)
  if (x.grad().to_vector<double>() != std::vector<double>{2, 4, 6}) return 1;
  try {
    fabric::Fabric f({.devices = 2, .strategy = "ddp"});
  } catch (const Error& e) {
    return std::string(e.what()) == "[Fabric] strategy 'ddp' needs weft_distributed: link weft::distributed (CMake: "
                                    "target_link_libraries(... weft::distributed); pkg-config: weft-distributed)"
               ? 0
               : 2;
  }
  return 3;
}
