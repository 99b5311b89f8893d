// Builds against the installed headers and library and checks one real computation.
#include <weft.h>

int main() {
  using namespace weft;
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = mul(x, x).sum();
  y.backward();
  // d/dx Σx² = 2x = (2, 4, 6)
  return x.grad().to_vector<double>() == std::vector<double>{2, 4, 6} ? 0 : 1;
}
