// The runner of test_distributed and test_fabric. The tests spawn their ranks by re-executing this binary with
// WEFT_TEST_WORKER naming the worker to run (harness.h); without it, it is a doctest runner.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "../harness.h"

int main(int argc, char** argv) {
  if (const auto code = weft::test::run_worker_from_env()) return *code;
  doctest::Context context(argc, argv);
  return context.run();
}
