// The multi-rank test harness (see harness.h).
#include "../harness.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>


namespace weft::test {
namespace {

std::map<std::string, Worker>& registry() {
  static std::map<std::string, Worker> workers;
  return workers;
}

std::filesystem::path self_executable() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  WEFT_CHECK(n > 0, "[harness] cannot read /proc/self/exe");
  return std::string(buffer, static_cast<size_t>(n));
}

std::filesystem::path make_run_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp ? tmp : "/tmp") + "/weft-ranks-XXXXXX";
  WEFT_CHECK(::mkdtemp(pattern.data()) != nullptr, "[harness] mkdtemp failed");
  return pattern;
}

}  // namespace

WorkerRegistration::WorkerRegistration(const char* name, Worker worker) { registry()[name] = std::move(worker); }

std::optional<int> run_worker_from_env() {
  const char* name = std::getenv("WEFT_TEST_WORKER");
  if (name == nullptr) return std::nullopt;
  const auto it = registry().find(name);
  if (it == registry().end()) {
    std::cerr << "no test worker named " << name << "\n";
    return 2;
  }
  std::map<std::string, std::string> numbered;  // WEFT_TEST_ARG_000, _001, ... in order
  for (char** a = ::environ; *a != nullptr; ++a) {
    const std::string entry = *a;
    if (entry.rfind("WEFT_TEST_ARG_", 0) == 0) numbered[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  }
  std::vector<std::string> args;
  for (const auto& [key, value] : numbered) args.push_back(value);
  try {
    return it->second(args);
  } catch (const std::exception& e) {
    std::cerr << "worker " << name << " failed: " << e.what() << std::endl;
    return 1;
  }
}

std::filesystem::path run_dir() {
  const char* dir = std::getenv("WEFT_TEST_DIR");
  WEFT_CHECK(dir != nullptr, "[harness] WEFT_TEST_DIR is not set (not in a spawned rank?)");
  return dir;
}

std::chrono::milliseconds group_timeout() {
  const char* ms = std::getenv("WEFT_TEST_GROUP_TIMEOUT_MS");
  return std::chrono::milliseconds(ms ? std::atoll(ms) : 20'000);
}

std::shared_ptr<distributed::ProcessGroup> init_group() {
  distributed::InitOptions options;
  options.timeout = group_timeout();
  return distributed::init_process_group(options);
}

void save_result(int rank, const nn::TensorDict& tensors, const std::string& name) {
  io::save_safetensors(run_dir() / (name + std::to_string(rank) + ".safetensors"), tensors);
}

std::shared_ptr<distributed::ProcessGroup> solo_group() {
  const auto dir = make_run_dir();
  distributed::InitOptions o;
  o.init_method = "file://" + dir.string();
  o.rank = 0;
  o.world_size = 1;
  auto pg = distributed::init_process_group(o);
  std::filesystem::remove_all(dir);  // a group of one never reads its store again
  return pg;
}

void require(bool cond, const std::string& message) { WEFT_CHECK(cond, message); }

std::string RankRun::log(int rank) const {
  std::ifstream in(dir / ("rank" + std::to_string(rank) + ".log"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RankRun::logs() const {
  std::string all;
  for (int r = 0; r < world_size; ++r) all += "---- rank " + std::to_string(r) + " ----\n" + log(r);
  return all;
}

nn::TensorDict RankRun::result(int rank, const std::string& name) const {
  return io::load_safetensors(dir / (name + std::to_string(rank) + ".safetensors")).tensors;
}

std::optional<distributed::RankEnd> RankRun::end_of(int rank) const {
  for (const auto& end : launch.ranks)
    if (end.rank == rank) return end;
  return std::nullopt;
}

RankRun run_ranks(int n, const std::string& worker, const std::vector<std::string>& args, const RunOptions& options) {
  RankRun run;
  run.dir = make_run_dir();
  // The folder goes with the last copy of the run; WEFT_TEST_KEEP=1 keeps it (logs, results).
  run.cleanup = std::shared_ptr<void>(nullptr, [dir = run.dir](void*) {
    if (std::getenv("WEFT_TEST_KEEP") != nullptr) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
  run.world_size = n;
  distributed::LaunchOptions o;
  o.nproc_per_node = n;
  o.command = {self_executable().string()};
  o.env = options.env;
  o.env["WEFT_TEST_WORKER"] = worker;
  o.env["WEFT_TEST_DIR"] = run.dir.string();
  o.env["WEFT_TEST_GROUP_TIMEOUT_MS"] = std::to_string(options.group_timeout.count());
  o.env["OMP_NUM_THREADS"] = "1";
  for (size_t i = 0; i < args.size(); ++i) {
    std::ostringstream key;
    key << "WEFT_TEST_ARG_" << i / 100 << (i / 10) % 10 << i % 10;
    o.env[key.str()] = args[i];
  }
  o.grace = options.grace;
  o.deadline = options.deadline;
  o.log_dir = run.dir;
  o.verbose = false;
  o.bind_cpus = options.bind_cpus;
  const auto start = std::chrono::steady_clock::now();
  run.launch = distributed::launch(o);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace weft::test
