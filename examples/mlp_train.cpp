// mlp_train: the main job. Trains an MLP (default 784-512-512-10, ReLU) on Fashion-MNIST with
// AdamW and reports test accuracy per epoch.
//
// Training goes through the Fabric facade (fabric/fabric.h), so --precision picks the
// precision plugin: 32-true (default), 64-true, 16-true, bf16-true, bf16-mixed, and 16-mixed,
// which on the cpu falls back to bf16-mixed with a warning (fp16 autocast is a GPU feature), plus
// the aliases 64, 32, 16, bf16; and transformer-engine (transformer-engine-float16), FP8 training
// with bfloat16 (float16) weights: the hidden layers become Fp8Linear when their sizes are
// multiples of 16, the 10-class output layer stays in high precision (with a warning).
//
// Reproducibility is part of the contract: the model is initialised from --seed, each epoch's
// shuffle comes from a generator seeded by (seed, epoch), and a checkpoint holds the model (FP8
// layers' scales and amax histories included), the optimizer state, the precision plugin's state
// (the loss scale under 16-mixed) and the epoch.
// So a run of 2 epochs resumed for a third equals a straight run of 3 epochs bit for bit
// (examples/resume_test.sh checks this under CTest).
//
// --device cuda trains on the current GPU (a CUDA build, one process): Fabric puts the model and
// the optimizer state there, the data set is copied to it once, and every batch is gathered on it.
// --cuda-graph then records one training step in a CUDA graph and replays it for every full batch
// (Note [CUDA graphs] in tensor/cuda.h): the step reads its batch through a static tensor of row
// indices, which each step fills before the replay; the first three steps run eagerly on the
// graph's stream as its warm-up, AdamW is capturable, the loss is summed on the device and read
// once per progress line and epoch, and a last, shorter batch runs eagerly. Precisions that need
// a loss scaler (16-mixed) cannot be captured and are refused.
//
// Several processes: `weft-run -n 2 mlp_train_dist --strategy ddp` (or fsdp; torchrun works too) trains
// with data parallelism: --batch-size is the global batch, each rank takes its share of every
// batch through Fabric's distributed sampler, and only rank 0 prints, logs and plots (every rank
// evaluates the whole test set, since an fsdp forward needs all ranks). `--devices 2` without a
// launcher makes Fabric start the two ranks itself. mlp_train_dist is this program linked with
// weft_distributed too (examples/CMakeLists.txt); mlp_train links the core library only, so it
// carries no Gloo, and refuses the flags that need several processes, naming mlp_train_dist.
//
// Output: a progress line per step (loss, throughput), the test accuracy per epoch, a CSV log,
// a PNG plot of the curves when gnuplot is installed, and a final JSON summary line that the
// benchmark script reads. The log and the plot go to the current directory unless --log and
// --plot say otherwise.
//
// Every flag and path is checked before any data is read (check_options): a run never fails
// half way, or silently skips its log, for a reason known at the start.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command_line.h"
#include "fashion_mnist.h"
#include "option_checks.h"
#include "weft.h"

using namespace weft;

namespace {

struct Options {
  std::vector<int64_t> hidden = {512, 512};
  int64_t epochs = 3;
  int64_t batch_size = 128;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::optional<int> threads;  // unset: leave the default
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string checkpoint;  // saved after every epoch when set
  std::string resume;      // checkpoint to continue from
  std::string log = "mlp_train.csv";
  std::string plot = "mlp_train.png";
  bool plot_given = false;  // --plot on the command line, not the default
  std::string precision = "32-true";
  std::string gemm;  // empty: the build's default
  std::string strategy = "auto";
  int64_t devices = 0;  // 0: what the launcher started on this node, else 1
  int64_t num_nodes = 0;  // 0: what the launcher started, else 1
  std::string device = "cpu";
  bool cuda_graph = false;
  bool progress = true;
};

}  // namespace

namespace weft::examples {
const char* const kProgram = "mlp_train";
const char* const kUsage = R"(usage: mlp_train [options]
  --hidden 512,512     hidden layer sizes (comma separated; empty for a linear model)
  --epochs 3           epochs to train in total (a resumed run continues up to this)
  --batch-size 128     mini-batch size
  --lr 0.001           AdamW learning rate
  --seed 0             seed for initialisation and shuffling
  --threads N          CPU threads, 1 to 4 x the hardware threads (default: all cores)
  --data-dir DIR       folder with the Fashion-MNIST IDX .gz files
  --checkpoint FILE    save model + optimizer after every epoch (safetensors)
  --resume FILE        continue training from a checkpoint
  --log FILE           CSV log of per-epoch figures (default mlp_train.csv; '' to disable)
  --plot FILE          PNG plot of the curves via gnuplot (default mlp_train.png when gnuplot is
                       installed; '' to disable)
  --precision 32-true  32-true, 64-true, 16-true, bf16-true, bf16-mixed, 16-mixed (bf16-mixed on
                       the cpu), transformer-engine, transformer-engine-float16 (FP8 training),
                       or the aliases 64, 32, 16, bf16
  --gemm LIBRARY       weft, eigen or openblas: what computes matrix products (default weft:
                       its own kernels for this CPU; eigen and openblas only when weft was built
                       with them, -DWEFT_EIGEN=ON, -DWEFT_OPENBLAS=ON)
  --strategy auto      auto, ddp or fsdp (several processes: under weft-run / torchrun, or --devices)
  --devices N          processes on this node (default: what the launcher started, else 1)
  --num-nodes M        nodes (default: what the launcher started, else 1)
  --device cpu         cpu or cuda (the current GPU, one process; needs weft built with CUDA)
  --cuda-graph         with --device cuda: replay each training step from one captured CUDA graph
  --no-progress        no per-step progress line
)";

}  // namespace weft::examples

namespace {

using examples::option_error;
using examples::parse_number;
using examples::usage_error;

std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto n = parse_number<int64_t>("--hidden", item);
    if (n <= 0) usage_error("--hidden sizes must be positive, got " + item);
    sizes.push_back(n);
  }
  return sizes;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << examples::kUsage;
      std::exit(0);
    }
    if (flag == "--no-progress") {
      o.progress = false;
      continue;
    }
    if (flag == "--cuda-graph") {
      o.cuda_graph = true;
      continue;
    }
    if (flag.empty() || flag[0] != '-')
      usage_error("unexpected argument '" + flag + "': mlp_train takes options only (--help lists them)");
    if (i + 1 >= argc) examples::missing_value_error(flag);
    const std::string value = argv[++i];
    if (flag == "--hidden") o.hidden = parse_sizes(value);
    else if (flag == "--epochs") o.epochs = parse_number<int64_t>(flag, value);
    else if (flag == "--batch-size") o.batch_size = parse_number<int64_t>(flag, value);
    else if (flag == "--lr") o.lr = parse_number<double>(flag, value);
    else if (flag == "--seed") o.seed = parse_number<uint64_t>(flag, value);
    else if (flag == "--threads") o.threads = parse_number<int>(flag, value);
    else if (flag == "--data-dir") o.data_dir = value;
    else if (flag == "--checkpoint") o.checkpoint = value;
    else if (flag == "--resume") o.resume = value;
    else if (flag == "--log") o.log = value;
    else if (flag == "--plot") {
      o.plot = value;
      o.plot_given = true;
    }
    else if (flag == "--precision") o.precision = value;
    else if (flag == "--gemm") o.gemm = value;
    else if (flag == "--strategy") o.strategy = value;
    else if (flag == "--devices") o.devices = parse_number<int64_t>(flag, value);
    else if (flag == "--num-nodes") o.num_nodes = parse_number<int64_t>(flag, value);
    else if (flag == "--device") o.device = value;
    else usage_error("unknown option " + flag);
  }
  return o;
}

// The epoch a checkpoint of this program was saved after (its "epoch" metadata).
int64_t saved_epoch(const io::SafetensorsMetadata& meta, const std::string& path) {
  const auto it = meta.find("epoch");
  if (it == meta.end()) option_error("--resume: '" + path + "' has no 'epoch' entry; expected a checkpoint saved by "
                                     "mlp_train --checkpoint");
  return parse_number<int64_t>("the checkpoint's epoch", it->second);
}

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

// Every value and path, before any data is read or any epoch runs. A new flag adds its check here.
void check_options(const Options& o) {
  if (o.epochs < 1) option_error("--epochs expects at least 1, got " + std::to_string(o.epochs));
  if (o.batch_size < 1) option_error("--batch-size expects at least 1, got " + std::to_string(o.batch_size));
  if (!(o.lr > 0)) option_error("--lr expects a positive number, got " + std::to_string(o.lr));
  // More threads than a few per hardware thread never helps a compute-bound run, and a huge count
  // exhausts the process (OpenMP starts them all).
  const int max_threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads && (*o.threads < 1 || *o.threads > max_threads))
    option_error("--threads expects 1 to " + std::to_string(max_threads) + " (4 x the hardware threads), got " +
                 std::to_string(*o.threads));
  if (!o.gemm.empty() && o.gemm != "weft" && o.gemm != "openblas" && o.gemm != "eigen")
    option_error("--gemm expects weft, eigen or openblas, got '" + o.gemm + "'");
  if (o.strategy != "auto" && o.strategy != "ddp" && o.strategy != "fsdp")
    option_error("--strategy expects auto, ddp or fsdp, got '" + o.strategy + "'");
  if (o.devices < 0 || o.num_nodes < 0) option_error("--devices and --num-nodes must be positive");
  if (o.device != "cpu" && o.device != "cuda") option_error("--device expects cpu or cuda, got '" + o.device + "'");
  const precision::PrecisionMode mode = [&] {
    try {
      precision::CaptureWarnings quiet;  // Fabric parses it again below and warns then
      return precision::parse_precision(o.precision);
    } catch (const Error& e) {
      option_error(std::string("--precision: ") + e.what());
    }
  }();
  if (o.cuda_graph) {
    if (o.device != "cuda") option_error("--cuda-graph captures the training step on a GPU; expected --device cuda");
    if (precision::precision_traits(mode).loss_scaling)
      option_error("--cuda-graph cannot capture --precision " + o.precision +
                   ": its loss scaler decides on the host whether a step is applied; expected 32-true, 64-true, "
                   "16-true, bf16-true or bf16-mixed");
  }
  if (o.device == "cuda") {
    if (o.strategy != "auto" || o.devices > 1 || o.num_nodes > 1 || distributed::launched_by_launcher())
      option_error("--device cuda trains in one process; expected no --strategy, --devices, --num-nodes or launcher");
    if (!o.gemm.empty())
      option_error("--gemm chooses the CPU's matrix library; with --device cuda the products run on cuBLAS");
    if (const std::string why = cuda::unavailable_reason(); !why.empty()) option_error("--device cuda: " + why);
  }
  const bool several = o.strategy != "auto" || o.devices > 1 || o.num_nodes > 1 ||
                       (distributed::launched_by_launcher() && distributed::read_dist_env(false).world_size > 1);
  if (several && !fabric::strategy_available("ddp"))
    option_error("--strategy, --devices, --num-nodes and launchers need several processes, which this build "
                 "(linked without weft_distributed) cannot run; use mlp_train_dist");
  if (o.gemm == "openblas" && !cpu_gemm_library_available(GemmLibrary::OpenBLAS))
    option_error("--gemm openblas: this build of weft has no OpenBLAS (install libopenblas-openmp-dev and configure "
                 "with -DWEFT_OPENBLAS=ON)");
  if (o.gemm == "eigen" && !cpu_gemm_library_available(GemmLibrary::Eigen))
    option_error("--gemm eigen: this build of weft has no Eigen (configure with -DWEFT_EIGEN=ON)");
  const char* kinds[] = {"images-idx3", "labels-idx1"};
  for (const char* split : {"train", "t10k"})
    for (const char* kind : kinds) {
      const std::string file = o.data_dir + "/" + split + "-" + kind + "-ubyte.gz";
      if (const std::string why = examples::unreadable_reason(file); !why.empty())
        option_error("--data-dir: " + why + "; expected a folder with the Fashion-MNIST IDX .gz files\n"
                     "Install them with:  apt-get install dataset-fashion-mnist");
    }
  if (!o.checkpoint.empty())
    if (const std::string why = examples::unwritable_reason(o.checkpoint); !why.empty())
      option_error("--checkpoint: " + why);
  if (!o.resume.empty()) {
    if (const std::string why = examples::unreadable_reason(o.resume); !why.empty()) option_error("--resume: " + why);
    io::SafetensorsMetadata meta;
    try {
      meta = io::read_checkpoint(o.resume).metadata;
    } catch (const Error& e) {
      option_error(std::string("--resume: ") + e.what());
    }
    const int64_t done = saved_epoch(meta, o.resume);
    if (done >= o.epochs)
      option_error("--resume: '" + o.resume + "' was saved after epoch " + std::to_string(done) + " and --epochs is " +
                   std::to_string(o.epochs) + ", so there is nothing left to train; expected --epochs above " +
                   std::to_string(done));
  }
  if (!o.log.empty())
    if (const std::string why = examples::unappendable_reason(o.log); !why.empty()) option_error("--log: " + why);
  if (o.plot_given && !o.plot.empty()) {
    if (o.log.empty()) option_error("--plot draws the CSV log, which --log '' turned off");
    if (!have_gnuplot()) option_error("--plot needs gnuplot (apt-get install gnuplot-nox), or --plot '' for no plot");
    if (const std::string why = examples::unwritable_reason(o.plot); !why.empty()) option_error("--plot: " + why);
  }
}

using examples::Split;

nn::Sequential build_model(const Options& o, int64_t inputs, int64_t classes) {
  nn::Sequential model;
  int64_t width = inputs;
  for (int64_t h : o.hidden) {
    model->push_back(nn::Linear(width, h));
    model->push_back(nn::ReLU());
    width = h;
  }
  model->push_back(nn::Linear(width, classes));
  return model;
}

double evaluate(const fabric::FabricModule& model, const Split& test) {
  NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0;
  constexpr int64_t kChunk = 2000;
  for (int64_t i = 0; i < test.images.size(0); i += kChunk) {
    const int64_t n = std::min(kChunk, test.images.size(0) - i);
    const Tensor predicted = argmax(model(test.images.narrow(0, i, n)), 1);
    correct += sum(eq(predicted, test.labels.narrow(0, i, n))).item<int64_t>();
  }
  model->train();
  return static_cast<double>(correct) / static_cast<double>(test.images.size(0));
}

void render_plot(const std::string& csv, const std::string& png, int64_t epochs) {
  if (png.empty() || csv.empty()) return;
  if (!have_gnuplot()) {
    std::cout << "no plot: gnuplot is not installed (apt-get install gnuplot-nox)\n";
    return;
  }
  const std::string script = png + ".gp";
  // Epochs are whole numbers: ticks on integers only (one per epoch up to 20, gnuplot's spacing
  // beyond, never a fraction). Each panel has one curve, which its title names, so no legend
  // sits on the data.
  const std::string xtics = epochs <= 20 ? "set xtics 1\n" : "set format x '%.0f'\n";
  std::ofstream(script) << "set terminal pngcairo size 900,400\nset output '" << png << "'\n"
                        << "set datafile separator ','\nset multiplot layout 1,2\n"
                        << "set key off\nset xlabel 'epoch'\n" << xtics << "set xrange [1:" << std::max<int64_t>(epochs, 2)
                        << "]\nset title 'train loss'\n"
                        << "plot '" << csv << "' using 1:2 skip 1 with linespoints\n"
                        << "set title 'test accuracy'\n"
                        << "plot '" << csv << "' using 1:3 skip 1 with linespoints\n"
                        << "unset multiplot\n";
  if (std::system(("gnuplot '" + script + "' 2> /dev/null").c_str()) == 0) std::cout << "plot: " << png << "\n";
  else std::cerr << "mlp_train: gnuplot could not draw " << png << "\n";
  std::filesystem::remove(script);
}

void progress_line(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss, double rate) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * step / steps);
  std::fprintf(stderr, "\repoch %lld/%lld [%s%s] %lld/%lld loss %.4f %.0f samples/s ", static_cast<long long>(epoch),
               static_cast<long long>(epochs), std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), static_cast<long long>(step),
               static_cast<long long>(steps), loss, rate);
}

// The dtype the matrix products of a precision run in, to name the GEMM kernel they take.
DType gemm_dtype(const std::string& precision) {
  if (precision == "bf16-mixed" || precision == "bf16-true") return kBFloat16;
  if (precision == "16-true" || precision == "16-mixed") return kFloat16;
  if (precision == "64-true") return kFloat64;
  return kFloat32;
}

std::string device_name(Device device) {
  std::ostringstream os;
  os << device;
  return os.str();
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  check_options(o);
  if (o.threads) set_num_threads(*o.threads);
  if (!o.gemm.empty()) set_cpu_gemm_library(gemm_library_from_name(o.gemm));
  Split train = examples::load_fashion_mnist(o.data_dir, "train");
  Split test = examples::load_fashion_mnist(o.data_dir, "t10k");

  fabric::FabricOptions fabric_options;
  fabric_options.accelerator = o.device;
  fabric_options.precision = o.precision;
  fabric_options.strategy = o.strategy;
  const bool launched = distributed::launched_by_launcher();
  const distributed::DistEnv env = launched ? distributed::read_dist_env() : distributed::DistEnv{};
  fabric_options.devices = o.devices > 0 ? o.devices : env.local_world_size;
  fabric_options.num_nodes = o.num_nodes > 0 ? o.num_nodes : env.world_size / env.local_world_size;
  // fsdp: every Linear its own unit (what distributed::module_type_auto_wrap_policy({"Linear"}) gives,
  // spelled here so that this program links without weft_distributed, which that helper is part of).
  fabric_options.auto_wrap_policy = [](const nn::Module& module, const std::string&, int64_t) {
    return module.type_name() == "Linear";
  };
  fabric::Fabric fabric(fabric_options);
  fabric.launch();
  const int world = fabric.world_size();
  if (o.batch_size % world != 0)
    usage_error("--batch-size (the global batch) must divide by the " + std::to_string(world) + " ranks");
  const int64_t local_batch = o.batch_size / world;
  fabric.print("precision: " + fabric.precision().precision() + ", strategy: " + fabric.strategy().name() +
               ", ranks: " + std::to_string(world) + ", device: " + device_name(fabric.device()));
  // The whole set is small (188 MB as float32): it goes to the device once, not batch by batch.
  train = {fabric.to_device(train.images), fabric.to_device(train.labels)};
  test = {fabric.to_device(test.images), fabric.to_device(test.labels)};
  fabric::Fabric::seed_everything(o.seed);
  nn::Sequential net = [&] {
    precision::Context init = fabric.init_module();
    return build_model(o, train.images.size(1), 10);
  }();
  const fabric::FabricModule model = fabric.setup_module(net);
  const fabric::FabricOptimizer optimizer =
      fabric.setup_optimizer(optim::AdamW(model.wrapped()->parameters(), {.lr = o.lr, .capturable = o.cuda_graph}));
  int64_t first_epoch = 1;
  if (!o.resume.empty()) {
    const auto meta = fabric.load(o.resume, model, &optimizer);
    first_epoch = saved_epoch(meta, o.resume) + 1;
    fabric.print("resumed from " + o.resume + " after epoch " + std::to_string(first_epoch - 1));
  }
  if (fabric.is_global_zero()) std::cout << *net << "\n";

  std::ofstream log;
  if (!o.log.empty() && fabric.is_global_zero()) {
    const bool append = !o.resume.empty() && std::filesystem::exists(o.log);
    log.open(o.log, append ? std::ios::app : std::ios::trunc);
    WEFT_CHECK(log.is_open(), "[mlp_train] cannot open the log '", o.log, "' for writing");
    if (!append) log << "epoch,train_loss,test_accuracy,seconds,samples_per_second\n";
  }

  const int64_t n = train.images.size(0);
  // One process shuffles the whole set; several take their shares of one shuffle per epoch.
  distributed::DistributedSampler sampler = fabric.distributed_sampler(n, {.seed = o.seed * 1000003ull});
  const int64_t mine = world == 1 ? n : sampler.num_samples();
  const int64_t steps = (mine + local_batch - 1) / local_batch;
  const bool show_progress = o.progress && isatty(STDERR_FILENO) && fabric.is_global_zero();

  // One training step on the rows `rows` of the training set; the loss is returned undetached.
  auto train_step = [&](const Tensor& rows) {
    const Tensor loss = cross_entropy(model(index_select(train.images, 0, rows)), index_select(train.labels, 0, rows));
    optimizer.zero_grad();
    fabric.backward(loss, &model);
    optimizer.step();
    return loss;
  };
  // --cuda-graph: the captured step reads the static `graph_rows` and adds its loss to the device
  // sum `graph_loss`, so that neither the batch nor the loss crosses to the host per step.
  std::optional<cuda::Graph> graph;
  Tensor graph_rows, graph_loss;
  int64_t warm_up_steps = 0;
  constexpr int64_t kWarmUpSteps = 3;
  if (o.cuda_graph) {
    graph.emplace();
    graph_rows = zeros({local_batch}, TensorOptions(kInt64).device(fabric.device()));
    graph_loss = zeros({}, TensorOptions(kFloat64).device(fabric.device()));
  }
  auto graph_step = [&] { graph_loss.add_(train_step(graph_rows).detach().to(kFloat64)); };

  double total_seconds = 0, accuracy = 0;
  for (int64_t epoch = first_epoch; epoch <= o.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    Tensor order;
    if (world == 1) {
      Generator shuffle(o.seed * 1000003ull + static_cast<uint64_t>(epoch));
      order = randperm(n, &shuffle);
    } else {
      sampler.set_epoch(epoch);
      order = sampler.indices();
    }
    order = fabric.to_device(order);
    double loss_sum = 0;
    if (graph) graph_loss.zero_();
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t begin = step * local_batch;
      const Tensor idx = order.narrow(0, begin, std::min(local_batch, mine - begin));
      if (!graph) {
        loss_sum += train_step(idx).item();
      } else if (idx.size(0) == local_batch) {
        graph_rows.copy_(idx);
        if (warm_up_steps < kWarmUpSteps) {
          graph->warm_up(graph_step);
          ++warm_up_steps;
        } else {
          if (!graph->is_captured()) graph->capture(graph_step);
          graph->replay();
        }
      } else {
        graph_loss.add_(train_step(idx).detach().to(kFloat64));  // the shorter last batch
      }
      const bool report = show_progress && (step % 20 == 19 || step + 1 == steps);
      if (graph && (report || step + 1 == steps)) loss_sum = graph_loss.item();
      if (report) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        progress_line(epoch, o.epochs, step + 1, steps, loss_sum / static_cast<double>(step + 1),
                      static_cast<double>(std::min(n, (step + 1) * o.batch_size)) / seconds);
      }
    }
    accuracy = evaluate(model, test);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    total_seconds += seconds;
    if (show_progress) std::fprintf(stderr, "\n");
    const double mean_loss = fabric.all_reduce(scalar_tensor(loss_sum / static_cast<double>(steps), kFloat64)).item();
    if (fabric.is_global_zero())
      std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.2f s (%.0f samples/s)\n",
                  static_cast<long long>(epoch), mean_loss, 100 * accuracy, seconds, static_cast<double>(n) / seconds);
    if (log.is_open()) log << epoch << ',' << mean_loss << ',' << accuracy << ',' << seconds << ',' << n / seconds << '\n';
    if (!o.checkpoint.empty()) {
      fabric.save(o.checkpoint, model, &optimizer, {{"epoch", std::to_string(epoch)}});
    }
  }
  if (log.is_open()) {
    log.close();
    render_plot(o.log, o.plot, o.epochs);
  }
  if (fabric.is_global_zero())
    std::printf("{\"program\": \"weft mlp_train\", \"threads\": %d, \"gemm\": \"%s\", \"kernel\": \"%s\", "
                "\"cpu_isa\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"cuda_graph\": %s, \"ranks\": %d, "
                "\"strategy\": \"%s\", \"epochs\": %lld, \"seconds\": %.3f, \"test_accuracy\": %.4f}\n",
                num_threads(), fabric.device().is_cuda() ? "cublas" : to_string(cpu_gemm_library()),
                fabric.device().is_cuda() ? "cublas" : cpu_gemm_kernel(gemm_dtype(fabric.precision().precision())).c_str(),
                std::string(cpu_isa_name(cpu_isa())).c_str(), device_name(fabric.device()).c_str(),
                std::string(precision::precision_name(fabric.precision().mode())).c_str(), o.cuda_graph ? "true" : "false", world,
                fabric.strategy().name().c_str(), static_cast<long long>(o.epochs), total_seconds, accuracy);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "mlp_train: " << e.what() << "\n";
  return 1;
}
