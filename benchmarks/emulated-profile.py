#!/usr/bin/env python3
"""Prints the emulated GPU profile (benchmarks/gpu-emulated-profile.sh runs
this): kpool-profile-gpu's runs joined with the emulated CUDA driver's
counters (KPOOL_EMU_PROFILE, JSON lines) and, next to them, the static
report (utils/ptx-report.py --json) of the same PTX.

    emulated-profile.py --runs RUNS --profile PROFILE.jsonl
        [--unchecked PROFILE.jsonl] [--static REPORT.json]

RUNS is kpool-profile-gpu's output ("run <name>: launches a..b, tokens N,
pools P, useful bytes loaded L, stored S"). --unchecked: the profile of the
same runs with KPOOL_EMU_CHECKS=none, for the executor's speed without the
sanitizer.

Per run: thread-instructions per pool by class, active lanes per executed
warp-instruction (32: no divergence), and for global loads and stores the
bytes of the 32-byte sectors and of the 128-byte lines the warps' accesses
touch per useful byte (1.00: every byte moved is one the call needs once).
"""

import argparse
import json
import re
import sys

CLASSES = [("integer", "int"), ("integer64", "int64"), ("floating", "fp"),
           ("special", "sfu"), ("memory", "mem"), ("control", "ctrl"),
           ("sync", "sync")]

RUN = re.compile(r"run (.+?): launches (\S+), tokens (\d+), pools (\d+), "
                 r"useful bytes loaded (\d+), stored (\d+)")


def read_runs(path):
    runs = []
    for line in open(path):
        m = RUN.match(line.strip())
        if not m:
            continue
        name, launches = m.group(1), m.group(2)
        if launches == "-":
            sys.exit("%s: no launch numbers: not run through the emulated "
                     "CUDA driver" % path)
        first, last = (int(x) for x in launches.split(".."))
        runs.append(dict(name=name, first=first, last=last,
                         tokens=int(m.group(3)), pools=int(m.group(4)),
                         loaded=int(m.group(5)), stored=int(m.group(6))))
    if not runs:
        sys.exit("%s: no runs" % path)
    return runs


def read_launches(path):
    launches = {}
    for line in open(path):
        record = json.loads(line)
        if not record.get("emulated"):
            sys.exit("%s: a record without \"emulated\": true" % path)
        if record["record"] == "launch":
            launches[record["launch"]] = record
    return launches


def totals(run, launches):
    t = dict(kernels=[], threads=0, cpu=0.0, warp=0, lanes=0,
             ld_sectors=0, ld_lines=0, st_sectors=0, st_lines=0,
             findings=0, **{c: 0 for c, _ in CLASSES})
    for n in range(run["first"], run["last"] + 1):
        if n not in launches:
            sys.exit("launch %d of run '%s' is not in the profile" %
                     (n, run["name"]))
        r = launches[n]
        if r["kernel"] not in t["kernels"]:
            t["kernels"].append(r["kernel"])
        for c, _ in CLASSES:
            t[c] += r["instructions"][c]
        t["cpu"] += r["cpu_seconds"]
        t["warp"] += r["warp_instructions"]
        t["lanes"] += r["active_lanes"]
        t["ld_sectors"] += r["global_load"]["sectors"]
        t["ld_lines"] += r["global_load"]["lines"]
        t["st_sectors"] += r["global_store"]["sectors"]
        t["st_lines"] += r["global_store"]["lines"]
        t["findings"] += r["findings"]
    t["total"] = sum(t[c] for c, _ in CLASSES)
    return t


def short(kernel):
    """kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_step_cache_memref_kpool_step
    -> step_cache (fp8_hadamard_absmax)."""
    m = re.match(r"kpool_[a-z0-9]+_d\d+_k\d+_(?:(.*)_)?cuda_(\w+?)_memref_", kernel)
    if not m:
        return kernel
    return m.group(2) + (" (%s)" % m.group(1) if m.group(1) else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--unchecked")
    ap.add_argument("--static")
    args = ap.parse_args()
    runs = read_runs(args.runs)
    launches = read_launches(args.profile)
    unchecked = read_launches(args.unchecked) if args.unchecked else None
    static = {}
    if args.static:
        for entry in json.load(open(args.static)):
            static[entry["kernel"]] = entry

    print("EMULATED: the shipped PTX executed by the emulated CUDA driver "
          "(test/lib/CudaEmu) through kpool's CUDA layer; instruction and "
          "lane counts are what the executor ran, sectors and lines a model "
          "of the memory system (per warp-level global access, the 32-byte "
          "sectors and 128-byte lines its active lanes touch), not a "
          "measurement on a GPU.")
    print("bf16, head_dim 128, kpool 4. Per pool: divided by the pools the "
          "run produced. lanes: active lanes per executed warp-instruction "
          "(of 32). B/useful B: sector (or line) bytes moved per useful byte "
          "(k and gate rows read once, pooled rows and cache entries written "
          "once).")
    print()
    head = ("%-20s %6s %7s | %s %7s | %5s | %7s %7s | %7s %7s"
            % ("run", "tokens", "pools",
               " ".join("%6s" % n for _, n in CLASSES), "total", "lanes",
               "ld sect", "ld line", "st sect", "st line"))
    print("%-35s | %-56s | %5s | %-15s | %s" %
          ("", "thread-instructions per pool", "", "loads B/useful B",
           "stores B/useful B"))
    print(head)
    print("-" * len(head))
    rows = []
    for run in runs:
        t = totals(run, launches)
        rows.append((run, t))
        p = max(run["pools"], 1)
        print("%-20s %6d %7d | %s %7.0f | %5.1f | %7.2f %7.2f | %7.2f %7.2f"
              % (run["name"], run["tokens"], run["pools"],
                 " ".join("%6.0f" % (t[c] / p) for c, _ in CLASSES),
                 t["total"] / p,
                 t["lanes"] / max(t["warp"], 1),
                 32.0 * t["ld_sectors"] / max(run["loaded"], 1),
                 128.0 * t["ld_lines"] / max(run["loaded"], 1),
                 32.0 * t["st_sectors"] / max(run["stored"], 1),
                 128.0 * t["st_lines"] / max(run["stored"], 1)))
    print()
    print("kernels (launches per run):")
    for run, t in rows:
        print("  %-20s %s" % (run["name"],
                              ", ".join(short(k) for k in t["kernels"])))
    findings = sum(t["findings"] for _, t in rows)
    print("sanitizer findings in these launches: %d" % findings)

    print()
    print("STATIC (ptxas -v and utils/ptx-report.py on the same PTX, as "
          "loaded; docs/gpu.md, \"A static performance report\"): regs, "
          "spill stores/loads (bytes), and PTX instructions on the per-pool "
          "path (loop: one iteration of the pooled-row loop; path: entry to "
          "ret).")
    if not static:
        print("  (no static report)")
    else:
        print("%-20s %-36s %5s %9s %6s %6s %6s" %
              ("run", "kernel", "regs", "spill", "loop", "path", "total"))
        for run, t in rows:
            for k in t["kernels"]:
                s = static.get(k)
                if not s:
                    print("%-20s %-36s (not in the static report)" %
                          (run["name"], short(k)))
                    continue
                regs = s.get("regs", "-")
                spill = ("%s/%s" % (s["spill_st"], s["spill_ld"])
                         if "spill_st" in s else "-")
                print("%-20s %-36s %5s %9s %6s %6s %6s" %
                      (run["name"], short(k), regs, spill,
                       s.get("loop") if s.get("loop") is not None else "-",
                       s["path"], s["total"]))

    print()
    print("EMULATED executor speed (one core; CPU time of the launches "
          "alone, counters on): thread-instructions per second")
    print("%-20s %14s %10s %12s %12s" %
          ("run", "thread-instr", "CPU s", "M/s checks", "M/s none"))
    for run, t in rows:
        none = "-"
        if unchecked is not None:
            u = totals(run, unchecked)
            if u["total"] != t["total"]:
                sys.exit("run '%s': %d thread-instructions without checks, "
                         "%d with" % (run["name"], u["total"], t["total"]))
            none = "%.1f" % (u["total"] / max(u["cpu"], 1e-9) / 1e6)
        print("%-20s %14d %10.3f %12.1f %12s" %
              (run["name"], t["total"], t["cpu"],
               t["total"] / max(t["cpu"], 1e-9) / 1e6, none))


if __name__ == "__main__":
    main()
