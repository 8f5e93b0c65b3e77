#!/usr/bin/env python3
"""Checks the layering of kpool's headers and sources by their #includes.

usage: check-layering.py ROOT

Scans every C and C++ file (.h .hpp .c .cpp .def .inc) under the folders
the rules name, relative to ROOT, for `#include "..."` and `#include <...>`
lines, and reports each include that a rule forbids:

* the ABI leaf, include/kpool/ABI, includes nothing else of kpool (the
  generated kpool/Version.h excepted), no MLIR, LLVM or CUDA;
* the compiler side -- lib/{Dialect,Conversion,Pipelines,Kernels} and
  include/kpool/{Dialect,Conversion,Pipelines,Kernels} -- includes no
  runtime header (kpool/Runtime/*) and no C API header (kpool-c/*);
* the runtime core -- lib/Runtime/Core and its headers, the ones of
  include/kpool/Runtime that KPoolRuntimeCore implements -- includes no
  header of the dialect, the conversions, the pipelines or the kernel
  module (kpool/{Dialect,Conversion,Pipelines,Kernels}/*), no C API header
  and no MLIR or LLVM header (mlir/*, llvm/*).

Prints one line per violation (`file:line: includes "x": rule`), then
`N files checked, M violations`; exits 1 if there are violations.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SUFFIXES = (".h", ".hpp", ".c", ".cpp", ".def", ".inc")

ABI_ALLOWED = ("kpool/ABI/", "kpool/Version.h")
COMPILER = ["lib/Dialect", "lib/Conversion", "lib/Pipelines", "lib/Kernels",
            "include/kpool/Dialect", "include/kpool/Conversion",
            "include/kpool/Pipelines", "include/kpool/Kernels"]
CORE = ["lib/Runtime/Core", "include/kpool/Runtime/KernelSet.h",
        "include/kpool/Runtime/PoolStore.h", "include/kpool/Runtime/Status.h"]
COMPILER_HEADERS = ("kpool/Dialect/", "kpool/Conversion/",
                    "kpool/Pipelines/", "kpool/Kernels/")


def abi_rule(header):
    if header.startswith(ABI_ALLOWED):
        return None
    if header.startswith(("kpool/", "kpool-c/", "mlir/", "llvm/", "cuda")):
        return "the ABI leaf includes nothing else of kpool, MLIR, LLVM or CUDA"
    return None


def compiler_rule(header):
    if header.startswith(("kpool/Runtime/", "kpool-c/")):
        return ("the compiler side includes no runtime or C API header "
                "(the shared contract is in kpool/ABI)")
    return None


def core_rule(header):
    if header.startswith(COMPILER_HEADERS) or header.startswith("kpool-c/"):
        return ("the runtime core includes no dialect, conversion, pipeline, "
                "kernel-module or C API header")
    if header.startswith(("mlir/", "llvm/")):
        return "the runtime core includes no MLIR or LLVM header"
    return None


RULES = [(["include/kpool/ABI"], abi_rule), (COMPILER, compiler_rule),
         (CORE, core_rule)]


def files(root, place):
    path = os.path.join(root, place)
    if os.path.isfile(path):
        yield place
        return
    for folder, _, names in os.walk(path):
        for name in sorted(names):
            if name.endswith(SUFFIXES):
                yield os.path.relpath(os.path.join(folder, name), root)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = argv[1]
    checked, violations = set(), []
    for places, rule in RULES:
        for place in places:
            for rel in files(root, place):
                checked.add(rel)
                with open(os.path.join(root, rel), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        why = rule(m.group(1))
                        if why:
                            violations.append(
                                f'{rel}:{number}: includes "{m.group(1)}": '
                                f"{why}")
    for v in violations:
        print(v)
    print(f"{len(checked)} files checked, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
