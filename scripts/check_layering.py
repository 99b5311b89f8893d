#!/usr/bin/env python3
"""Checks weft's floor plan (docs/ARCHITECTURE.md) from the #include lines of the tree.

Rules:
  1. A library file on floor F (a file under F/) includes no header of a floor above F, and never
     weft.h. Floors, lowest first: tensor, nn, optim, io, precision, models, distributed, fabric.
  2. A test file under tests/F/ includes, of weft's library headers, only umbrellas X/all.h of
     floors X at or below F, and internal headers of F itself (white-box tests of F's kernels);
     everything else it includes is a test helper under tests/. So a tensor test cannot use nn::.
  3. An instruction-set kernel unit (<name>_avx2.cpp, _avx512.cpp, _avx512vnni.cpp,
     _avx512bf16.cpp, _amx.cpp) includes only tensor/cpu/simd.h and declaration headers, which themselves
     include nothing but <cstddef>/<cstdint> and define nothing inline or as a template
     (Note [ISA kernel units] in tensor/cpu/simd.h), and no standard header beyond those two.
  4. A file of the core library (outside distributed/ and fabric/multiprocess/) includes no header
     of fabric/multiprocess/: that code is only in weft_distributed, which a one-process program
     does not link (Note [Strategy table] in fabric/strategy.h; the links of mlp_train and of the
     package consumer check the rest of the split).

Usage:
  check_layering.py [ROOT]     check the tree at ROOT (default: this script's repository)
  check_layering.py --self-test
      plant one violation of each rule in a scratch tree and check that each is reported
Exit status 0 when the tree obeys every rule, 1 otherwise (each violation printed on a line).
"""
import os
import re
import sys
import tempfile

FLOORS = ["tensor", "nn", "optim", "io", "precision", "models", "distributed", "fabric"]
ISA_UNIT = re.compile(r"_(avx2|avx512|avx512vnni|avx512bf16|amx)\.cpp$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
DECLARATION_STD_HEADERS = {"cstddef", "cstdint"}
DISTRIBUTED_ONLY = ("distributed/", "fabric/multiprocess/")


def floor_of(path):
    head = path.split("/", 1)[0]
    return FLOORS.index(head) if head in FLOORS else None


def includes(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def source_files(root, top):
    base = os.path.join(root, top)
    for dirpath, _, names in os.walk(base):
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def check_library(root, rel, problems):
    floor = floor_of(rel)
    for kind, target in includes(root, rel):
        if kind != '"':
            continue
        if target == "weft.h":
            problems.append(f"{rel}: includes weft.h; a library file includes the headers it uses")
            continue
        target_floor = floor_of(target)
        if target_floor is not None and target_floor > floor:
            problems.append(f"{rel}: floor '{FLOORS[floor]}' includes {target} of the higher floor "
                            f"'{FLOORS[target_floor]}'")
        elif target.startswith("fabric/multiprocess/") and not rel.startswith(DISTRIBUTED_ONLY):
            problems.append(f"{rel}: a core library file includes {target}, which only weft_distributed has")


def check_test(root, rel, problems):
    floor = FLOORS.index(rel.split("/")[1])
    here = os.path.dirname(rel)
    for kind, target in includes(root, rel):
        if kind != '"':
            continue
        helper = os.path.normpath(os.path.join(here, target))
        if not os.path.exists(os.path.join(root, helper)):
            helper = os.path.join("tests", target)
        if os.path.exists(os.path.join(root, helper)):  # a test helper, checked as a file of its own floor
            helper_floor = helper.split("/")[1]
            if helper_floor in FLOORS and FLOORS.index(helper_floor) > floor:
                problems.append(f"{rel}: a test of floor '{FLOORS[floor]}' includes {target}, a test helper of "
                                f"the higher floor '{helper_floor}'")
            continue
        target_floor = floor_of(target)
        if target == "weft.h" or target_floor is None:
            problems.append(f"{rel}: includes {target}; tests of '{FLOORS[floor]}' include "
                            f"'{FLOORS[floor]}/all.h' instead")
        elif target_floor > floor:
            problems.append(f"{rel}: a test of floor '{FLOORS[floor]}' includes {target} of the higher floor "
                            f"'{FLOORS[target_floor]}'")
        elif target_floor < floor and not target.endswith("/all.h"):
            problems.append(f"{rel}: includes {target}; lower floors come through their umbrella "
                            f"'{target.split('/')[0]}/all.h'")


def check_isa_unit(root, rel, problems):
    for kind, target in includes(root, rel):
        if kind == "<":
            if target not in DECLARATION_STD_HEADERS:
                problems.append(f"{rel}: ISA kernel unit includes <{target}>; only <cstddef>, <cstdint> and "
                                f"tensor/cpu/simd.h are allowed (Note [ISA kernel units])")
            continue
        if target == "tensor/cpu/simd.h":
            continue
        header = os.path.join(root, target)
        if not os.path.exists(header):
            problems.append(f"{rel}: includes {target}, which is not a weft header")
            continue
        with open(header, encoding="utf-8") as f:
            text = f.read()
        bad = [t for k, t in INCLUDE.findall(text) if k == '"' or t not in DECLARATION_STD_HEADERS]
        code = re.sub(r"//[^\n]*", "", text)
        if bad or re.search(r"\b(inline|template)\b", code):
            problems.append(f"{rel}: includes {target}, which is not a plain declaration header (it includes "
                            f"{bad or 'nothing else'} or defines something inline/as a template)")


def check(root):
    problems = []
    for floor in FLOORS:
        for rel in source_files(root, floor):
            check_library(root, rel, problems)
            if ISA_UNIT.search(rel):
                check_isa_unit(root, rel, problems)
        for rel in source_files(root, os.path.join("tests", floor)):
            check_test(root, rel, problems)
    return problems


def self_test():
    planted = {
        "tensor/ops.h": '#include "nn/module.h"\n',
        "nn/module.h": '#include "tensor/ops.h"\n',
        "tests/tensor/test_x.cpp": '#include "tensor/all.h"\n#include "nn/all.h"\n',
        "tests/nn/test_y.cpp": '#include "weft.h"\n',
        "tests/optim/test_z.cpp": '#include "nn/module.h"\n',
        "tests/io/helper.h": '#include "io/all.h"\n',
        "tests/nn/test_w.cpp": '#include "io/helper.h"\n',
        "tensor/cpu/gemm_avx2.cpp": '#include "tensor/cpu/simd.h"\n#include <algorithm>\n',
        "tensor/cpu/gemm_avx512.cpp": '#include "tensor/cpu/simd.h"\n#include "tensor/ops.h"\n',
        "fabric/fabric.cpp": '#include "fabric/multiprocess/process_group_strategy.h"\n',
    }
    expected = [
        "tensor/ops.h: floor 'tensor' includes nn/module.h of the higher floor 'nn'",
        "tests/tensor/test_x.cpp: a test of floor 'tensor' includes nn/all.h",
        "tests/nn/test_y.cpp: includes weft.h",
        "tests/optim/test_z.cpp: includes nn/module.h; lower floors come through their umbrella",
        "tests/nn/test_w.cpp: a test of floor 'nn' includes io/helper.h, a test helper of the higher floor 'io'",
        "tensor/cpu/gemm_avx2.cpp: ISA kernel unit includes <algorithm>",
        "tensor/cpu/gemm_avx512.cpp: includes tensor/ops.h, which is not a plain declaration header",
        "fabric/fabric.cpp: a core library file includes fabric/multiprocess/process_group_strategy.h",
    ]
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        problems = check(root)
    missed = [e for e in expected if not any(p.startswith(e) for p in problems)]
    for p in problems:
        print("reported:", p)
    for m in missed:
        print("NOT REPORTED:", m)
    wrong = len(problems) != len(expected)
    if wrong:
        print(f"expected exactly {len(expected)} reports, got {len(problems)}")
    return 1 if missed or wrong else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    print(f"layering: {len(problems)} violation(s)" if problems else "layering: every include points down")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
