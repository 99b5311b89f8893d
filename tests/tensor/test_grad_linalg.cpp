// Finite-difference gradient checks of matmul (every rank combination torch.matmul accepts,
// broadcast batch dims) and linear; gradcheck repeats each with non-contiguous leaves.
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace weft;
using testing::arg;
using testing::gradcheck;
using Inputs = std::vector<Tensor>;

namespace {

Tensor mm(const Inputs& in) { return matmul(in[0], in[1]); }

}  // namespace

TEST_CASE("grad: matmul of vectors and matrices") {
  gradcheck(mm, {arg({4}, 1), arg({4}, 2)});        // dot: () output
  gradcheck(mm, {arg({3}, 3), arg({3, 2}, 4)});     // vector · matrix
  gradcheck(mm, {arg({2, 3}, 5), arg({3}, 6)});     // matrix · vector
  gradcheck(mm, {arg({2, 3}, 7), arg({3, 4}, 8)});  // matrix · matrix
  gradcheck([](const Inputs& in) { return in[0].matmul(in[1].t()); }, {arg({2, 3}, 9), arg({4, 3}, 10)});
}

TEST_CASE("grad: batched matmul with broadcast batch dims") {
  gradcheck(mm, {arg({2, 2, 3}, 11), arg({2, 3, 4}, 12)});     // equal batches
  gradcheck(mm, {arg({2, 2, 3}, 13), arg({3, 4}, 14)});        // matrix broadcast over a batch
  gradcheck(mm, {arg({2, 3}, 15), arg({3, 3, 2}, 16)});        // the other side
  gradcheck(mm, {arg({2, 1, 2, 3}, 17), arg({3, 3, 2}, 18)});  // (2, 1) with (3): batch (2, 3)
  gradcheck(mm, {arg({1, 2, 3}, 19), arg({2, 3, 2}, 20)});     // a size-1 batch dim broadcast
  gradcheck(mm, {arg({2, 2, 3}, 21), arg({3}, 22)});           // batched · vector
  gradcheck(mm, {arg({3}, 23), arg({2, 3, 2}, 24)});           // vector · batched
}

TEST_CASE("grad: matmul with one operand that does not require grad") {
  gradcheck(mm, {arg({2, 3}, 25), testing::uniform({3, 2}, -1, 1, 26)});
  gradcheck(mm, {testing::uniform({2, 2, 3}, -1, 1, 27), arg({3, 2}, 28)});
}

TEST_CASE("grad: linear with and without bias") {
  gradcheck([](const Inputs& in) { return linear(in[0], in[1]); }, {arg({2, 3}, 29), arg({4, 3}, 30)});
  gradcheck([](const Inputs& in) { return linear(in[0], in[1], in[2]); },
            {arg({2, 3}, 31), arg({4, 3}, 32), arg({4}, 33)});
  gradcheck([](const Inputs& in) { return linear(in[0], in[1], in[2]); },
            {arg({2, 2, 3}, 34), arg({4, 3}, 35), arg({4}, 36)});  // (*, in) input
  gradcheck([](const Inputs& in) { return linear(in[0], in[1], in[2]); },
            {arg({3}, 37), arg({2, 3}, 38), arg({2}, 39)});  // a single sample
}
