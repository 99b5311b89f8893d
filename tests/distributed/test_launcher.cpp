// The launcher's CPU binding (weft-run --cpu-bind): how a node's CPUs are shared out among its
// ranks, and that each spawned rank really runs on its share.
#include <doctest/doctest.h>

#include "error_message.h"
#include "harness.h"
#include "distributed/all.h"

using namespace weft;
using distributed::cpu_shares;

TEST_CASE("cpu_shares splits the CPUs into contiguous shares that differ by at most one, larger first") {
  using Shares = std::vector<std::vector<int>>;
  CHECK(cpu_shares({0, 1}, 2) == Shares{{0}, {1}});
  CHECK(cpu_shares({0, 1, 2, 3, 4}, 2) == Shares{{0, 1, 2}, {3, 4}});
  CHECK(cpu_shares({0, 2, 4, 6}, 3) == Shares{{0, 2}, {4}, {6}});
  CHECK(cpu_shares({3, 5, 8}, 1) == Shares{{3, 5, 8}});
  CHECK(cpu_shares({0, 1, 2, 3, 4, 5, 6, 7}, 8) == Shares{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  CHECK(error_of([] { cpu_shares({0, 1}, 3); }) ==
        "[launch] binding 3 rank(s) to CPUs needs at least one CPU per rank, got 2 CPU(s)");
  CHECK(error_of([] { cpu_shares({0, 1}, 0); }).find("needs at least one CPU per rank") != std::string::npos);
}

WEFT_RANK_WORKER(report_affinity) {
  const std::vector<int> cpus = distributed::allowed_cpus();
  std::vector<int64_t> values(cpus.begin(), cpus.end());
  nn::TensorDict result;
  result.insert("cpus", from_vector(values, {static_cast<int64_t>(values.size())}));
  test::save_result(std::stoi(std::getenv("RANK")), result);
  return 0;
}

TEST_CASE("a bound rank runs on its share of the launcher's CPUs, an unbound one on all of them") {
  const std::vector<int> mine = distributed::allowed_cpus();
  if (mine.size() < 2) {
    MESSAGE("skipped: binding two ranks needs two CPUs, this process may use " << mine.size());
    return;
  }
  const auto shares = cpu_shares(mine, 2);
  for (bool bind : {true, false}) {
    CAPTURE(bind);
    test::RunOptions options;
    options.bind_cpus = bind;
    const auto run = test::run_ranks(2, "report_affinity", {}, options);
    INFO(run.logs());
    REQUIRE(run.ok());
    for (int r = 0; r < 2; ++r) {
      const std::vector<int64_t> got = run.result(r).at("cpus").to_vector<int64_t>();
      const std::vector<int>& want = bind ? shares[static_cast<size_t>(r)] : mine;
      CHECK(got == std::vector<int64_t>(want.begin(), want.end()));
    }
  }
}
