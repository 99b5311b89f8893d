// The public op set. Each op checks its arguments (errors name the op), picks the result dtype,
// runs the kernel of the tensor's device (tensor/backend.h), and records its backward rule when
// an input requires grad. Binary ops broadcast like NumPy and promote like PyTorch; a double
// argument acts as a scalar that does not widen a floating tensor's dtype.
//
// Files: factories.cpp (creation, random), elementwise.cpp, reduce.cpp, linalg.cpp (matmul,
// linear), shape_ops.cpp (views, cat, stack, split, indexing), nn_functional.cpp (softmax,
// losses, dropout, embedding), sorting.cpp (sort, topk), scan.cpp (cumsum, tril/triu),
// sampling.cpp (multinomial), attention.cpp (scaled_dot_product_attention).
#pragma once

#include <optional>
#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace weft {

// ---- factories (tensor/factories.cpp) ----
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar_tensor(double value, TensorOptions options = {});
// Integer steps give int64 unless a dtype is given; any fractional argument gives the default dtype.
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {});
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
// Integers uniform in [low, high); int64 unless a dtype is given.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {},
               Generator* gen = nullptr);
Tensor randperm(int64_t n, Generator* gen = nullptr);
// Copies the values (converted to the options' dtype, default: T's dtype for integers, the
// default dtype for floating T).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
// Copies `data` (shape.numel() elements of `dtype`) into a new tensor.
Tensor from_buffer(const void* data, const Shape& shape, DType dtype);
// Wraps caller-owned memory without copying; the caller keeps it alive while the tensor lives.
Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device = kCPU);

// ---- elementwise (tensor/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, double b);
Tensor rsub(const Tensor& a, double b);  // b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor rdiv(const Tensor& a, double b);  // b / a
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, double b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// True when every element of a and b are within atol + rtol·|b| (NaNs equal when equal_nan).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);  // same shape and exactly the same values

// ---- reductions (tensor/reduce.cpp); empty dims = all dims ----
Tensor sum(const Tensor& x, Shape dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, Shape dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, Shape dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, Shape dims = {}, bool keepdim = false);
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction = 1 is Bessel's (unbiased) estimate, as PyTorch's default.
Tensor var(const Tensor& x, Shape dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, Shape dims = {}, int64_t correction = 1, bool keepdim = false);
// p-norm; p = infinity gives the max-abs norm.
Tensor norm(const Tensor& x, double p = 2.0, Shape dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, Shape dims, bool keepdim = false);
// Sums `x` down to `shape` (the inverse of broadcasting); used by backward rules.
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- sorting and selection (tensor/sorting.cpp) ----
// Values sorted along `dim` and the int64 positions they came from, as torch.sort. NaN sorts
// above every number; equal elements always keep their original order (`stable` or not).
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// As torch.topk: the k largest (smallest) along `dim` and their positions; ties go to the lower one.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// ---- scans and triangles (tensor/scan.cpp) ----
// Running sum along `dim`; integer and bool inputs sum in int64 unless a dtype is given.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// The lower (upper) triangle of the last two dims, the rest zero; `diagonal` shifts the edge
// (> 0 above the main diagonal), as torch.tril / torch.triu.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- sampling (tensor/sampling.cpp) ----
// Draws `num_samples` category indices (int64) per row of the non-negative weights `probs`
// ((C) or (N, C)), as torch.multinomial, never a zero weight; without replacement none repeats.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);

// ---- linear algebra (tensor/linalg.cpp) ----
// 1-D·1-D dot, 2-D·2-D, and batched with broadcast batch dims, as torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
// x: (*, in) · weight: (out, in)ᵀ + bias: (out) -> (*, out)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- shape and indexing (tensor/shape_ops.cpp) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x; out[index[i]] += src[i] along dim (the adjoint of index_select).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// out = x; out[..index..] += src (the adjoint of gather).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// ---- neural-network functions (tensor/nn_functional.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
enum class Reduction { None, Mean, Sum };
// logits: (N, C) or (N, C, d...); target: class indices (N) / (N, d...) as int64.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100, double label_smoothing = 0.0,
                     const Tensor& weight = Tensor());
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100, const Tensor& weight = Tensor());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);
// weight: (num_embeddings, dim), indices: any shape of int -> (*indices.shape, dim)
Tensor embedding(const Tensor& weight, const Tensor& indices);
// Normalises over the trailing dims given by normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Root-mean-square norm over the last dim as Hugging Face's Llama computes it (LlamaRMSNorm):
// in float32, x·rsqrt(mean(x²) + eps), rounded to x's dtype, times weight (the last dim's size).
// The result has the dtype of weight times x. Without a gradient to record, on the CPU, one fused
// pass with the same bits.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);

// ---- attention (tensor/attention.cpp) ----
// softmax(q·kᵀ·scale + mask)·v, as torch.nn.functional.scaled_dot_product_attention:
// q: (..., L, E), k: (..., S, E), v: (..., S, Ev) -> (..., L, Ev). `attn_mask` broadcasts to
// (..., L, S): a bool mask keeps the positions that are true, a float mask is added to the
// scores. `is_causal` keeps position j for query i when j <= i (top-left aligned). `scale`
// defaults to 1/√E. Dropout with probability `dropout_p` applies to the attention weights.
// `enable_gqa` lets k and v carry fewer heads (dim -3) than q, each shared by a group of q heads.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false, Generator* gen = nullptr);

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

// Broadcast shape of two shapes, as NumPy; `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace weft
