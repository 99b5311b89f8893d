// cuda::Graph (Note [CUDA graphs] in tensor/cuda.h): a captured op sequence replayed on new static
// input gives what the same ops give eagerly; memory the graph reads stays its own; what a capture
// cannot hold (host reads, synchronisation, nesting, dropout) is refused by name and leaves the
// device, the streams and the Graph usable; replay before capture is refused. Without a GPU, the
// API fails with the build's or the machine's reason.
//
// The GPU cases are reported as skipped by doctest where there is none (and in a build without
// CUDA), as in tests/tensor/test_cuda.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tensor/all.h"
#include "cuda_test_helpers.h"
#include "error_message.h"

using namespace weft;
using test::check_close;
using test::kGpu;
using test::kNoGpu;

namespace {

std::string refused(const char* what, const char* why) {
  return std::string("[cuda graph] ") + what + " while a graph is being captured on cuda:0: " + why;
}

}  // namespace

TEST_CASE("cuda graph: without a GPU the API fails with the reason") {
  if (cuda::is_available()) return;  // this case is about machines without one
  CHECK_FALSE(cuda::is_current_stream_capturing());
  CHECK(error_of([] { cuda::Graph graph; }) ==
        (cuda::is_built() ? "[cuda] device 0 requested but 0 CUDA device(s) are visible"
                          : "[cuda] weft was built without CUDA (configure with -DWEFT_CUDA=ON)"));
}

TEST_CASE("cuda graph: a captured op sequence replayed on new input equals the eager ops" * doctest::skip(kNoGpu)) {
  Generator gen(1);
  const Tensor w = randn({5, 3}, {}, &gen).to(kGpu);
  Tensor x = zeros({4, 5}, kGpu);  // the static input
  Tensor y;                        // the static output, created by the captured step
  auto ops = [&](const Tensor& input) { return add(relu(matmul(input, w)), 1.0); };
  auto step = [&] { y = ops(x); };

  cuda::Graph graph;
  graph.warm_up(step);  // creates the cuBLAS handle outside the capture
  CHECK_FALSE(graph.is_captured());
  graph.capture(step);
  CHECK(graph.is_captured());
  CHECK_FALSE(cuda::is_current_stream_capturing());
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    const Tensor input = randn({4, 5}, {}, &gen).to(kGpu);
    x.copy_(input);
    graph.replay();
    check_close(y, ops(input), 1.3e-6, 1e-6);
  }
}

TEST_CASE("cuda graph: memory from before the capture that the step drops stays the graph's" * doctest::skip(kNoGpu)) {
  Tensor source = full({4096}, 2.0, kGpu);
  mul(source, 3.0);  // the warm-up: the kernel is loaded outside the capture
  Tensor out;
  cuda::Graph graph;
  // The only handle to `source` dies inside the capture; the graph still reads it on replay.
  graph.capture([&] {
    out = mul(source, 3.0);
    source = Tensor();
  });
  // Same-sized allocations would reuse the freed block if the allocator had released it.
  std::vector<Tensor> others;
  for (int i = 0; i < 4; ++i) others.push_back(full({4096}, 7.0, kGpu));
  graph.replay();
  check_close(out, full({4096}, 6.0), 0, 0);
}

TEST_CASE("cuda graph: host reads and waits are refused by name, and everything is usable after" *
          doctest::skip(kNoGpu)) {
  const Tensor x = ones({3}, kGpu);
  mul(x, 2.0).sum();  // the warm-up
  cuda::Graph graph;
  const char* host_waits = "the host would wait for work that is only being recorded; read results after replay()";
  CHECK(error_of([&] { graph.capture([&] { (void)mul(x, 2.0).sum().item<float>(); }); }) ==
        refused("a copy from a CUDA device to the CPU (item(), to_vector(), to(kCPU))", host_waits));
  CHECK_FALSE(graph.is_captured());
  CHECK_FALSE(cuda::is_current_stream_capturing());
  CHECK(error_of([&] { graph.capture([&] { mul(x, 2.0).to(kCPU); }); }) ==
        refused("a copy from a CUDA device to the CPU (item(), to_vector(), to(kCPU))", host_waits));
  CHECK(error_of([&] { graph.capture([] { cuda::synchronize(); }); }) ==
        refused("synchronize()",
                "the host would wait for work that is only being recorded; wait after replay()"));
  CHECK(error_of([&] { graph.capture([&] { Tensor(x).copy_(ones({3})); }); }) ==
        refused("a copy from the CPU to a CUDA device",
                "every replay would read host memory the step has already released; copy inputs into static "
                "device tensors (copy_ on the device) before replay()"));
  CHECK(error_of([&] { graph.capture([&] { dropout(x, 0.5, true); }); }) ==
        refused("dropout", "its random key is drawn on the host, so every replay would draw the same mask"));

  // The device, the current stream and the capture stream all still work.
  CHECK(mul(x, 3.0).sum().item<float>() == 9.0f);
  {
    cuda::StreamGuard on_side(graph.stream());
    CHECK(add(x, 1.0).to_vector<float>() == std::vector<float>{2, 2, 2});
  }
  cuda::synchronize();
  // And the same Graph captures a valid step afterwards.
  Tensor out;
  graph.capture([&] { out = mul(x, 4.0); });
  graph.replay();
  CHECK(out.to_vector<float>() == std::vector<float>{4, 4, 4});
}

TEST_CASE("cuda graph: replay before capture, a second capture and nesting are refused" * doctest::skip(kNoGpu)) {
  const Tensor x = ones({3}, kGpu);
  add(x, x);  // the warm-up
  cuda::Graph graph, inner;
  CHECK(error_of([&] { graph.replay(); }) ==
        "[cuda graph] replay() before capture(): this Graph has recorded nothing yet");
  CHECK(error_of([&] { graph.capture([&] { inner.capture([&] { mul(x, 2.0); }); }); }) ==
        "[cuda graph] capture() while this thread is already capturing a graph on cuda:0; captures do not nest");
  CHECK_FALSE(inner.is_captured());
  Tensor out;
  graph.capture([&] { out = add(x, x); });
  CHECK(error_of([&] { graph.capture([&] { out = add(x, x); }); }) ==
        "[cuda graph] capture() on a Graph that already holds a capture; a new shape or step needs a new Graph");
  graph.replay();
  graph.replay();
  CHECK(out.to_vector<float>() == std::vector<float>{2, 2, 2});
}
