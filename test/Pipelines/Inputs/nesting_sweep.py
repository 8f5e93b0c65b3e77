"""Runs every kpool pass and pipeline that `kpool-opt --help` lists at every
nesting a pass pipeline can give it, on IR from every stage of the
lowerings, and checks that each run either succeeds or fails with a
diagnostic: exit code 0, or 1 with an `error:` line; never another exit
code (an abort is 134, a crash 139), an "LLVM ERROR", a stack dump or a hang.

The passes are read from the help text, so a pass or pipeline added later
is swept without an edit here. Each (pass, nesting) runs once over all the
stages (-split-input-file), and, when that run fails the check, once per
stage to say which input broke it.

Usage: nesting_sweep.py <kpool-opt> <input.mlir> <scratch-dir>
"""

import concurrent.futures
import os
import re
import subprocess
import sys

KPOOL_OPT, INPUT, SCRATCH = sys.argv[1:4]
TIMEOUT = 120
# What a run must never print.
FATAL = ("LLVM ERROR", "Stack dump", "PLEASE submit a bug report",
         "Assertion", "UNREACHABLE")

# A pass at 6 spaces of indentation; its options are at 8.
PASS_LINE = re.compile(r"^ {6}--((?:convert-)?kpool-[a-z0-9-]+)\s")


def run(args, stdin=None):
    try:
        proc = subprocess.run([KPOOL_OPT] + args, input=stdin,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % TIMEOUT
    return proc.returncode, proc.stdout + proc.stderr


def passes():
    code, text = run(["--help"])
    assert code == 0, text
    found = [m.group(1) for m in map(PASS_LINE.match, text.splitlines()) if m]
    return sorted(set(found))


def stage(args, name):
    """The input lowered by `args`: one stage the passes are tried on."""
    code, text = run([INPUT, "-o", "-"] + args)
    if code != 0:
        sys.exit("preparing stage %s (%s) failed:\n%s" %
                 (name, " ".join(args), text))
    return "// stage: %s\n%s" % (name, text)


# Options that keep a run short (PTX text, no libdevice, no ptxas): the
# nesting is what is swept, not the options.
OPTIONS = {"kpool-lower-to-nvvm": "{format=isa approximate-exp=true}"}

STAGES = [
    ("tensors", []),
    ("memrefs", ["-one-shot-bufferize=bufferize-function-boundaries"]),
    ("loops", ["-one-shot-bufferize=bufferize-function-boundaries",
               "-convert-kpool-to-linalg"]),
    ("gpu-outlined", ["-pass-pipeline=builtin.module("
                      "one-shot-bufferize{bufferize-function-boundaries},"
                      "convert-kpool-to-linalg,func.func(kpool-map-to-gpu),"
                      "gpu-kernel-outlining)"]),
    ("llvm", ["-pass-pipeline=builtin.module(kpool-lower-to-llvm)"]),
    ("nvvm", ["-pass-pipeline=builtin.module(kpool-lower-to-nvvm%s)" %
              OPTIONS["kpool-lower-to-nvvm"]]),
]

NESTINGS = [
    "builtin.module(%s)",
    "builtin.module(func.func(%s))",
    "builtin.module(gpu.module(%s))",
    "builtin.module(any(%s))",
    "any(%s)",
]


def bad(code, text):
    """Why a run breaks the rule, or None."""
    if code is None:
        return text
    if code not in (0, 1):
        return "exit code %d" % code
    for marker in FATAL:
        if marker in text:
            return "printed %r" % marker
    if code == 1 and "error:" not in text:
        return "exit code 1 without a diagnostic"
    return None


def sweep_one(job):
    name, nesting, stages = job
    label = nesting % name
    pipeline = nesting % (name + OPTIONS.get(name, ""))
    all_file = os.path.join(SCRATCH, "all.mlir")
    code, text = run([all_file, "-split-input-file",
                      "-pass-pipeline=" + pipeline, "-o", os.devnull])
    why = bad(code, text)
    if why is None:
        return label, code, text, None
    # Narrow it down to the stage.
    for stage_name, body in stages:
        scode, stext = run(["-", "-pass-pipeline=" + pipeline, "-o",
                            os.devnull], stdin=body)
        swhy = bad(scode, stext)
        if swhy:
            return label, scode, stext, "stage %s: %s" % (stage_name, swhy)
    return label, code, text, why


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    names = passes()
    # The suite means nothing if the help text stopped matching.
    for required in ("convert-kpool-to-linalg", "kpool-lower-to-llvm",
                     "kpool-lower-to-nvvm", "kpool-map-to-gpu"):
        if required not in names:
            sys.exit("'%s' not among the passes found in --help: %s" %
                     (required, names))
    stages = [(name, stage(args, name)) for name, args in STAGES]
    with open(os.path.join(SCRATCH, "all.mlir"), "w") as f:
        f.write("\n// -----\n".join(body for _, body in stages))

    jobs = [(name, nesting, stages) for name in names for nesting in NESTINGS]
    workers = max(2, os.cpu_count() or 2)
    failures = 0
    results = {}
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for label, code, text, why in pool.map(sweep_one, jobs):
            results[label] = (code, text)
            if why:
                failures += 1
                print("FAIL %s: %s\n%s" % (label, why, text[-3000:]))
    print("passes and pipelines: %s" % " ".join(names))
    print("stages: %s" % " ".join(name for name, _ in STAGES))
    print("runs: %d, broken: %d" % (len(jobs), failures))
    # Print the first diagnostic of the runs named on the command line (as
    # nesting % name, without options), for FileCheck.
    for label in sys.argv[4:]:
        code, text = results[label]
        first = next((l for l in text.splitlines() if "error:" in l), "")
        print("%s -> exit %s: %s" % (label, code,
                                     first.split("error: ", 1)[-1]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
