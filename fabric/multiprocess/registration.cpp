// The registration object of the multi-process strategies (Note [Strategy table] in
// fabric/strategy.h): its static initialiser adds ddp and fsdp to Fabric's table. The anchor below
// is what weft::distributed's link interface names (-Wl,-u), so the linker takes this object from
// the static library into every program that links it, though nothing calls into it.
#include "fabric/multiprocess/process_group_strategy.h"

extern "C" {
extern const int WEFT_DISTRIBUTED_STRATEGIES_ANCHOR;
const int WEFT_DISTRIBUTED_STRATEGIES_ANCHOR = 1;
}

namespace weft::fabric {
namespace {

const bool registered = [] {
  register_strategy("ddp", &make_ddp_strategy);
  register_strategy("fsdp", &make_fsdp_strategy);
  return true;
}();

}  // namespace
}  // namespace weft::fabric
