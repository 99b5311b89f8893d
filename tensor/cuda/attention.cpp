// The CUDA kernels of the fused attention (tensor/attention_kernels.h): each makes its operands
// contiguous (the kernels read dense rows; the front end's views are usually transposed), fills
// the plain arguments of tensor/cuda/attention_launch.h and queues the kernels on the current
// stream of the tensors' device. Outputs the front end laid out otherwise are computed densely
// and copied into place.
#include "tensor/attention_kernels.h"
#include "tensor/cuda/attention_launch.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"
#include "tensor/op_helpers.h"

namespace weft::detail {
namespace {

using cuda::detail::AttentionArgs;
using cuda::detail::DeviceGuard;
using cuda::detail::stream_for;

const char* cptr(const Tensor& t) { return t.defined() ? static_cast<const char*>(t.data_ptr()) : nullptr; }
char* ptr(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

// A dense tensor to write into, standing in for `t` when t is not contiguous.
Tensor dense_like(const Tensor& t) {
  return t.is_contiguous() ? t : make_tensor(t.shape(), t.dtype(), t.device());
}

void copy_back(const Tensor& dense, const Tensor& t) {
  if (dense.data_ptr() != t.data_ptr() || !t.is_contiguous()) backend(t.device()).copy(dense, t);
}

AttentionArgs args_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
                      bool causal, double dropout_p, uint64_t key) {
  AttentionArgs a{};
  a.q = cptr(q);
  a.k = cptr(k);
  a.v = cptr(v);
  a.mask = cptr(mask);
  a.dtype = q.dtype();
  a.mask_dtype = mask.defined() ? mask.dtype() : DType::Bool;
  a.batch = q.size(0);
  a.heads_q = q.size(1);
  a.heads_k = k.size(1);
  a.L = q.size(2);
  a.S = k.size(2);
  a.E = q.size(3);
  a.Ev = v.size(3);
  a.scale = static_cast<float>(scale);
  a.causal = causal;
  a.keep = static_cast<float>(1.0 - dropout_p);
  a.key = key;
  return a;
}

void check_plan(const cuda::detail::AttentionPlan& plan, int64_t E, int64_t Ev) {
  WEFT_CHECK(plan.shared_bytes <= cuda::detail::kAttentionSharedLimit,
             "[scaled_dot_product_attention] the CUDA kernel takes head sizes whose tiles fit ",
             cuda::detail::kAttentionSharedLimit, " bytes of shared memory, got E = ", E, " and Ev = ", Ev);
}

void forward(const AttentionForward& f) {
  cuda::detail::refuse_during_capture("scaled_dot_product_attention",
                                      "its dropout key is drawn on the host, so every replay would draw the same mask");
  DeviceGuard guard(f.q.device().index);
  const Tensor q = f.q.contiguous(), k = f.k.contiguous(), v = f.v.contiguous();
  const Tensor mask = f.mask.defined() ? f.mask.contiguous() : Tensor();
  check_plan(cuda::detail::attention_forward_plan(q.size(0) * q.size(1), q.size(2), q.size(3), v.size(3)), q.size(3),
             v.size(3));
  const Tensor out = dense_like(f.out);
  AttentionArgs a = args_of(q, k, v, mask, f.scale, f.is_causal, f.dropout_p, f.dropout_key);
  a.out = ptr(out);
  a.lse = static_cast<float*>(f.lse.data_ptr());
  cuda::detail::launch_attention_forward(a, stream_for(q));
  copy_back(out, f.out);
}

void backward(const AttentionBackward& b) {
  DeviceGuard guard(b.q.device().index);
  const Tensor q = b.q.contiguous(), k = b.k.contiguous(), v = b.v.contiguous();
  const Tensor mask = b.mask.defined() ? b.mask.contiguous() : Tensor();
  const Tensor out = b.out.contiguous(), grad_out = b.grad_out.contiguous();
  check_plan(cuda::detail::attention_backward_plan(k.size(0) * k.size(1), k.size(2), k.size(3), v.size(3)),
             k.size(3), v.size(3));
  const Tensor d = make_tensor({q.size(0), q.size(1), q.size(2)}, kFloat32, q.device());
  const Tensor grad_q = make_tensor(q.shape(), kFloat32, q.device());
  backend(q.device()).fill(grad_q, 0.0);
  const Tensor grad_k = dense_like(b.grad_k), grad_v = dense_like(b.grad_v);
  AttentionArgs a = args_of(q, k, v, mask, b.scale, b.is_causal, b.dropout_p, b.dropout_key);
  a.out = const_cast<char*>(cptr(out));
  a.lse = const_cast<float*>(static_cast<const float*>(b.lse.data_ptr()));
  a.grad_out = cptr(grad_out);
  a.d = static_cast<float*>(d.data_ptr());
  a.grad_q = static_cast<float*>(grad_q.data_ptr());
  a.grad_k = ptr(grad_k);
  a.grad_v = ptr(grad_v);
  cuda::detail::launch_attention_backward(a, stream_for(q));
  backend(q.device()).copy(grad_q, b.grad_q);
  copy_back(grad_k, b.grad_k);
  copy_back(grad_v, b.grad_v);
}

}  // namespace

AttentionForwardKernel* const cuda_attention_forward = &forward;
AttentionBackwardKernel* const cuda_attention_backward = &backward;

}  // namespace weft::detail
