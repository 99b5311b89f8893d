// Learning-rate schedulers, as torch.optim.lr_scheduler (PyTorch 1.13): StepLR, CosineAnnealingLR,
// LinearLR (linear warm-up) and SequentialLR (e.g. warm-up, then cosine).
//
// A scheduler writes each parameter group's lr (Optimizer::set_lr) when constructed and on every
// step(); call it after optimizer.step(). Like PyTorch's, the schedules are chainable: each step
// computes the new lr from the group's current lr, so a change made to the lr outside the scheduler
// carries forward. Left alone, they follow the closed forms:
//   StepLR             base · γ^⌊t / step_size⌋
//   CosineAnnealingLR  η_min + (base − η_min) · (1 + cos(π t / T_max)) / 2
//   LinearLR           base · (start + (end − start) · min(t, total_iters) / total_iters)
// where base is the group's lr when the first scheduler attached to the optimizer (its
// initial_lr) and t = last_epoch() counts steps since construction.
//
// State dicts are flat string maps: "scheduler" (the class, checked on load), "last_epoch",
// "step_count", "base_lrs" and "last_lr" (comma-separated, %.17g), the hyperparameters, and for
// SequentialLR "milestones" plus each child's entries under "schedulers.<k>.".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace weft::optim {

using SchedulerState = std::map<std::string, std::string>;

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances the schedule by one and writes the new lr into every parameter group.
  virtual void step() = 0;
  // The lr of each group after the latest step (or construction).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  Optimizer& optimizer() const { return optimizer_; }
  const std::string& name() const { return name_; }

  virtual SchedulerState state_dict() const = 0;
  virtual void load_state_dict(const SchedulerState& state) = 0;

 protected:
  LRScheduler(Optimizer& optimizer, std::string name) : optimizer_(optimizer), name_(std::move(name)) {}

  Optimizer& optimizer_;
  std::string name_;
  int64_t last_epoch_ = -1;
  std::vector<double> last_lr_;
};

// PyTorch's _LRScheduler: a schedule given by a chainable form (get_lr) and a closed form.
class ChainableLRScheduler : public LRScheduler {
 public:
  void step() override;
  // Each group's lr when the first scheduler attached to the optimizer.
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

 protected:
  // Records initial_lr in groups that have none and takes base_lrs from it.
  ChainableLRScheduler(Optimizer& optimizer, std::string name);
  // PyTorch's _initial_step: the first step, to epoch 0. Every derived constructor ends with it
  // (a base constructor cannot call the derived get_lr).
  void initial_step();
  // The next lr of each group from its current lr, at last_epoch_ (already advanced).
  virtual std::vector<double> get_lr() const = 0;
  // The lr of each group at last_epoch_ from base_lrs_ alone.
  virtual std::vector<double> closed_form_lr() const = 0;
  virtual void save_options(SchedulerState& state) const = 0;
  virtual void load_options(const SchedulerState& state) = 0;

  std::vector<double> current_lrs() const;

  int64_t step_count_ = 0;
  std::vector<double> base_lrs_;

 private:
  friend class SequentialLR;
  // PyTorch's step(epoch): jumps to `epoch` with the closed form (SequentialLR's restarts).
  void step_to(int64_t epoch);
  void apply(const std::vector<double>& lrs);
};

// Multiplies the lr by gamma every step_size steps.
class StepLR : public ChainableLRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;
  void save_options(SchedulerState& state) const override;
  void load_options(const SchedulerState& state) override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Anneals the lr from base to eta_min along half a cosine over t_max steps (and back up after,
// as PyTorch's does).
class CosineAnnealingLR : public ChainableLRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;
  void save_options(SchedulerState& state) const override;
  void load_options(const SchedulerState& state) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Scales the lr by a factor going linearly from start_factor to end_factor over total_iters
// steps, then holds it: with end_factor = 1, a linear warm-up.
class LinearLR : public ChainableLRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;
  void save_options(SchedulerState& state) const override;
  void load_options(const SchedulerState& state) override;

 private:
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

// Runs schedulers one after another: schedulers[k] drives steps [milestones[k-1], milestones[k]),
// and restarts from its epoch 0 when its milestone is reached. Construction resets the groups to
// their initial lr and replays schedulers[0]'s first step, as PyTorch's does.
//   auto warmup = std::make_shared<optim::LinearLR>(opt, 0.01, 1.0, 100);
//   auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, 900);
//   optim::SequentialLR schedule(opt, {warmup, cosine}, {100});
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<ChainableLRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  const std::vector<std::shared_ptr<ChainableLRScheduler>>& schedulers() const { return schedulers_; }

  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

 private:
  std::vector<std::shared_ptr<ChainableLRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace weft::optim
