// DistributedSampler: the ranks' shares are disjoint but for the padding, equally long, cover the
// dataset, change with the epoch, and follow PyTorch's padding and drop_last rules.
#include <doctest/doctest.h>

#include <set>

#include "distributed/all.h"

using namespace weft;
using distributed::DistributedSampler;

TEST_CASE("the shares of all ranks cover the dataset, padded by repeating its start") {
  for (int64_t size : {0, 1, 7, 10, 12}) {
    for (int world : {1, 2, 3, 4}) {
      CAPTURE(size);
      CAPTURE(world);
      std::multiset<int64_t> seen;
      int64_t per_rank = -1;
      for (int r = 0; r < world; ++r) {
        const DistributedSampler sampler(size, world, r, {.shuffle = false});
        const auto idx = sampler.indices().to_vector<int64_t>();
        CHECK(static_cast<int64_t>(idx.size()) == sampler.num_samples());
        if (per_rank >= 0) CHECK(static_cast<int64_t>(idx.size()) == per_rank);
        per_rank = static_cast<int64_t>(idx.size());
        // Without shuffling, rank r takes r, r + world, r + 2·world, ... of the padded order.
        for (size_t i = 0; i < idx.size(); ++i)
          CHECK(idx[i] == (r + static_cast<int64_t>(i) * world) % std::max<int64_t>(size, 1));
        seen.insert(idx.begin(), idx.end());
      }
      CHECK(per_rank == (size + world - 1) / world);
      for (int64_t i = 0; i < size; ++i) CHECK(seen.count(i) >= 1);
      CHECK(static_cast<int64_t>(seen.size()) == per_rank * world);
    }
  }
}

TEST_CASE("drop_last cuts the tail instead of padding") {
  std::set<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    const DistributedSampler sampler(10, 3, r, {.shuffle = false, .drop_last = true});
    CHECK(sampler.num_samples() == 3);
    for (int64_t i : sampler.indices().to_vector<int64_t>()) CHECK(seen.insert(i).second);  // disjoint
  }
  CHECK(seen.size() == 9);
}

TEST_CASE("shuffling is the same on every rank for an epoch, and another epoch reorders") {
  std::set<int64_t> epoch0;
  std::vector<int64_t> rank0_epoch0;
  for (int r = 0; r < 2; ++r) {
    DistributedSampler sampler(20, 2, r, {.seed = 5});
    const auto idx = sampler.indices().to_vector<int64_t>();
    if (r == 0) rank0_epoch0 = idx;
    for (int64_t i : idx) CHECK(epoch0.insert(i).second);  // the ranks' permutation shares are disjoint
  }
  CHECK(epoch0.size() == 20);
  DistributedSampler again(20, 2, 0, {.seed = 5});
  CHECK(again.indices().to_vector<int64_t>() == rank0_epoch0);  // deterministic
  again.set_epoch(1);
  CHECK(again.indices().to_vector<int64_t>() != rank0_epoch0);
  CHECK_THROWS_WITH_AS(DistributedSampler(5, 2, 2), doctest::Contains("expected 0 <= rank < num_replicas"), Error);
}
