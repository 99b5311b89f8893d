// The LR schedulers of lr_scheduler.h. Each formula is written in the same order of operations as
// PyTorch 1.13's Python, so the schedules agree with it to the last bit or two.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace weft::optim {

namespace {

template <class T>
std::string format_list(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ',';
    out += format_scalar(v);
  }
  return out;
}

const std::string& entry(const std::string& op, const SchedulerState& state, const std::string& key) {
  auto it = state.find(key);
  WEFT_CHECK(it != state.end(), "[", op, "] the state dict has no '", key, "'");
  return it->second;
}

template <class T>
void read(const std::string& op, const SchedulerState& state, const std::string& key, T& out) {
  parse_scalar(key, entry(op, state, key), out);
}

template <class T>
void read_list(const std::string& op, const SchedulerState& state, const std::string& key, std::vector<T>& out) {
  const std::string& text = entry(op, state, key);
  out.clear();
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    T value{};
    parse_scalar(key, text.substr(begin, end - begin), value);
    out.push_back(value);
    begin = end + 1;
  }
}

void check_name(const std::string& name, const SchedulerState& state) {
  const std::string& saved = entry(name + ".load_state_dict", state, "scheduler");
  WEFT_CHECK(saved == name, "[", name, ".load_state_dict] expected a state dict saved by ", name,
             ", got one saved by ", saved);
}

// Python's a % b for b > 0: never negative.
int64_t floor_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

}  // namespace

// ---- ChainableLRScheduler ----

ChainableLRScheduler::ChainableLRScheduler(Optimizer& optimizer, std::string name)
    : LRScheduler(optimizer, std::move(name)) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    if (!optimizer.initial_lr(g)) optimizer.set_initial_lr(g, optimizer.lr(g));
    base_lrs_.push_back(*optimizer.initial_lr(g));
  }
}

void ChainableLRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

std::vector<double> ChainableLRScheduler::current_lrs() const {
  WEFT_CHECK(optimizer_.num_param_groups() == base_lrs_.size(), "[", name_, "] the optimizer has ",
             optimizer_.num_param_groups(), " parameter groups, but the scheduler was made for ", base_lrs_.size());
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) lrs.push_back(optimizer_.lr(g));
  return lrs;
}

void ChainableLRScheduler::apply(const std::vector<double>& lrs) {
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_lr_ = current_lrs();
}

void ChainableLRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void ChainableLRScheduler::step_to(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  apply(closed_form_lr());
}

SchedulerState ChainableLRScheduler::state_dict() const {
  SchedulerState state;
  state["scheduler"] = name_;
  state["last_epoch"] = std::to_string(last_epoch_);
  state["step_count"] = std::to_string(step_count_);
  state["base_lrs"] = format_list(base_lrs_);
  state["last_lr"] = format_list(last_lr_);
  save_options(state);
  return state;
}

void ChainableLRScheduler::load_state_dict(const SchedulerState& state) {
  const std::string op = name_ + ".load_state_dict";
  check_name(name_, state);
  int64_t last_epoch = 0, step_count = 0;
  std::vector<double> base_lrs, last_lr;
  read(op, state, "last_epoch", last_epoch);
  read(op, state, "step_count", step_count);
  read_list(op, state, "base_lrs", base_lrs);
  read_list(op, state, "last_lr", last_lr);
  WEFT_CHECK(base_lrs.size() == optimizer_.num_param_groups() && last_lr.size() == base_lrs.size(), "[", op,
             "] the optimizer has ", optimizer_.num_param_groups(), " parameter groups, the state dict has ",
             base_lrs.size(), " base lrs and ", last_lr.size(), " last lrs");
  load_options(state);
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base_lrs);
  last_lr_ = std::move(last_lr);
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : ChainableLRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  WEFT_CHECK(step_size >= 1, "[StepLR] expected step_size >= 1, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}

void StepLR::save_options(SchedulerState& state) const {
  state["step_size"] = std::to_string(step_size_);
  state["gamma"] = format_scalar(gamma_);
}

void StepLR::load_options(const SchedulerState& state) {
  int64_t step_size = 0;
  double gamma = 0;
  read("StepLR.load_state_dict", state, "step_size", step_size);
  read("StepLR.load_state_dict", state, "gamma", gamma);
  WEFT_CHECK(step_size >= 1, "[StepLR.load_state_dict] expected step_size >= 1, got ", step_size);
  step_size_ = step_size;
  gamma_ = gamma;
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : ChainableLRScheduler(optimizer, "CosineAnnealingLR"), t_max_(t_max), eta_min_(eta_min) {
  WEFT_CHECK(t_max >= 1, "[CosineAnnealingLR] expected t_max >= 1, got ", t_max);
  initial_step();
}

// PyTorch also has a branch for a first step that starts past epoch 0, which only a scheduler
// constructed with last_epoch > -1 reaches; weft resumes through load_state_dict instead.
std::vector<double> CosineAnnealingLR::get_lr() const {
  constexpr double pi = std::numbers::pi;
  const double t = static_cast<double>(last_epoch_), t_max = static_cast<double>(t_max_);
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  if (floor_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0) {
    // Just past the minimum, where the ratio below would divide by zero.
    for (size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / t_max)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(pi * t / t_max)) / (1 + std::cos(pi * (t - 1) / t_max)) * (lr - eta_min_) + eta_min_;
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  constexpr double pi = std::numbers::pi;
  const double t = static_cast<double>(last_epoch_), t_max = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(pi * t / t_max)) / 2);
  return lrs;
}

void CosineAnnealingLR::save_options(SchedulerState& state) const {
  state["t_max"] = std::to_string(t_max_);
  state["eta_min"] = format_scalar(eta_min_);
}

void CosineAnnealingLR::load_options(const SchedulerState& state) {
  int64_t t_max = 0;
  double eta_min = 0;
  read("CosineAnnealingLR.load_state_dict", state, "t_max", t_max);
  read("CosineAnnealingLR.load_state_dict", state, "eta_min", eta_min);
  WEFT_CHECK(t_max >= 1, "[CosineAnnealingLR.load_state_dict] expected t_max >= 1, got ", t_max);
  t_max_ = t_max;
  eta_min_ = eta_min;
}

// ---- LinearLR ----

namespace {

void check_linear_factors(const char* op, double start_factor, double end_factor, int64_t total_iters) {
  WEFT_CHECK(start_factor > 0.0 && start_factor <= 1.0, "[", op,
             "] starting multiplicative factor expected to be greater than 0 and less or equal to 1, got ",
             start_factor);
  WEFT_CHECK(end_factor >= 0.0 && end_factor <= 1.0, "[", op,
             "] ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  WEFT_CHECK(total_iters >= 1, "[", op, "] expected total_iters >= 1, got ", total_iters);
}

}  // namespace

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : ChainableLRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  check_linear_factors("LinearLR", start_factor, end_factor, total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double delta = end_factor_ - start_factor_;
  const double previous = static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(last_epoch_ - 1) * delta;
  for (double& lr : lrs) lr = lr * (1. + delta / previous);
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  const double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_)));
  return lrs;
}

void LinearLR::save_options(SchedulerState& state) const {
  state["start_factor"] = format_scalar(start_factor_);
  state["end_factor"] = format_scalar(end_factor_);
  state["total_iters"] = std::to_string(total_iters_);
}

void LinearLR::load_options(const SchedulerState& state) {
  double start_factor = 0, end_factor = 0;
  int64_t total_iters = 0;
  read("LinearLR.load_state_dict", state, "start_factor", start_factor);
  read("LinearLR.load_state_dict", state, "end_factor", end_factor);
  read("LinearLR.load_state_dict", state, "total_iters", total_iters);
  check_linear_factors("LinearLR.load_state_dict", start_factor, end_factor, total_iters);
  start_factor_ = start_factor;
  end_factor_ = end_factor;
  total_iters_ = total_iters;
}

// ---- SequentialLR ----

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<ChainableLRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  WEFT_CHECK(!schedulers_.empty(), "[SequentialLR] expected at least one scheduler");
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    WEFT_CHECK(schedulers_[k] != nullptr, "[SequentialLR] scheduler ", k, " is null");
    WEFT_CHECK(&schedulers_[k]->optimizer() == &optimizer, "[SequentialLR] expects all schedulers to belong to "
               "the same optimizer, but scheduler ", k, " belongs to another");
  }
  WEFT_CHECK(milestones_.size() + 1 == schedulers_.size(), "[SequentialLR] expects one milestone fewer than "
             "schedulers, got ", schedulers_.size(), " schedulers and ", milestones_.size(), " milestones");
  WEFT_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), "[SequentialLR] milestones must be in "
             "increasing order");

  last_epoch_ = 0;
  // The children stepped once each when they were constructed; undo that and replay the first's.
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    WEFT_CHECK(optimizer.initial_lr(g).has_value(), "[SequentialLR] parameter group ", g,
               " was added after its schedulers were made");
    optimizer.set_lr(g, *optimizer.initial_lr(g));
  }
  for (auto& scheduler : schedulers_) scheduler->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t index =
      static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  ChainableLRScheduler& scheduler = *schedulers_[index];
  if (index > 0 && milestones_[index - 1] == last_epoch_)
    scheduler.step_to(0);
  else
    scheduler.step();
  last_lr_ = scheduler.get_last_lr();
}

SchedulerState SequentialLR::state_dict() const {
  SchedulerState state;
  state["scheduler"] = name_;
  state["last_epoch"] = std::to_string(last_epoch_);
  state["milestones"] = format_list(milestones_);
  state["last_lr"] = format_list(last_lr_);
  for (size_t k = 0; k < schedulers_.size(); ++k)
    for (const auto& [key, value] : schedulers_[k]->state_dict())
      state["schedulers." + std::to_string(k) + "." + key] = value;
  return state;
}

void SequentialLR::load_state_dict(const SchedulerState& state) {
  const std::string op = "SequentialLR.load_state_dict";
  check_name(name_, state);
  int64_t last_epoch = 0;
  std::vector<int64_t> milestones;
  std::vector<double> last_lr;
  read(op, state, "last_epoch", last_epoch);
  read_list(op, state, "milestones", milestones);
  read_list(op, state, "last_lr", last_lr);
  WEFT_CHECK(milestones.size() == milestones_.size(), "[", op, "] this SequentialLR has ", milestones_.size(),
             " milestones, the state dict has ", milestones.size());
  std::vector<SchedulerState> children(schedulers_.size());
  for (const auto& [key, value] : state) {
    if (key.rfind("schedulers.", 0) != 0) continue;
    const size_t dot = key.find('.', 11);
    size_t k = schedulers_.size();
    if (dot != std::string::npos) {
      int64_t parsed = -1;
      parse_scalar(key, key.substr(11, dot - 11), parsed);
      if (parsed >= 0) k = static_cast<size_t>(parsed);
    }
    WEFT_CHECK(k < schedulers_.size(), "[", op, "] '", key, "' names no scheduler of this SequentialLR, which has ",
               schedulers_.size());
    children[k][key.substr(dot + 1)] = value;
  }
  // Every child's kind is checked before any child loads, so a state dict saved by another
  // sequence of schedulers changes nothing.
  for (size_t k = 0; k < schedulers_.size(); ++k) check_name(schedulers_[k]->name(), children[k]);
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->load_state_dict(children[k]);
  last_epoch_ = last_epoch;
  milestones_ = std::move(milestones);
  last_lr_ = std::move(last_lr);
}

}  // namespace weft::optim
