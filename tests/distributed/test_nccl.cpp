// The NCCL backend. NCCL refuses two ranks on one GPU, so on a one-GPU machine the group has one
// rank: every collective in every dtype it reduces runs on GPU tensors and must hand back its
// closed form (at one rank: the input itself, the gathered copy, the root's value), reading what
// the caller's stream wrote just before and seen by what it queues just after. A group of two
// whose second rank never comes must fail within its timeout instead of hanging. Without a GPU
// (and in a build without CUDA) those cases are skipped and the refusal itself is checked.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cuda_test_helpers.h"
#include "error_message.h"
#include "temp_dir.h"
#include "distributed/all.h"

using namespace weft;
using distributed::ReduceOp;
using test::check_close;
using test::kGpu;
using test::kNoGpu;

namespace {

// A group of `world_size` whose rank 0 is this process, meeting in a file store in `folder`.
std::shared_ptr<distributed::ProcessGroup> nccl_group(const test::TempDir& folder, int world_size,
                                                       std::chrono::milliseconds timeout) {
  distributed::InitOptions o;
  o.backend = "nccl";
  o.init_method = "file://" + folder.path().string();
  o.rank = 0;
  o.world_size = world_size;
  o.timeout = timeout;
  return distributed::init_process_group(o);
}

}  // namespace

// On a machine with a GPU the cases below take its place.
TEST_CASE("NCCL is refused with the reason where it cannot run" * doctest::skip(!kNoGpu)) {
  test::TempDir folder;
  const std::string message = error_of([&] { nccl_group(folder, 1, std::chrono::seconds(5)); });
  CAPTURE(message);
  // A build without CUDA names the build option; a CUDA build on a machine without a GPU names
  // the GPU it looked for.
  CHECK((message.find("-DWEFT_CUDA=ON") != std::string::npos ||
         message.find("backend 'nccl' needs GPU 0") != std::string::npos));
}

TEST_CASE("NCCL at one rank: every collective and dtype on GPU tensors gives its closed form" * doctest::skip(kNoGpu)) {
  test::TempDir folder;
  auto pg = nccl_group(folder, 1, std::chrono::seconds(60));
  CHECK(pg->backend_name() == "nccl");
  CHECK(pg->device() == kGpu);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64}) {
    for (int64_t count : {int64_t{1}, int64_t{13}, int64_t{1'000'003}}) {
      CAPTURE(dtype);
      CAPTURE(count);
      // Values written by a kernel on the caller's stream just before the collective: the
      // communication stream must wait for it.
      std::vector<double> values(static_cast<size_t>(count));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 7) - 3;
      const Tensor host = from_vector(values, {count}, dtype);
      const Tensor expected = host;
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg}) {
        if (op == ReduceOp::Avg && !is_floating(dtype)) continue;
        Tensor x = host.to(kGpu) + zeros({count}, TensorOptions(dtype).device(kGpu));
        pg->all_reduce(x, op)->wait();
        // The copy back is queued after wait(), so it reads the reduced values.
        check_close(x.to(kCPU), expected, 0, 0);
      }
      Tensor gathered = full({count}, -1.0, TensorOptions(dtype).device(kGpu));
      pg->all_gather(gathered, host.to(kGpu))->wait();
      check_close(gathered.to(kCPU), expected, 0, 0);

      Tensor scattered = full({count}, -1.0, TensorOptions(dtype).device(kGpu));
      pg->reduce_scatter(scattered, host.to(kGpu), ReduceOp::Sum)->wait();
      check_close(scattered.to(kCPU), expected, 0, 0);

      Tensor b = host.to(kGpu);
      pg->broadcast(b, 0)->wait();
      check_close(b.to(kCPU), expected, 0, 0);
    }
  }
  pg->barrier()->wait();

  // Several collectives in flight complete with their own values.
  std::vector<Tensor> xs;
  std::vector<std::shared_ptr<distributed::Work>> works;
  for (int i = 0; i < 8; ++i) {
    xs.push_back(full({5}, static_cast<double>(i), kGpu));
    works.push_back(pg->all_reduce(xs.back(), ReduceOp::Sum));
  }
  for (int i = 0; i < 8; ++i) {
    works[static_cast<size_t>(i)]->wait();
    CHECK(works[static_cast<size_t>(i)]->is_completed());
    check_close(xs[static_cast<size_t>(i)].to(kCPU), full({5}, static_cast<double>(i)), 0, 0);
  }

  // A CPU tensor is refused by name before anything is sent.
  const std::string message = error_of([&] { pg->all_reduce(full({3}, 1.0), ReduceOp::Sum); });
  CHECK(message.find("expected the tensor on cuda") != std::string::npos);
}

TEST_CASE("NCCL: a group whose other rank never joins fails within its timeout" * doctest::skip(kNoGpu)) {
  test::TempDir folder;
  const auto start = std::chrono::steady_clock::now();
  // Whether NCCL notices at initialisation or at the first collective, the caller gets an error.
  const std::string message = error_of([&] { nccl_group(folder, 2, std::chrono::seconds(3))->barrier()->wait(); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CAPTURE(message);
  CAPTURE(seconds);
  CHECK((message.find("ncclCommInitRankConfig did not finish within 3000 ms") != std::string::npos ||
         message.find("[barrier]") != std::string::npos));
  CHECK(seconds < 30);
}
