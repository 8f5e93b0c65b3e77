#!/usr/bin/env python3
"""A static performance report of GPU kernels: ptxas resources and PTX
instruction counts on each kernel's per-pool path.

No GPU is needed: the figures are static. Input is an MLIR file whose
`gpu.binary` objects hold PTX (`kpool-lower-to-nvvm="format=isa"`, or
`kpool-aot --target=cuda --format=isa --emit-mlir=FILE`), or `.ptx` files
(for instance a hand-written kernel compiled with `nvcc -ptx`). For every
`.entry` it prints:

  regs, spill (stores/loads bytes), stack, lmem   from `ptxas -v`
  path      PTX instructions on the per-pool path (see below)
  loop      instructions of one iteration of the outermost loop on that
            path that stores to global memory: one pool of a grid-stride
            kernel, one channel of a channel loop; `-` when there is none
  total     PTX instructions in the kernel
  ld.g      global loads on the path, by width (b16, b32, v4.b32, ...)
  nc        of those, read-only (`ld.global.nc`)
  st.g      global stores on the path
  div.rn    IEEE divisions (`div.rn.f32`, which have a slow path) on it
  ex2       `ex2.approx` on it
  libdevice whether libdevice's accurate `__nv_expf` was inlined (its
            reduction constant 0f32A57060 appears)
  i64       64-bit integer instructions on the path

The per-pool path: kpool's kernels handle one pooled row (or one request)
per thread group, so the work of one thread for one pool is one path from
the entry to `ret`. The report takes the longest such path with each loop
counted once (back edges removed): for compress that is the aligned, vector
path through the request lookup, the member loads, the softmax and the
store. The load, store, division, ex2 and i64 columns count that path. A
kernel that loops over pools (a grid-stride loop) does one pool per
iteration: its per-pool figure is `loop`, and `path` adds its prologue
once. These are static counts, not a measurement of what a GPU executes.

    ptx-report.py lowered.mlir [--ptxas PATH] [--arch sm_90] [--json]
    ptx-report.py a.ptx b.ptx --ptxas /usr/local/cuda/bin/ptxas
    ptx-report.py a.ptx --no-ptxas

Exit status 1 when an object fails to assemble or nothing was found.
"""

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load_extract():
    spec = importlib.util.spec_from_file_location(
        "extract_ptx", os.path.join(HERE, "extract-ptx.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ptx_objects(path):
    """[(name, ptx text)] of an MLIR file's gpu.binary objects or a .ptx."""
    text = open(path, encoding="utf-8", errors="replace").read()
    if path.endswith(".ptx"):
        return [(os.path.splitext(os.path.basename(path))[0], text)]
    extract = load_extract()
    objects = []
    for match in extract.BINARY.finditer(text):
        start = match.end()
        nxt = extract.BINARY.search(text, start)
        body = text[start:nxt.start() if nxt else len(text)]
        for asm in extract.ASSEMBLY.finditer(body):
            ptx = extract.unescape(asm.group(1))
            if isinstance(ptx, bytes):
                ptx = ptx.decode("utf-8", errors="replace")
            objects.append((match.group(1), ptx))
    return objects


ENTRY = re.compile(r"\.entry\s+([A-Za-z0-9_$]+)\s*\(")
LABEL = re.compile(r"^\s*(\$?[A-Za-z_][A-Za-z0-9_$]*):")
BRANCH = re.compile(r"^(@!?%\w+\s+)?bra(\.uni)?\s+(\$?[A-Za-z_][A-Za-z0-9_$]*)")


def kernels(ptx):
    """{entry name: [lines of its body]}."""
    out = {}
    for match in ENTRY.finditer(ptx):
        i = ptx.index("{", match.end())
        depth, j = 0, i
        while j < len(ptx):
            if ptx[j] == "{":
                depth += 1
            elif ptx[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out[match.group(1)] = ptx[i + 1:j].splitlines()
    return out


def instructions(lines):
    """[(label or None, instruction text)] with labels attached in order."""
    items = []
    for raw in lines:
        line = raw.split("//")[0].strip()
        if not line or line in ("{", "}"):
            continue
        label = LABEL.match(line)
        if label:
            items.append((label.group(1), None))
            continue
        if line.startswith("."):
            continue  # .reg, .loc, .pragma, ...
        for stmt in line.split(";"):
            stmt = stmt.strip()
            if stmt and stmt not in ("{", "}"):
                items.append((None, stmt))
    return items


def blocks(items):
    """Basic blocks: [(label, [instructions], [successor labels])]."""
    bbs, cur_label, cur = [], "__entry", []

    def close(succ):
        bbs.append([cur_label, cur, succ])

    for label, inst in items:
        if label is not None:
            close([label])  # falls through into the label
            cur_label, cur = label, []
            continue
        cur.append(inst)
        br = BRANCH.match(inst)
        if br or inst.startswith("ret") or inst.startswith("exit"):
            succ = []
            if br:
                succ.append(br.group(3))
                if br.group(1):  # predicated: may fall through
                    succ.append(None)
            elif re.match(r"^@!?%\w+\s+(ret|exit)", inst):
                succ.append(None)
            close(succ)
            cur_label, cur = "__after%d" % len(bbs), []
    close([])
    # Resolve fall-through (None) to the next block.
    resolved = []
    for i, (label, insts, succ) in enumerate(bbs):
        nxt = bbs[i + 1][0] if i + 1 < len(bbs) else None
        resolved.append((label, insts,
                         [s if s is not None else nxt for s in succ
                          if (s if s is not None else nxt) is not None]))
    return resolved


def successors(bbs):
    index = {label: i for i, (label, _, _) in enumerate(bbs)}
    return [[index[s] for s in ss if s in index] for _, _, ss in bbs]


def back_edges(succ):
    state, back = [0] * len(succ), set()
    stack = [(0, iter(succ[0]))]
    state[0] = 1
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            state[node] = 2
            stack.pop()
        elif state[nxt] == 1:
            back.add((node, nxt))
        elif state[nxt] == 0:
            state[nxt] = 1
            stack.append((nxt, iter(succ[nxt])))
    return back


def pool_loop(bbs, on_path):
    """(header, latch) of the outermost loop whose header lies on the
    kernel's longest path and whose body stores to global memory (a
    grid-stride loop over pools), or None. A channel loop of a fallback
    path off the longest path is not one."""
    succ = successors(bbs)
    pred = [[] for _ in bbs]
    for n, ss in enumerate(succ):
        for s in ss:
            pred[s].append(n)
    best = None
    for latch, header in back_edges(succ):
        body, work = {header}, [latch]
        while work:
            n = work.pop()
            if n not in body:
                body.add(n)
                work.extend(pred[n])
        stores = any(opcode(i).startswith("st.global")
                     for n in body for i in bbs[n][1])
        if stores and header in on_path and (best is None or
                                             len(body) > best[2]):
            best = (header, latch, len(body))
    return best[:2] if best else None


def longest_path(bbs, start=0, stop=None):
    """The instructions of the longest path from `start` to an exit (or to
    `stop`, included), every loop counted once."""
    succ = successors(bbs)
    back = back_edges(succ)
    best, choice = {}, {}
    NEG = float("-inf")

    def visit(n):
        if n in best:
            return best[n]
        here = len(bbs[n][1])
        if n == stop:
            best[n], choice[n] = here, None
            return here
        tail, pick = (0 if stop is None else NEG), None
        for s in succ[n]:
            if (n, s) in back:
                continue
            v = visit(s)
            if v > tail:
                tail, pick = v, s
        best[n], choice[n] = here + tail, pick
        return best[n]

    sys.setrecursionlimit(100000)
    visit(start)
    path, n = [], start
    while n is not None:
        path.append(n)
        n = choice.get(n)
    return path


def path_instructions(bbs, nodes):
    return [i for n in nodes for i in bbs[n][1]]


def opcode(inst):
    inst = re.sub(r"^@!?%\w+\s+", "", inst)
    return inst.split()[0] if inst.split() else ""


# Integer arithmetic (and address conversion) whose 64-bit forms count as
# "i64": loads, stores and moves do not.
INT_OPS = {"add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not",
           "setp", "selp", "min", "max", "neg", "div", "rem", "cvt", "cvta"}


def path_stats(path):
    stats = {"path": len(path), "ld.g": {}, "nc": 0, "st.g": {}, "div.rn": 0,
             "ex2": 0, "i64": 0}
    for inst in path:
        op = opcode(inst)
        if op.startswith("ld.global"):
            width = op.split(".", 2)[2] if op.count(".") >= 2 else op
            width = width.replace("nc.", "")
            stats["ld.g"][width] = stats["ld.g"].get(width, 0) + 1
            stats["nc"] += ".nc" in op
        elif op.startswith("st.global"):
            width = op.split(".", 2)[2] if op.count(".") >= 2 else op
            stats["st.g"][width] = stats["st.g"].get(width, 0) + 1
        elif op.startswith("div.rn.f32"):
            stats["div.rn"] += 1
        elif op.startswith("ex2"):
            stats["ex2"] += 1
        if op.split(".")[0] in INT_OPS and re.search(r"\.[sub]64\b", op):
            stats["i64"] += 1
    return stats


PTXAS = re.compile(r"Compiling entry function '([^']+)'")


def ptxas_resources(ptxas, arch, ptx):
    """{entry: {regs, spill_st, spill_ld, stack, lmem}} or raises."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        target = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
        proc = subprocess.run(
            [ptxas, "-v", "-arch=" + (arch or (target.group(1) if target
                                               else "sm_90")),
             src, "-o", os.path.join(tmp, "k.cubin")],
            capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip())
    out, cur = {}, None
    for line in proc.stderr.splitlines():
        m = PTXAS.search(line)
        if m:
            cur = m.group(1)
            out[cur] = {"regs": 0, "spill_st": 0, "spill_ld": 0, "stack": 0,
                        "lmem": 0}
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", line)
        if m:
            out[cur].update(stack=int(m.group(1)), spill_st=int(m.group(2)),
                            spill_ld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            out[cur]["regs"] = int(m.group(1))
        m = re.search(r"(\d+) bytes lmem", line)
        if m:
            out[cur]["lmem"] = int(m.group(1))
    return out


def widths(d):
    return " ".join("%s:%d" % (k, v) for k, v in sorted(d.items())) or "-"


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--ptxas", default=None,
                        help="ptxas to run (default: $CUDA_HOME/bin/ptxas "
                             "when it exists; without one, no resources)")
    parser.add_argument("--no-ptxas", action="store_true",
                        help="PTX counts only, no ptxas resources")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--filter", default=None,
                        help="only kernels whose name matches this regex")
    args = parser.parse_args()

    ptxas = args.ptxas
    if args.no_ptxas:
        ptxas = None
    elif ptxas is None:
        cand = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                            "bin", "ptxas")
        ptxas = cand if os.access(cand, os.X_OK) else None

    rows = []
    for path in args.inputs:
        for obj, ptx in ptx_objects(path):
            res = {}
            if ptxas:
                try:
                    res = ptxas_resources(ptxas, args.arch, ptx)
                except RuntimeError as e:
                    print("%s: ptxas failed: %s" % (obj, e), file=sys.stderr)
                    return 1
            libdevice = "0f32A57060" in ptx
            for name, body in kernels(ptx).items():
                if args.filter and not re.search(args.filter, name):
                    continue
                items = instructions(body)
                total = sum(1 for l, i in items if i is not None)
                bbs = blocks(items)
                whole = longest_path(bbs)
                loop = pool_loop(bbs, set(whole))
                stats = path_stats(path_instructions(bbs, whole))
                stats["loop"] = (len(path_instructions(
                    bbs, longest_path(bbs, loop[0], loop[1])))
                    if loop else None)
                row = {"kernel": name, "total": total,
                       "libdevice_expf": libdevice}
                row.update(stats)
                row.update(res.get(name, {}))
                rows.append(row)
    if not rows:
        print("ptx-report: no kernel found", file=sys.stderr)
        return 1
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    head = ("%-44s %4s %9s %5s %5s %5s %5s  %-28s %3s %-10s %6s %4s %4s %s" %
            ("kernel", "regs", "spill", "stack", "path", "loop", "total",
             "ld.global", "nc", "st.global", "div.rn", "ex2", "i64",
             "libdevice"))
    print(head)
    for r in rows:
        spill = ("%d/%d" % (r["spill_st"], r["spill_ld"])) if "regs" in r \
            else "-"
        print("%-44s %4s %9s %5s %5d %5s %5d  %-28s %3d %-10s %6d %4d %4d %s" % (
            r["kernel"][:44], r.get("regs", "-"), spill, r.get("stack", "-"),
            r["path"], "-" if r["loop"] is None else r["loop"], r["total"],
            widths(r["ld.g"]), r["nc"],
            widths(r["st.g"]), r["div.rn"], r["ex2"], r["i64"],
            "yes" if r["libdevice_expf"] else "no"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
