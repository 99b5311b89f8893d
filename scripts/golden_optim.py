#!/usr/bin/env python3
"""Writes tests/optim/golden_optim.h: what PyTorch 1.13 computes for weft's optimizer tests.

Runs torch.optim.SGD / Adam / AdamW (single-tensor implementations, foreach=False),
torch.nn.utils.clip_grad_norm_ / clip_grad_value_, and the LR schedulers StepLR,
CosineAnnealingLR, LinearLR and SequentialLR on small fixed inputs, and writes the inputs and the
results as C++ literals, so the tests need no Python. Doubles are printed with repr(), which
round-trips exactly.

float16 / bfloat16 cases follow weft's low-precision semantics, which PyTorch does not have: the
parameter is stored narrow, the optimizer state is float32. They are emulated with a float32
parameter that is rounded to the narrow type after every step.

Usage (from the repository root, with Debian's python3-torch):  python3 scripts/golden_optim.py
"""
import math
import os
import warnings

import torch

NUM_STEPS = 5
SHAPES = [(3, 4), (5,)]  # a weight and a bias
NUMEL = sum(math.prod(s) for s in SHAPES)
GRAD_SCALES = [1.0, 0.5, 2.0, 0.25, 1.0]  # uneven gradient sizes, so amsgrad's max matters
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "nn", "golden_optim.h")

# SequentialLR restarts its second scheduler with the deprecated step(epoch); that is the
# behaviour being recorded, not a problem.
warnings.filterwarnings("ignore", message="The epoch parameter")

gen = torch.Generator().manual_seed(20240601)


def fixed(shape):
    # Multiples of 1/64: exact in float32 and float16, and in bfloat16 while |x| < 4; each case
    # records its inputs as its dtype rounds them.
    return torch.round(torch.randn(shape, generator=gen, dtype=torch.float64) * 64) / 64


INIT = [fixed(s) for s in SHAPES]
GRADS = [[fixed(s) * GRAD_SCALES[k] for s in SHAPES] for k in range(NUM_STEPS)]


def lit(x):
    x = float(x)
    if math.isinf(x):
        return "kInf" if x > 0 else "-kInf"
    if math.isnan(x):
        return "kNaN"
    return repr(x)


def flat(tensors):
    return [float(v) for t in tensors for v in t.detach().reshape(-1).tolist()]


def array(values):
    return "{" + ", ".join(lit(v) for v in values) + "}"


# ---- optimizers ----

OPTIM_CASES = [
    # name, optimizer, dtype, [group options...]
    ("sgd_plain", "SGD", "float32", [dict(lr=0.1)]),
    ("sgd_momentum", "SGD", "float32", [dict(lr=0.1, momentum=0.9)]),
    ("sgd_nesterov", "SGD", "float32", [dict(lr=0.1, momentum=0.9, nesterov=True)]),
    ("sgd_weight_decay", "SGD", "float32", [dict(lr=0.1, weight_decay=0.05)]),
    ("sgd_momentum_weight_decay", "SGD", "float32", [dict(lr=0.1, momentum=0.5, weight_decay=0.05)]),
    ("sgd_dampening", "SGD", "float32", [dict(lr=0.1, momentum=0.9, dampening=0.3)]),
    ("sgd_two_groups", "SGD", "float32", [dict(lr=0.1, momentum=0.9), dict(lr=0.01, momentum=0.5)]),
    ("sgd_float64", "SGD", "float64", [dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)]),
    ("sgd_float16", "SGD", "float16", [dict(lr=0.1, momentum=0.9)]),
    ("adam", "Adam", "float32", [dict(lr=0.01)]),
    ("adam_weight_decay", "Adam", "float32", [dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.1)]),
    ("adam_amsgrad", "Adam", "float32", [dict(lr=0.01, betas=(0.9, 0.9), amsgrad=True)]),
    ("adam_two_groups", "Adam", "float32", [dict(lr=0.01), dict(lr=0.001, eps=1e-6)]),
    ("adam_float64", "Adam", "float64", [dict(lr=0.01, weight_decay=0.01, amsgrad=True)]),
    ("adam_bfloat16", "Adam", "bfloat16", [dict(lr=0.01)]),
    ("adamw", "AdamW", "float32", [dict(lr=0.01, weight_decay=0.1)]),
    ("adamw_default_decay", "AdamW", "float32", [dict(lr=0.01)]),
    ("adamw_amsgrad", "AdamW", "float32", [dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1, amsgrad=True)]),
]

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64,
                "float16": torch.float16, "bfloat16": torch.bfloat16}


def full_options(optimizer, options):
    """Every option of a group, with PyTorch's defaults filled in."""
    defaults = {"SGD": dict(lr=None, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
                "Adam": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False),
                "AdamW": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False)}
    return {**defaults[optimizer], **options}


def run_optimizer(optimizer, dtype, groups):
    narrow = dtype in ("float16", "bfloat16")
    compute = torch.float64 if dtype == "float64" else torch.float32
    store = TORCH_DTYPES[dtype]
    params = [t.to(store).to(compute).clone().requires_grad_() for t in INIT]
    # Parameters are split over the groups in order: group g gets params[first_g : first_g + n_g].
    split = [params] if len(groups) == 1 else [params[:1], params[1:]]
    cls = getattr(torch.optim, optimizer)
    opt = cls([dict(params=ps, **full_options(optimizer, o)) for ps, o in zip(split, groups)], foreach=False)
    expected, grads_used = [], []
    for k in range(NUM_STEPS):
        for p, g in zip(params, GRADS[k]):
            p.grad = g.to(store).to(compute)
        grads_used.append(flat([p.grad for p in params]))
        opt.step()
        if narrow:
            with torch.no_grad():
                for p in params:
                    p.copy_(p.to(store).to(compute))
        expected.append(flat(params))
    return [len(ps) for ps in split], grads_used, expected


def optim_case(name, optimizer, dtype, groups):
    counts, grads, expected = run_optimizer(optimizer, dtype, groups)
    if "amsgrad" in name:
        # The case only tests something if the running max differs from the plain average.
        plain = [{**g, "amsgrad": False} for g in groups]
        _, _, without = run_optimizer(optimizer, dtype, plain)
        assert without[-1] != expected[-1], name
    group_lits = []
    for o, n in zip(groups, counts):
        f = full_options(optimizer, o)
        betas = f.get("betas", (0.0, 0.0))
        group_lits.append(
            "{%s, %s, %s, %s, %s, %s, %s, %s, %s, %d}" % (
                lit(f["lr"]), lit(f.get("momentum", 0.0)), lit(f.get("dampening", 0.0)),
                lit(f["weight_decay"]), lit(betas[0]), lit(betas[1]), lit(f.get("eps", 0.0)),
                "true" if f.get("nesterov", False) else "false",
                "true" if f.get("amsgrad", False) else "false", n))
    init = flat([t.to(TORCH_DTYPES[dtype]) for t in INIT])
    return ("    {\"%s\", \"%s\", \"%s\", %d, {%s},\n     %s,\n     {%s},\n     {%s}}" % (
        name, optimizer, dtype, len(groups), ", ".join(group_lits), array(init),
        ",\n      ".join(array(g) for g in grads), ",\n      ".join(array(e) for e in expected)))


# ---- gradient clipping ----

CLIP_NORM_CASES = [
    ("l2_clipped", 1.0, 2.0),
    ("l2_not_clipped", 100.0, 2.0),
    ("l1_clipped", 2.0, 1.0),
    ("inf_clipped", 0.5, math.inf),
    ("p3_clipped", 1.5, 3.0),
]


def clip_norm_case(name, max_norm, norm_type):
    params = [t.to(torch.float32).clone().requires_grad_() for t in INIT]
    for p, g in zip(params, GRADS[2]):
        p.grad = g.to(torch.float32).clone()
    before = flat([p.grad for p in params])
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    return "    {\"%s\", %s, %s, %s, %s, %s}" % (
        name, lit(max_norm), lit(norm_type), array(before), lit(total.item()), array(flat([p.grad for p in params])))


def clip_value_case(clip_value):
    params = [t.to(torch.float32).clone().requires_grad_() for t in INIT]
    for p, g in zip(params, GRADS[2]):
        p.grad = g.to(torch.float32).clone()
    before = flat([p.grad for p in params])
    torch.nn.utils.clip_grad_value_(params, clip_value)
    return "{%s, %s, %s}" % (lit(clip_value), array(before), array(flat([p.grad for p in params])))


# ---- LR schedulers ----

SCHEDULER_STEPS = 30
BASE_LRS = (0.1, 0.05)
S = torch.optim.lr_scheduler

SCHEDULER_CASES = [
    # name, kind, step_size, gamma, t_max, eta_min, start_factor, end_factor, total_iters, milestone
    ("step", "StepLR", 3, 0.5, 0, 0.0, 0.0, 0.0, 0, 0),
    ("cosine", "CosineAnnealingLR", 0, 0.0, 10, 0.001, 0.0, 0.0, 0, 0),
    ("linear_warmup", "LinearLR", 0, 0.0, 0, 0.0, 0.1, 1.0, 5, 0),
    ("linear_decay", "LinearLR", 0, 0.0, 0, 0.0, 1.0, 0.2, 8, 0),
    ("warmup_then_cosine", "SequentialLR", 0, 0.0, 12, 0.0, 0.1, 1.0, 5, 5),
]


def make_scheduler(opt, kind, step_size, gamma, t_max, eta_min, start, end, total, milestone):
    if kind == "StepLR":
        return S.StepLR(opt, step_size, gamma)
    if kind == "CosineAnnealingLR":
        return S.CosineAnnealingLR(opt, t_max, eta_min)
    if kind == "LinearLR":
        return S.LinearLR(opt, start, end, total)
    warmup = S.LinearLR(opt, start, end, total)
    cosine = S.CosineAnnealingLR(opt, t_max, eta_min)
    return S.SequentialLR(opt, [warmup, cosine], [milestone])


def scheduler_case(name, kind, *args):
    params = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
    opt = torch.optim.SGD([dict(params=[params[0]], lr=BASE_LRS[0]), dict(params=[params[1]], lr=BASE_LRS[1])])
    sched = make_scheduler(opt, kind, *args)
    lrs = [list(sched.get_last_lr())]
    for _ in range(SCHEDULER_STEPS):
        opt.step()
        sched.step()
        lrs.append(list(sched.get_last_lr()))
    step_size, gamma, t_max, eta_min, start, end, total, milestone = args
    return "    {\"%s\", \"%s\", %d, %s, %d, %s, %s, %s, %d, %d,\n     {%s}}" % (
        name, kind, step_size, lit(gamma), t_max, lit(eta_min), lit(start), lit(end), total, milestone,
        ",\n      ".join(array(l) for l in lrs))


def main():
    optim = ",\n".join(optim_case(*c) for c in OPTIM_CASES)
    clip = ",\n".join(clip_norm_case(*c) for c in CLIP_NORM_CASES)
    sched = ",\n".join(scheduler_case(*c) for c in SCHEDULER_CASES)
    shapes = ", ".join("{%s}" % ", ".join(str(d) for d in s + (0,) * (2 - len(s))) for s in SHAPES)
    text = f"""\
// Generated by scripts/golden_optim.py with PyTorch {torch.__version__} (Debian python3-torch); do not edit.
// Regenerate from the repository root with: python3 scripts/golden_optim.py
//
// What PyTorch computes for the optimizer, gradient-clipping and LR-scheduler tests
// (tests/optim/test_optim*.cpp): inputs, options and results as literals.
#pragma once

#include <cstdint>
#include <limits>

namespace golden_optim {{

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Every optimizer case has the same two parameters (a weight and a bias), concatenated row-major
// in the arrays below; a trailing 0 in a shape means the tensor has one dimension.
inline constexpr int kNumParams = {len(SHAPES)};
inline constexpr int64_t kShapes[kNumParams][2] = {{{shapes}}};
inline constexpr int kNumel = {NUMEL};
inline constexpr int kSteps = {NUM_STEPS};

// One parameter group's options (fields an optimizer lacks are 0); its parameters are the next
// num_params of the two.
struct Group {{
  double lr, momentum, dampening, weight_decay, beta1, beta2, eps;
  bool nesterov, amsgrad;
  int num_params;
}};

// dtype "float16" / "bfloat16": parameters stored narrow, optimizer state in float32 (emulated in
// PyTorch by rounding a float32 parameter after each step).
struct OptimCase {{
  const char* name;
  const char* optimizer;  // "SGD", "Adam" or "AdamW"
  const char* dtype;
  int num_groups;
  Group groups[2];
  double init[kNumel];
  double grads[kSteps][kNumel];     // .grad before step k
  double expected[kSteps][kNumel];  // parameters after step k
}};

inline constexpr OptimCase kOptimCases[] = {{
{optim}
}};

// clip_grad_norm_ on float32 gradients (the same two tensors).
struct ClipNormCase {{
  const char* name;
  double max_norm;
  double norm_type;
  double grads[kNumel];
  double total_norm;
  double clipped[kNumel];
}};

inline constexpr ClipNormCase kClipNormCases[] = {{
{clip}
}};

struct ClipValueCase {{
  double clip_value;
  double grads[kNumel];
  double clipped[kNumel];
}};

inline constexpr ClipValueCase kClipValueCase = {clip_value_case(0.5)};

// LR schedulers on an SGD with two groups (lr {lit(BASE_LRS[0])} and {lit(BASE_LRS[1])}). lrs[0] is
// get_last_lr() after construction, lrs[k] after k steps. Fields a kind does not use are 0;
// SequentialLR is LinearLR(start_factor, end_factor, total_iters) then
// CosineAnnealingLR(t_max, eta_min), switching at milestone.
inline constexpr int kSchedulerSteps = {SCHEDULER_STEPS};
inline constexpr double kBaseLrs[2] = {{{lit(BASE_LRS[0])}, {lit(BASE_LRS[1])}}};

struct SchedulerCase {{
  const char* name;
  const char* kind;
  int64_t step_size;
  double gamma;
  int64_t t_max;
  double eta_min;
  double start_factor, end_factor;
  int64_t total_iters;
  int64_t milestone;
  double lrs[kSchedulerSteps + 1][2];
}};

inline constexpr SchedulerCase kSchedulerCases[] = {{
{sched}
}};

}}  // namespace golden_optim
"""
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
