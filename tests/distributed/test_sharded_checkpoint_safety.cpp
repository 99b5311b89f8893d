// Sharded FSDP checkpoints that must not hurt or mislead: a save never deletes what weft did not
// write (a user's folder, a file at the path), it replaces only an earlier checkpoint; loading
// names the real cause (a model of other shapes by parameter names and shapes, shard files
// swapped between ranks). Also what the distributed floor says or refuses up front: a rank whose
// store never answers says what it waits for, and enum values outside their enumerators.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "distributed/socket.h"
#include "error_message.h"
#include "temp_dir.h"
#include "train_helpers.h"

using namespace weft;
using distributed::FullyShardedDataParallel;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

// A model, its FSDP wrapper in a group of one, and an AdamW that has taken one step.
struct Trained {
  nn::Sequential model;
  FullyShardedDataParallel fsdp;
  optim::AdamW adam;
  explicit Trained(nn::Sequential m)
      : model(std::move(m)), fsdp(model, test::solo_group()), adam(fsdp->parameters(), {.lr = 0.02}) {
    const test::Batch b = test::global_batch(0);
    cross_entropy(fsdp(b.x), b.y).backward();
    adam.step();
  }
};

// A port nothing listens on: bound once by the kernel's choice, then closed.
uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// What `fn` writes to stderr (file descriptor 2), and the message of the weft::Error it throws.
std::pair<std::string, std::string> stderr_and_error_of(const std::function<void()>& fn) {
  test::TempDir dir;
  const auto path = dir / "stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(file, 2);
  ::close(file);
  const std::string error = error_of(fn);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  return {read_text(path), error};
}

// Sets environment variables for a scope, and unsets them after.
struct EnvGuard {
  std::vector<std::string> names;
  EnvGuard(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const auto& [name, value] : vars) {
      ::setenv(name, value.c_str(), 1);
      names.emplace_back(name);
    }
  }
  ~EnvGuard() {
    for (const auto& name : names) ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("a sharded save refuses a folder holding files weft did not write, and deletes nothing") {
  test::TempDir dir;
  const auto runs = dir / "runs";
  std::filesystem::create_directories(runs / "plots");
  write_text(runs / "notes.txt", "x");
  Trained t(test::make_mlp(1));
  const std::string e = error_of([&] { t.fsdp->save_sharded(runs, &t.adam); });
  CHECK(contains(e, "[FullyShardedDataParallel.save_sharded] " + ("\"" + runs.string() + "\"")));
  CHECK(contains(e, "holds 2 entries that weft's sharded checkpoint does not write ('notes.txt', 'plots')"));
  CHECK(read_text(runs / "notes.txt") == "x");
  CHECK(std::filesystem::is_directory(runs / "plots"));
  CHECK_FALSE(std::filesystem::exists(dir / "runs.partial"));

  // A regular file at the path is refused too, and stays.
  const auto file = dir / "ckpt";
  write_text(file, "mine");
  CHECK(contains(error_of([&] { t.fsdp->save_sharded(file, &t.adam); }), "exists and is not a folder"));
  CHECK(read_text(file) == "mine");

  // So is a user's folder at the temporary path the save writes first.
  std::filesystem::create_directories(dir / "next.partial");
  write_text(dir / "next.partial" / "keep.txt", "k");
  CHECK(contains(error_of([&] { t.fsdp->save_sharded(dir / "next", &t.adam); }), "('keep.txt')"));
  CHECK(read_text(dir / "next.partial" / "keep.txt") == "k");
}

TEST_CASE("a sharded save fills an empty folder and replaces an earlier checkpoint, atomically") {
  test::TempDir dir;
  const auto folder = dir / "ckpt";
  std::filesystem::create_directories(folder);
  Trained t(test::make_mlp(2));
  t.fsdp->save_sharded(folder, &t.adam, {{"step", "1"}});
  CHECK(t.fsdp->load_sharded(folder).at("step") == "1");
  t.fsdp->save_sharded(folder, &t.adam, {{"step", "2"}});  // over the earlier checkpoint
  CHECK(t.fsdp->load_sharded(folder).at("step") == "2");
  CHECK(dir.entries() == std::vector<std::string>{"ckpt"});  // the old one and the partial are gone
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"COMPLETE", "shard-0-of-1.safetensors"});
}

TEST_CASE("loading a sharded checkpoint into a model of other shapes names the parameters, not the optimizer") {
  test::TempDir dir;
  Trained saved(test::make_mlp(3));
  saved.fsdp->save_sharded(dir / "ckpt", &saved.adam);
  manual_seed(4);
  Trained wider(nn::Sequential(nn::Linear(test::kIn, 20), nn::ReLU(), nn::Linear(20, test::kOut)));
  const nn::TensorDict before = wider.fsdp->full_state_dict();
  const std::string e = error_of([&] { wider.fsdp->load_sharded(dir / "ckpt", &wider.adam); });
  CHECK(contains(e, "does not fit the model"));
  CHECK(contains(e, "'0.weight' has shape (13, 7), the model (20, 7)"));
  CHECK(contains(e, "'2.weight' has shape (5, 13), the model (5, 20)"));
  CHECK_FALSE(contains(e, "AdamW"));
  CHECK_FALSE(contains(e, "optimizer"));
  CHECK(test::bitwise_equal(wider.fsdp->full_state_dict(), before));
}

// args: checkpoint folder
WEFT_RANK_WORKER(sharded_save_for_swap) {
  auto pg = test::init_group();
  auto model = test::make_mlp(5);
  FullyShardedDataParallel fsdp(model, pg);
  optim::AdamW adam(fsdp->parameters(), {.lr = 0.02});
  fsdp->save_sharded(args.at(0), &adam);
  return 0;
}

TEST_CASE("swapped shard files are named as such: which file holds which rank's shard") {
  test::TempDir dir;
  const auto folder = dir / "ckpt";
  const auto run = test::run_ranks(2, "sharded_save_for_swap", {folder.string()});
  INFO(run.logs());
  REQUIRE(run.ok());
  std::filesystem::rename(folder / "shard-0-of-2.safetensors", folder / "tmp");
  std::filesystem::rename(folder / "shard-1-of-2.safetensors", folder / "shard-0-of-2.safetensors");
  std::filesystem::rename(folder / "tmp", folder / "shard-1-of-2.safetensors");
  auto model = test::make_mlp(6);
  FullyShardedDataParallel fsdp(model, test::solo_group());
  optim::AdamW adam(fsdp->parameters(), {.lr = 0.02});
  const std::string e = error_of([&] { fsdp->load_sharded(folder, &adam); });
  CHECK(contains(e, "shard-0-of-2.safetensors\" holds rank 1's shard, not rank 0's: the shard files were renamed or "
                    "swapped"));
  CHECK_FALSE(contains(e, "'optimizer' entry"));
}

TEST_CASE("a rank whose store never answers says what it waits for while it waits") {
  const uint16_t port = closed_port();
  const std::string where = "127.0.0.1:" + std::to_string(port);
  {
    // The case, RANK=1 WORLD_SIZE=2 with a closed MASTER_PORT, with a 3 s timeout (the
    // notices come after 2 s, then every 30 s; PyTorch's 30 minute default stays).
    EnvGuard env{
        {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}};
    distributed::InitOptions options;
    options.timeout = std::chrono::milliseconds(3000);
    const auto [err, error] = stderr_and_error_of([&] { distributed::init_process_group(options); });
    CHECK(contains(err, "[store] rank 1 of 2 is waiting for the store at " + where + " (Connection refused); "));
    CHECK(contains(err, " s left of its 3 s timeout. Is the rank or launcher that hosts it (MASTER_ADDR:MASTER_PORT) "
                        "running?"));
    CHECK(contains(error, "[store] rank 1 of 2 cannot connect to " + where + " within its 3 s timeout"));
  }
  // Repeated: every `every` after the first.
  distributed::detail::WaitNotice notice;
  notice.who = "rank 3 of 4";
  notice.first = std::chrono::milliseconds(100);
  notice.every = std::chrono::milliseconds(300);
  const auto [err, error] = stderr_and_error_of([&] {
    distributed::detail::connect_to("127.0.0.1", port, distributed::detail::Clock::now() + std::chrono::seconds(2),
                                    notice);
  });
  size_t notices = 0;
  for (size_t at = err.find("rank 3 of 4 is waiting"); at != std::string::npos;
       at = err.find("rank 3 of 4 is waiting", at + 1))
    ++notices;
  CHECK(notices >= 2);  // due at 0.1 s, 0.4 s, 0.7 s, ... of 2 s: repeated even on a starved machine
  CHECK(contains(error, "cannot connect to " + where));
}

TEST_CASE("collectives and wrappers refuse enum values outside their enumerators") {
  auto pg = test::solo_group();
  CHECK(error_of([&] { pg->all_reduce(ones({2}), static_cast<distributed::ReduceOp>(9)); }) ==
        "[all_reduce] expected a valid ReduceOp (0 to 3), got the value 9");
  distributed::FSDPOptions fsdp_options;
  fsdp_options.sharding_strategy = static_cast<distributed::ShardingStrategy>(5);
  CHECK(error_of([&] { FullyShardedDataParallel(test::make_mlp(7), pg, fsdp_options); }) ==
        "[FullyShardedDataParallel] expected a valid ShardingStrategy (0 to 2), got the value 5");
  distributed::DDPOptions ddp_options;
  ddp_options.comm_hook = static_cast<distributed::DDPCommHook>(3);
  CHECK(error_of([&] { distributed::DistributedDataParallel(test::make_mlp(8), pg, ddp_options); }) ==
        "[DistributedDataParallel] expected a valid DDPCommHook (0 to 2), got the value 3");
  ddp_options.comm_hook = distributed::DDPCommHook::AllReduce;
  ddp_options.bucket_launch = static_cast<distributed::DDPBucketLaunch>(4);
  CHECK(error_of([&] { distributed::DistributedDataParallel(test::make_mlp(8), pg, ddp_options); }) ==
        "[DistributedDataParallel] expected a valid DDPBucketLaunch (0 to 2), got the value 4");
}
