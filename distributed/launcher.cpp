// The launcher (see launcher.h): fork + exec per rank, a supervision loop, exit notes.
#include "distributed/launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "distributed/health.h"
#include "distributed/rendezvous.h"
#include "distributed/tcp_store.h"
#include "tensor/error.h"

extern char** environ;

namespace weft::distributed {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    WEFT_CHECK(::access(name.c_str(), X_OK) == 0, "[launch] cannot execute '", name, "': ", std::strerror(errno));
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = (end > start ? dirs.substr(start, end - start) : ".") + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  WEFT_FAIL("[launch] program '", name, "' not found in PATH");
}

// The environment of one rank: ours, with torchrun's variables set.
std::vector<std::string> rank_environment(const LaunchOptions& o, int local_rank, uint16_t port) {
  const int world = o.nproc_per_node * o.nnodes;
  std::map<std::string, std::string> vars = o.env;
  vars["RANK"] = std::to_string(o.node_rank * o.nproc_per_node + local_rank);
  vars["WORLD_SIZE"] = std::to_string(world);
  vars["LOCAL_RANK"] = std::to_string(local_rank);
  vars["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  vars["GROUP_RANK"] = std::to_string(o.node_rank);
  vars["MASTER_ADDR"] = o.master_addr;
  vars["MASTER_PORT"] = std::to_string(port);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!vars.count(entry.substr(0, entry.find('=')))) out.push_back(entry);
  }
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = true;
  bool killed = false;
};

// fork + exec. Everything the child needs is prepared before fork: between fork and exec only
// async-signal-safe calls (and sched_setaffinity, a bare system call) run, because the launcher
// may have other threads (the store server).
pid_t spawn(const std::string& program, const std::vector<std::string>& args, const std::vector<std::string>& env,
            int log_fd, const cpu_set_t* cpus) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  WEFT_CHECK(pid >= 0, "[launch] fork failed: ", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0) {
      static const char kMessage[] = "weft-run: could not bind the rank to its CPUs\n";
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
      ::_exit(127);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so a kill right after fork already reaches the group
  return pid;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Restores the launcher's signal handlers when launch() returns.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalForwarding() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

std::string RankEnd::describe() const {
  std::string text;
  if (WIFEXITED(status)) text = "exit code " + std::to_string(WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    text = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  else text = "status " + std::to_string(status);
  return killed_by_launcher ? text + ", by the launcher" : text;
}

std::vector<std::vector<int>> cpu_shares(const std::vector<int>& cpus, int ranks) {
  WEFT_CHECK(ranks >= 1 && static_cast<size_t>(ranks) <= cpus.size(), "[launch] binding ", ranks,
             " rank(s) to CPUs needs at least one CPU per rank, got ", cpus.size(), " CPU(s)");
  std::vector<std::vector<int>> shares(static_cast<size_t>(ranks));
  const size_t base = cpus.size() / static_cast<size_t>(ranks), extra = cpus.size() % static_cast<size_t>(ranks);
  size_t next = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    const size_t count = base + (r < extra ? 1 : 0);
    shares[r].assign(cpus.begin() + static_cast<std::ptrdiff_t>(next), cpus.begin() + static_cast<std::ptrdiff_t>(next + count));
    next += count;
  }
  return shares;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  WEFT_CHECK(::sched_getaffinity(0, sizeof(set), &set) == 0, "[launch] cannot read this process's CPU affinity: ",
             std::strerror(errno));
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

LaunchResult launch(const LaunchOptions& o) {
  WEFT_CHECK(o.nproc_per_node >= 1 && o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes,
             "[launch] expected nproc_per_node >= 1 and 0 <= node_rank < nnodes, got ", o.nproc_per_node, ", ",
             o.node_rank, ", ", o.nnodes);
  WEFT_CHECK(!o.command.empty(), "[launch] expected a program to run");
  WEFT_CHECK(o.nnodes == 1 || o.master_port != 0, "[launch] several nodes need an agreed master port (--master ADDR:PORT)");
  const std::string program = find_program(o.command[0]);
  std::vector<cpu_set_t> bindings;
  if (o.bind_cpus) {
    for (const auto& share : cpu_shares(allowed_cpus(), o.nproc_per_node)) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : share) CPU_SET(c, &set);
      bindings.push_back(set);
    }
  }

  // Node 0 serves the store; every node reports exits into it.
  std::shared_ptr<TCPStoreServer> server;
  uint16_t port = o.master_port;
  if (o.node_rank == 0) {
    server = std::make_shared<TCPStoreServer>(o.master_port);
    port = server->port();
  }
  std::shared_ptr<Store> notes;
  const auto write_exit_note = [&](int rank, const std::string& how) {
    try {
      if (!notes) {
        const std::string host = server ? std::string("127.0.0.1") : o.master_addr;
        notes = std::make_shared<PrefixStore>(job_prefix(), std::make_shared<TCPStore>(host, port, std::chrono::seconds(2)));
      }
      notes->set(detail::exit_key(rank), how);
    } catch (const std::exception&) {
      // The store is gone (node 0 ended); the survivors learn of the exit from the engine alone.
    }
  };

  SignalForwarding forwarding;
  std::vector<Child> children;
  LaunchResult result;
  const auto start = Clock::now();
  std::optional<Clock::time_point> first_failure;
  try {
    for (int local = 0; local < o.nproc_per_node; ++local) {
      int log_fd = -1;
      const int rank = o.node_rank * o.nproc_per_node + local;
      if (o.log_dir) {
        const auto path = *o.log_dir / ("rank" + std::to_string(rank) + ".log");
        log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        WEFT_CHECK(log_fd >= 0, "[launch] cannot create ", path, ": ", std::strerror(errno));
      }
      const pid_t pid = spawn(program, o.command, rank_environment(o, local, port), log_fd,
                              bindings.empty() ? nullptr : &bindings[static_cast<size_t>(local)]);
      if (log_fd >= 0) ::close(log_fd);
      children.push_back({rank, pid});
    }
  } catch (...) {
    for (auto& c : children) ::kill(-c.pid, SIGKILL), ::waitpid(c.pid, nullptr, 0);
    throw;
  }

  const auto kill_all = [&](int sig) {
    for (auto& c : children)
      if (c.running) {
        ::kill(-c.pid, sig);
        c.killed = true;
      }
  };
  size_t running = children.size();
  bool killed_all = false;
  while (running > 0) {
    for (auto& c : children) {
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      --running;
      ::kill(-c.pid, SIGKILL);  // the rank's own children, if any are left
      RankEnd end{c.rank, status, c.killed};
      write_exit_note(c.rank, end.describe());
      if (o.verbose && (status != 0 || first_failure))
        std::cerr << "[weft-run] rank " << c.rank << " (pid " << c.pid << ") ended: " << end.describe() << std::endl;
      if (status != 0 && !first_failure) {
        first_failure = Clock::now();
        result.exit_code = exit_code_of(status);
      }
      result.ranks.push_back(end);
    }
    if (running == 0) break;
    const auto now = Clock::now();
    if (g_signal != 0 && !killed_all) {
      kill_all(SIGTERM);
      first_failure = first_failure.value_or(now);
      if (result.exit_code == 0) result.exit_code = 128 + g_signal;
      g_signal = 0;
    }
    if (o.deadline && now - start > *o.deadline && !result.deadline_passed) {
      result.deadline_passed = true;
      if (result.exit_code == 0) result.exit_code = 124;
      kill_all(SIGKILL);
      killed_all = true;
    }
    if (first_failure && now - *first_failure > o.grace && !killed_all) {
      kill_all(SIGKILL);
      killed_all = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return result;
}

}  // namespace weft::distributed
