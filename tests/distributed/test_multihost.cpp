// Several hosts for real: three network namespaces joined by veth pairs on a bridge, made inside
// the test, one weft-run per "host" (--nnodes 3 --node-rank r --master <host 0's address>), one
// DDP training run across them, which must end where one process on the whole batch ends. Needs
// root and `ip netns`; skipped with a message where that is not permitted.
#include <doctest/doctest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "train_helpers.h"

using namespace weft;

extern char** environ;

namespace {

// Runs a command line through /bin/sh, quietly; true when it succeeded.
bool sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// Three namespaces wt<pid>h<i> with 10.<a>.<b>.<i+1>/24 on a bridge; removed on destruction.
class VirtualHosts {
 public:
  explicit VirtualHosts(int count) : tag_(std::to_string(::getpid() % 100000)), count_(count) {
    subnet_ = "10.201." + std::to_string(::getpid() % 250) + ".";
    ok_ = ::geteuid() == 0 && sh("ip link add wb" + tag_ + " type bridge") && sh("ip link set wb" + tag_ + " up");
    for (int i = 0; ok_ && i < count; ++i) {
      const std::string ns = name(i), outer = "wv" + tag_ + "h" + std::to_string(i),
                        inner = "wn" + tag_ + "h" + std::to_string(i);
      ok_ = sh("ip netns add " + ns) && sh("ip link add " + outer + " type veth peer name " + inner) &&
            sh("ip link set " + inner + " netns " + ns) && sh("ip link set " + outer + " master wb" + tag_) &&
            sh("ip link set " + outer + " up") &&
            sh("ip netns exec " + ns + " ip addr add " + address(i) + "/24 dev " + inner) &&
            sh("ip netns exec " + ns + " ip link set " + inner + " up") && sh("ip netns exec " + ns + " ip link set lo up");
    }
  }
  ~VirtualHosts() {
    for (int i = 0; i < count_; ++i) sh("ip netns del " + name(i));
    sh("ip link del wb" + tag_);
  }
  VirtualHosts(const VirtualHosts&) = delete;
  VirtualHosts& operator=(const VirtualHosts&) = delete;

  bool ok() const { return ok_; }
  std::string name(int i) const { return "wt" + tag_ + "h" + std::to_string(i); }
  std::string address(int i) const { return subnet_ + std::to_string(i + 1); }

 private:
  std::string tag_;
  std::string subnet_;
  int count_;
  bool ok_ = false;
};

pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env(extra_env);
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) == 0);
  return pid;
}

// Waits for every pid until the deadline, then kills what is left; returns their exit statuses.
std::vector<int> wait_all(const std::vector<pid_t>& pids, std::chrono::seconds deadline) {
  std::vector<int> status(pids.size(), 0);
  std::vector<bool> done(pids.size(), false);
  const auto end = std::chrono::steady_clock::now() + deadline;
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i)
      if (!done[i] && ::waitpid(pids[i], &status[i], WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
      }
    if (std::chrono::steady_clock::now() > end)
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) ::kill(pids[i], SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

}  // namespace

WEFT_RANK_WORKER(multihost_train) {
  auto pg = test::init_group();
  auto model = test::make_mlp(1234);
  distributed::DistributedDataParallel ddp(model, pg);
  optim::SGD opt(ddp->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    const test::Batch b = test::local_rows(test::global_batch(step), pg->rank(), pg->size());
    opt.zero_grad();
    cross_entropy(ddp(b.x), b.y).backward();
    opt.step();
  }
  nn::TensorDict out = model->state_dict();
  char ns[64] = {};
  test::require(::readlink("/proc/self/ns/net", ns, sizeof(ns) - 1) > 0, "cannot read this rank's network namespace");
  out.insert("net_namespace", scalar_tensor(static_cast<double>(std::hash<std::string>{}(ns) % (1ll << 50)), kFloat64));
  test::save_result(pg->rank(), out);
  return 0;
}

TEST_CASE("three hosts made of network namespaces train one DDP run over their own addresses") {
  const char* weft_run = std::getenv("WEFT_RUN");
  REQUIRE_MESSAGE(weft_run != nullptr, "WEFT_RUN names the weft-run binary (set by CTest)");
  VirtualHosts hosts(3);
  if (!hosts.ok()) {
    MESSAGE("skipped: creating network namespaces and veth pairs needs root and `ip netns` (not permitted here)");
    return;
  }
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(len > 0);
  char dir[] = "/tmp/weft-multihost-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string master = hosts.address(0) + ":" + std::to_string(29000 + ::getpid() % 1000);
  std::vector<pid_t> launchers;
  for (int node = 0; node < 3; ++node)
    launchers.push_back(spawn({"ip", "netns", "exec", hosts.name(node), weft_run, "-n", "1", "--nnodes", "3",
                               "--node-rank", std::to_string(node), "--master", master, "--grace", "2",
                               std::string(self, static_cast<size_t>(len))},
                              {"WEFT_TEST_WORKER=multihost_train", std::string("WEFT_TEST_DIR=") + dir,
                               "WEFT_TEST_GROUP_TIMEOUT_MS=20000", "OMP_NUM_THREADS=1"}));
  const std::vector<int> status = wait_all(launchers, std::chrono::seconds(90));
  for (int s : status) CHECK((WIFEXITED(s) && WEXITSTATUS(s) == 0));

  auto reference = test::make_mlp(1234);
  optim::SGD opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    const test::Batch b = test::global_batch(step);
    opt.zero_grad();
    cross_entropy(reference(b.x), b.y).backward();
    opt.step();
  }
  std::set<double> namespaces;
  for (int r = 0; r < 3; ++r) {
    nn::TensorDict result = io::load_safetensors(std::string(dir) + "/result" + std::to_string(r) + ".safetensors").tensors;
    namespaces.insert(result.at("net_namespace").item<double>());
    nn::TensorDict params;
    for (const auto& [k, t] : result)
      if (k != "net_namespace") params.insert(k, t);
    CHECK(test::max_relative_difference(params, reference->state_dict()) <= 1e-5);
  }
  CHECK(namespaces.size() == 3);  // three hosts, as far as the network is concerned
  std::filesystem::remove_all(dir);
}
