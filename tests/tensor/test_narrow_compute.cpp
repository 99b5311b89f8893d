// Narrow floating tensors (float16, bfloat16, float8) compute in float32 and round once on store:
// every result equals the float32 computation of the widened inputs, encoded with
// tensor/float_formats.h (whose encoders test_float_formats.cpp checks against the spec).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "tensor/all.h"

using namespace weft;

namespace {

struct Narrow {
  DType dtype;
  std::function<float(float)> round;  // float32 -> this format -> float32
};

const Narrow kHalf{kFloat16, [](float f) { return half_to_float(float_to_half(f)); }};
const Narrow kBF16{kBFloat16, [](float f) { return bfloat16_to_float(float_to_bfloat16(f)); }};

// Values already representable in the format, with a spread of magnitudes and signs.
std::vector<float> representable(const Narrow& n, uint64_t seed, int count) {
  Generator g(seed);
  std::vector<float> v;
  for (int i = 0; i < count; ++i) {
    const double mag = std::exp2(static_cast<double>(g.below(16)) - 8.0);
    v.push_back(n.round(static_cast<float>((g.uniform() * 2 - 1) * mag)));
  }
  return v;
}

// Runs `op` on tensors of format n and checks each element against round(f(a, b)) in float32.
void check_binary(const Narrow& n, const std::function<Tensor(const Tensor&, const Tensor&)>& op,
                  const std::function<float(float, float)>& f) {
  const auto a = representable(n, 1, 257), b = representable(n, 2, 257);
  const Tensor ta = from_vector(a, {257}, n.dtype), tb = from_vector(b, {257}, n.dtype);
  REQUIRE(ta.to_vector<float>() == a);  // the inputs really are exact in the format
  const Tensor r = op(ta, tb);
  CHECK(r.dtype() == n.dtype);
  const auto got = r.to_vector<float>();
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = n.round(f(a[i], b[i]));
    const bool ok = std::isnan(want) ? std::isnan(got[i]) : got[i] == want;
    if (!ok && failures++ < 3) FAIL_CHECK(a[i] << ", " << b[i] << " gave " << got[i] << ", expected " << want);
  }
  CHECK(failures == 0);
}

void check_unary(const Narrow& n, const std::function<Tensor(const Tensor&)>& op, const std::function<float(float)>& f) {
  const auto a = representable(n, 3, 257);
  const Tensor r = op(from_vector(a, {257}, n.dtype));
  CHECK(r.dtype() == n.dtype);
  const auto got = r.to_vector<float>();
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = n.round(f(a[i]));
    const bool ok = std::isnan(want) ? std::isnan(got[i]) : got[i] == want;
    if (!ok && failures++ < 3) FAIL_CHECK(a[i] << " gave " << got[i] << ", expected " << want);
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("float16 and bfloat16 arithmetic is float32 arithmetic rounded once") {
  for (const Narrow* n : {&kHalf, &kBF16}) {
    CAPTURE(n->dtype);
    check_binary(*n, [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](float a, float b) { return a + b; });
    check_binary(*n, [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](float a, float b) { return a - b; });
    check_binary(*n, [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](float a, float b) { return a * b; });
    check_binary(*n, [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](float a, float b) { return a / b; });
    check_binary(*n, [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
                 [](float a, float b) { return std::fmax(a, b); });
    check_binary(*n, [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); },
                 [](float a, float b) { return a + b * 0.5f; });
    check_unary(*n, [](const Tensor& x) { return exp(x); }, [](float x) { return std::exp(x); });
    check_unary(*n, [](const Tensor& x) { return tanh(x); }, [](float x) { return std::tanh(x); });
    check_unary(*n, [](const Tensor& x) { return sqrt(abs(x)); }, [](float x) { return std::sqrt(std::fabs(x)); });
    check_unary(*n, [](const Tensor& x) { return mul(x, 3.0); }, [](float x) { return x * 3.0f; });
    check_unary(*n, [](const Tensor& x) { return relu(x); }, [](float x) { return x > 0 ? x : 0.0f; });
  }
}

TEST_CASE("bf16 add equals float_to_bfloat16(a + b), and each op rounds on its own store") {
  const float a = 1.0f, b = std::ldexp(1.0f, -8), c = std::ldexp(1.0f, -8);  // b, c: half an ulp of 1 each
  const Tensor ta = tensor({a}, kBFloat16), tb = tensor({b}, kBFloat16), tc = tensor({c}, kBFloat16);
  CHECK(add(ta, tb).to_vector<BFloat16>()[0].bits == float_to_bfloat16(a + b));
  CHECK(add(ta, tb).item<float>() == 1.0f);                        // the tie rounds to the even 1.0
  CHECK(add(add(ta, tb), tc).item<float>() == 1.0f);               // twice
  CHECK(add(ta, add(tb, tc)).item<float>() == 1.0f + 2 * b);       // b + c is exact, then one ulp
  // fp16: (1 + 2^-10)² = 1 + 2^-9 + 2^-20 is exact in float32 and rounds to 1 + 2^-9 on store.
  const Tensor h = tensor({1.0 + std::ldexp(1.0, -10)}, kFloat16);
  CHECK(mul(h, h).item<float>() == 1.0f + std::ldexp(1.0f, -9));
}

TEST_CASE("reductions and matmul in narrow formats accumulate wide and round once") {
  // Integers up to 256 are exact in bf16; their sum (1 + ... + 64 = 2080) is not (bf16 step 16).
  const Tensor x = arange(1, 65, 1, kBFloat16);
  CHECK(x.dtype() == kBFloat16);
  CHECK(sum(x).dtype() == kBFloat16);
  CHECK(sum(x).item<float>() == bfloat16_to_float(float_to_bfloat16(2080.0f)));
  CHECK(sum(x).item<float>() == 2080.0f);  // 2080 = 130 · 16 happens to be representable
  CHECK(sum(arange(1, 66, 1, kBFloat16)).item<float>() == bfloat16_to_float(float_to_bfloat16(2145.0f)));
  // A bf16-only accumulation would stall: 256 + 1 = 256 in bf16. Wide accumulation does not.
  CHECK(sum(ones({1000}, kBFloat16)).item<float>() == 1000.0f);
  CHECK(mean(ones({1000}, kFloat16)).item<float>() == 1.0f);
  // matmul: (1, 300) · (300, 1) of ones = 300, exact only with a wide accumulator.
  CHECK(matmul(ones({1, 300}, kBFloat16), ones({300, 1}, kBFloat16)).item<float>() == 300.0f);
  const Tensor m = tensor({1, 2, 3, 4}, kFloat16).view({2, 2});
  CHECK(matmul(m, m).dtype() == kFloat16);
  CHECK(matmul(m, m).to_vector<float>() == std::vector<float>{7, 10, 15, 22});
  CHECK(amax(tensor({1.5, -3.0, 2.25}, kFloat16)).item<float>() == 2.25f);
  CHECK(softmax(tensor({0.0, 0.0}, kBFloat16), 0).to_vector<float>() == std::vector<float>{0.5f, 0.5f});
}

TEST_CASE("narrow products of transposed, offset and sliced views are exact on small integers") {
  // A float16 operand is widened to float32 in its memory's order when its elements are dense in
  // some order (a transposed view, with or without an offset), else in its logical order (a
  // column slice); bfloat16 likewise on levels without AVX-512 BF16. Small integers keep every
  // product and sum exact (|sum| <= 40 · 4 < 256), so the expectation is a plain triple loop over
  // the values, whatever order the GEMM adds in.
  manual_seed(41);
  const Tensor big = randint(-2, 3, {40, 33}).to(kFloat16);
  const Tensor x33 = randint(-2, 3, {7, 33}).to(kFloat16), x40 = randint(-2, 3, {7, 40}).to(kFloat16);
  auto expected = [](const Tensor& a, const Tensor& b) {
    const std::vector<float> av = a.contiguous().to_vector<float>(), bv = b.contiguous().to_vector<float>();
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    std::vector<float> c(static_cast<size_t>(m * n), 0.0f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t l = 0; l < k; ++l) c[i * n + j] += av[i * k + l] * bv[l * n + j];
    return c;
  };
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    for (const DType dtype : {kFloat16, kBFloat16}) {
      CAPTURE(dtype);
      const Tensor w = big.to(dtype), a33 = x33.to(dtype), a40 = x40.to(dtype);
      const Tensor transposed = w.t(), offset = w.narrow(0, 3, 30).t(), columns = w.narrow(1, 5, 20);
      CHECK(matmul(a33, transposed).to_vector<float>() == expected(a33, transposed));
      CHECK(matmul(a33, offset).to_vector<float>() == expected(a33, offset));
      CHECK(matmul(a40, columns).to_vector<float>() == expected(a40, columns));
      CHECK(matmul(offset.t(), transposed).to_vector<float>() == expected(offset.t(), transposed));
    }
  }
}

TEST_CASE("float8 tensors compute in float32 and store with saturation") {
  const Tensor a = tensor({448.0, 1.0, -448.0}, kFloat8E4M3FN);
  const Tensor s = add(a, a);
  CHECK(s.dtype() == kFloat8E4M3FN);
  CHECK(s.to_vector<float>() == std::vector<float>{448.0f, 2.0f, -448.0f});  // satfinite
  const Tensor e = tensor({57344.0, 0.25}, kFloat8E5M2);
  CHECK(mul(e, 2.0).to_vector<float>() == std::vector<float>{57344.0f, 0.5f});
  CHECK(add(tensor({1.0}, kFloat8E4M3FN), tensor({0.0625}, kFloat8E4M3FN)).item<float>() == 1.0f);  // 1.0625: tie to even
  CHECK(add(tensor({1.0}, kFloat8E4M3FN), tensor({0.125}, kFloat8E4M3FN)).item<float>() == 1.125f);
}

TEST_CASE("narrow with float32 promotes to float32 and is exact") {
  const Tensor r = add(tensor({1.0}, kBFloat16), tensor({std::ldexp(1.0, -20)}));
  CHECK(r.dtype() == kFloat32);
  CHECK(r.item<float>() == 1.0f + std::ldexp(1.0f, -20));
  CHECK(eq(tensor({0.1}, kFloat16), tensor({0.1}, kFloat16)).item<bool>());
  CHECK_FALSE(eq(tensor({0.1}, kFloat16), tensor({0.1})).item<bool>());  // 0.1 rounds differently in fp16
}
