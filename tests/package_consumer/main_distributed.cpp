// Builds against the installed package with its distributed component (weft::distributed, or
// pkg-config's weft-distributed): the ddp and fsdp strategies are registered (the registration
// object came in with the library), and a ddp Fabric of one process trains a step.
#include <weft.h>

int main() {
  using namespace weft;
  if (!fabric::strategy_available("ddp") || !fabric::strategy_available("fsdp")) return 1;
  fabric::Fabric f({.strategy = "ddp"});
  f.launch();  // a group of one: no launcher
  if (f.strategy().name() != "ddp" || f.world_size() != 1) return 2;
  const Tensor summed = f.all_reduce(tensor({1.5}), distributed::ReduceOp::Sum);
  return summed.item() == 1.5 ? 0 : 3;
}
