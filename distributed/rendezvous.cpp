// Rendezvous from torchrun's environment variables or an init_method URL (see rendezvous.h).
#include "distributed/rendezvous.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "distributed/file_store.h"
#include "distributed/gloo_process_group.h"
#include "distributed/tcp_store.h"
#include "tensor/error.h"

#ifdef WEFT_HAVE_NCCL
#include "distributed/cuda/nccl_process_group.h"
#endif

namespace weft::distributed {
namespace {

using detail::env;
using detail::env_int;

// The IPv4 address of a network interface (GLOO_SOCKET_IFNAME).
std::string interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  WEFT_CHECK(::getifaddrs(&list) == 0, "[init_process_group] cannot list the network interfaces");
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || name != a->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
  }
  ::freeifaddrs(list);
  WEFT_CHECK(!found.empty(), "[init_process_group] GLOO_SOCKET_IFNAME names interface '", name,
             "', which has no IPv4 address here");
  return found;
}

// Splits "host:port" (the host may be a bracketed IPv6 address).
std::pair<std::string, uint16_t> split_host_port(const std::string& text, const char* what) {
  const auto colon = text.rfind(':');
  WEFT_CHECK(colon != std::string::npos && colon + 1 < text.size(), "[init_process_group] expected ", what,
             " as host:port, got '", text, "'");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const long port = std::strtol(text.c_str() + colon + 1, &end, 10);
  WEFT_CHECK(*end == '\0' && port > 0 && port < 65536, "[init_process_group] expected a port in [1, 65535] in '",
             text, "'");
  return {host, static_cast<uint16_t>(port)};
}

std::shared_ptr<TCPStore> tcp_store(const std::string& host, uint16_t port, bool host_it, Milliseconds timeout,
                                    const Rendezvous& r) {
  std::shared_ptr<TCPStoreServer> server;
  if (host_it) server = std::make_shared<TCPStoreServer>(port);
  return std::make_shared<TCPStore>(host, port, timeout, std::move(server),
                                    "rank " + std::to_string(r.rank) + " of " + std::to_string(r.world_size));
}

// Rank and world size from the options, else from RANK and WORLD_SIZE.
void identity_from(const InitOptions& options, Rendezvous& r) {
  r.world_size = options.world_size ? *options.world_size : env_int("WORLD_SIZE", std::nullopt, 1, 1 << 20);
  r.rank = options.rank ? *options.rank : env_int("RANK", std::nullopt, 0, r.world_size - 1);
}

}  // namespace

std::string job_prefix() {
  std::string prefix = "weft";
  if (const auto run = env("TORCHELASTIC_RUN_ID")) prefix += "/" + *run + "/" + env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  return prefix;
}

Rendezvous rendezvous(const InitOptions& options) {
  const std::string& method = options.init_method;
  Rendezvous r;
  std::shared_ptr<Store> root;
  if (method == "env://" || method.rfind("tcp://", 0) == 0) {
    std::string host;
    uint16_t port = 0;
    bool launcher_hosts = false;
    if (method == "env://") {
      const DistEnv e = read_dist_env(true);
      r.rank = options.rank.value_or(e.rank);
      r.world_size = options.world_size.value_or(e.world_size);
      r.local_rank = e.local_rank;
      host = e.master_addr;
      port = e.master_port;
      launcher_hosts = e.launcher_hosts_store;
    } else {
      std::tie(host, port) = split_host_port(method.substr(6), "the tcp:// init_method");
      identity_from(options, r);
    }
    auto store = tcp_store(host, port, !launcher_hosts && r.rank == 0, options.timeout, r);
    r.local_address = store->local_address();
    root = store;
  } else if (method.rfind("file://", 0) == 0) {
    const std::string folder = method.substr(7);
    WEFT_CHECK(!folder.empty(), "[init_process_group] expected file:///folder, got '", method, "'");
    identity_from(options, r);
    root = std::make_shared<FileStore>(folder, options.timeout);
    r.local_address = "127.0.0.1";
  } else {
    WEFT_FAIL("[init_process_group] expected init_method env://, tcp://host:port or file:///folder, got '", method,
              "'");
  }
  WEFT_CHECK(r.rank >= 0 && r.rank < r.world_size, "[init_process_group] expected 0 <= rank < world size, got rank ",
             r.rank, " of ", r.world_size);
  if (const auto ifname = env("GLOO_SOCKET_IFNAME")) r.local_address = interface_address(*ifname);
  r.job_store = std::make_shared<PrefixStore>(job_prefix(), root);
  return r;
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  static std::atomic<int> groups{0};
  Rendezvous r = rendezvous(options);
  auto group_store = std::make_shared<PrefixStore>("pg/" + std::to_string(groups++), r.job_store);
  if (options.backend == "gloo")
    return std::make_shared<GlooProcessGroup>(group_store, r.job_store, r.rank, r.world_size,
                                              GlooOptions{options.timeout, r.local_address});
#ifdef WEFT_HAVE_NCCL
  if (options.backend == "nccl")
    return std::make_shared<NcclProcessGroup>(group_store, r.job_store, r.rank, r.world_size, options.timeout,
                                              r.local_rank);
#endif
  WEFT_CHECK(options.backend != "nccl", "[init_process_group] backend 'nccl' needs weft built with -DWEFT_CUDA=ON "
             "(NCCL comes with the CUDA toolkit); use backend 'gloo' on the CPU");
  WEFT_FAIL("[init_process_group] expected backend 'gloo' or 'nccl', got '", options.backend, "'");
}

}  // namespace weft::distributed
