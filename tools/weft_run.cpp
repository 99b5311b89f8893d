// weft-run: starts a program once per rank, as torchrun does, and supervises the ranks.
//
//   weft-run -n 2 ./train --epochs 3                      one node, two ranks
//   weft-run -n 2 --nnodes 2 --node-rank 0 --master 10.0.0.1:29500 ./train   (on each node, with
//                                                          its own --node-rank)
//
// Each rank sees torchrun's environment variables, so a weft program calls
// distributed::init_process_group() (or Fabric::launch()) and finds its place; node 0's weft-run
// serves the rendezvous store at --master. When a rank fails, the others get --grace seconds to
// fail on their own before they are killed; the exit code is the first failing rank's. See
// distributed/launcher.h.
#include <cstdlib>
#include <iostream>
#include <string>

#include "distributed/launcher.h"
#include "tensor/error.h"

namespace {

const char* kUsage = R"(usage: weft-run -n N [--nnodes M --node-rank R --master ADDR:PORT] [--grace S] program [args...]
  -n, --nproc-per-node N   ranks on this node
  --nnodes M               nodes in the job (default 1)
  --node-rank R            this node's index, 0 <= R < M (default 0); node 0 serves the store
  --master ADDR:PORT       where node 0 serves the store (default 127.0.0.1 and a free port;
                           required with several nodes)
  --grace S                seconds the other ranks get after one fails (default 5)
  --cpu-bind               run each rank on its own share of this node's CPUs (split evenly,
                           contiguous; needs at least one CPU per rank)
)";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "weft-run: " << message << "\n" << kUsage;
  std::exit(2);
}

long parse_int(const std::string& flag, const std::string& text, long low, long high) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < low || v > high)
    usage_error(flag + " expects an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "], got '" +
                text + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  weft::distributed::LaunchOptions o;
  bool have_n = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (flag.empty() || flag[0] != '-') break;
    if (flag == "--cpu-bind") {
      o.bind_cpus = true;
      continue;
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "-n" || flag == "--nproc-per-node") {
      o.nproc_per_node = static_cast<int>(parse_int(flag, value, 1, 4096));
      have_n = true;
    } else if (flag == "--nnodes") {
      o.nnodes = static_cast<int>(parse_int(flag, value, 1, 65536));
    } else if (flag == "--node-rank") {
      o.node_rank = static_cast<int>(parse_int(flag, value, 0, 65535));
    } else if (flag == "--master") {
      const auto colon = value.rfind(':');
      if (colon == std::string::npos) usage_error("--master expects ADDR:PORT, got '" + value + "'");
      o.master_addr = value.substr(0, colon);
      o.master_port = static_cast<uint16_t>(parse_int(flag, value.substr(colon + 1), 1, 65535));
    } else if (flag == "--grace") {
      o.grace = std::chrono::seconds(parse_int(flag, value, 0, 3600));
    } else {
      usage_error("unknown option " + flag);
    }
  }
  if (!have_n) usage_error("-n N is required");
  if (i >= argc) usage_error("no program given");
  if (o.node_rank >= o.nnodes) usage_error("--node-rank must be below --nnodes");
  if (o.nnodes > 1 && o.master_port == 0) usage_error("several nodes need --master ADDR:PORT");
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  try {
    return weft::distributed::launch(o).exit_code;
  } catch (const weft::Error& e) {
    std::cerr << "weft-run: " << e.what() << "\n";
    return 1;
  }
}
