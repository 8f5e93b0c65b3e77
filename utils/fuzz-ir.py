#!/usr/bin/env python3
"""A bounded mutation fuzzer for kpool-opt: parser, verifier and pipelines.

usage: fuzz-ir.py KPOOL_OPT ITERATIONS SEED SEED_FILE.mlir...

Each iteration mutates one seed file (integer literals replaced by edge
values such as 0, -1, 2^31, 2^63-1; element and metadata types swapped;
dimensions made dynamic or static; a line dropped or duplicated), then runs
`kpool-opt` on it to parse and verify, and, when that succeeds, through one
of the pipelines (-convert-kpool-to-linalg after bufferization,
kpool-lower-to-llvm, kpool-lower-to-nvvm with approximate exp). A run may
fail with a diagnostic; it must not crash (a signal, "LLVM ERROR", a stack
dump) or hang (20 s). Crashing inputs are written to --keep DIR. Prints a
summary and exits 1 if anything crashed or hung.
"""

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile

EDGE = ["0", "1", "-1", "2", "3", "16", "17", "2147483647", "2147483648",
        "4294967295", "4294967296", "4294967297", "9223372036854775807",
        "-9223372036854775808", "1099511627776"]
TYPES = ["bf16", "f16", "f32", "f64", "i32", "ui32", "si32", "i64", "index",
         "i1"]
PIPELINES = [
    ["-one-shot-bufferize=bufferize-function-boundaries",
     "-convert-kpool-to-linalg"],
    ["-kpool-lower-to-llvm"],
    ["-kpool-lower-to-nvvm=format=isa approximate-exp=true"],
]
CRASH = re.compile(r"LLVM ERROR|Stack dump|PLEASE submit a bug report|"
                   r"Assertion .* failed")


def mutate(text, rng):
    lines = text.split("\n")
    for _ in range(1 if rng.random() < 0.7 else 2):
        kind = rng.randrange(5)
        if kind == 0:  # an integer literal (attribute, dimension, constant)
            spots = [m.span() for m in re.finditer(r"(?<![\w%#@])\d+", text)]
            if spots:
                a, b = rng.choice(spots)
                text = text[:a] + rng.choice(EDGE).lstrip("-") + text[b:]
        elif kind == 1:  # an element or metadata type
            spots = [m.span() for m in re.finditer(
                r"\b(bf16|f16|f32|ui32|i32|i64)\b", text)]
            if spots:
                a, b = rng.choice(spots)
                text = text[:a] + rng.choice(TYPES) + text[b:]
        elif kind == 2:  # a dimension: static <-> dynamic
            spots = [m.span() for m in re.finditer(r"(?<=[<x])(\?|\d+)(?=x)",
                                                   text)]
            if spots:
                a, b = rng.choice(spots)
                text = text[:a] + rng.choice(["?", "0", "1", "2", "5"]) + \
                    text[b:]
        elif kind == 3 and len(lines) > 3:  # drop a line
            lines = text.split("\n")
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        else:  # duplicate a line
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
    return text


def run(opt, path, args):
    try:
        r = subprocess.run([opt, path, "-o", os.devnull] + args,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "hang", ""
    if r.returncode < 0 or CRASH.search(r.stderr):
        return "crash", r.stderr[-2000:]
    return ("ok" if r.returncode == 0 else "error"), ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("opt")
    parser.add_argument("iterations", type=int)
    parser.add_argument("seed", type=int)
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--keep", default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seeds = []
    for path in args.inputs:
        with open(path) as f:
            for chunk in f.read().split("// -----"):
                if "kpool." in chunk:
                    # RUN/CHECK lines are comments; drop them to keep files
                    # small.
                    seeds.append("\n".join(l for l in chunk.split("\n")
                                           if not l.lstrip().startswith("//")))
    counts = {"ok": 0, "error": 0, "crash": 0, "hang": 0}
    pipelines = 0
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.mlir")
        for it in range(args.iterations):
            text = mutate(rng.choice(seeds), rng)
            with open(path, "w") as f:
                f.write(text)
            status, log = run(args.opt, path, [])
            if status == "ok":
                pipelines += 1
                status, log = run(args.opt, path, rng.choice(PIPELINES))
            counts[status] += 1
            if status in ("crash", "hang"):
                bad.append((it, text, log))
    for it, text, log in bad[:5]:
        print(f"--- iteration {it}: {log.strip()[:800]}")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            with open(os.path.join(args.keep, f"case{it}.mlir"), "w") as f:
                f.write(text)
    print(f"fuzz-ir: {args.iterations} inputs, {pipelines} verified and "
          f"lowered: {counts['ok']} ok, {counts['error']} diagnosed, "
          f"{counts['crash']} crashed, {counts['hang']} hung")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
