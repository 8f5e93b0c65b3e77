"""Mutates one line of a dumped PTX module (KPOOL_PTX_DUMP) for
KPOOL_PTX_OVERRIDE: the mutation tests of test/Integration/GPU show that
the checks fail on PTX that differs from what kpool ships by one operand.

  mutate-ptx.py MUTATION IN.ptx OUT.ptx [KERNEL]

MUTATION:
  shuffle-offset  the first butterfly shuffle's lane offset 1 becomes 2
                  (`shfl.sync.bfly.b32 d, a, 1, 31, m`)
  lane-stride=S   the multiplier mapping a lane (%tid.x) to its first
                  channel, 8 (16-byte vectors of 8 bf16 channels), becomes S:
                  `mul.wide.u32 %rdN, %rT, 8` with %rT = %tid.x
  store-offset    the first 16-byte global store `st.global.v4.b32 [%rdN]`
                  stores at [%rdN+16] instead

KERNEL: the `.entry` whose body is searched (a module holds every kernel
of a configuration); default: the whole module, from its start.

Prints the line before and after (`-` and `+`); fails when the pattern is
not found, so a change in the generated PTX shows here first. The PTX's
spacing (LLVM separates an opcode from its operands with a tab) is kept.
"""

import re
import sys


def body(lines, kernel):
    """The range of line indices of `kernel`'s body (all lines: None)."""
    if kernel is None:
        return range(len(lines))
    entry = re.compile(r"^\s*(\.visible\s+)?\.entry\s+" + re.escape(kernel) +
                       r"\s*\(")
    for start, line in enumerate(lines):
        if entry.match(line):
            end = start + 1
            while end < len(lines) and ".entry" not in lines[end]:
                end += 1
            return range(start, end)
    sys.exit("mutate-ptx.py: no .entry %s in the module" % kernel)


def mutate(kind, lines, where):
    stride = None
    if kind.startswith("lane-stride="):
        kind, stride = "lane-stride", kind.split("=", 1)[1]
    if kind == "shuffle-offset":
        pattern = re.compile(
            r"^(\s*shfl\.sync\.bfly\.b32\s+[^,]+, [^,]+, )1(, 31,.*)$")
        for i in where:
            m = pattern.match(lines[i])
            if m:
                return i, m.group(1) + "2" + m.group(2)
    elif kind == "lane-stride":
        tid = None
        for i in where:
            m = re.match(r"^\s*mov\.u32\s+(%r\d+), %tid\.x;", lines[i])
            if m:
                tid = m.group(1)
                continue
            m = tid and re.match(r"^(\s*mul\.wide\.u32\s+%rd\d+, " +
                                 re.escape(tid) + r", )8;(.*)$", lines[i])
            if m:
                return i, m.group(1) + stride + ";" + m.group(2)
    elif kind == "store-offset":
        pattern = re.compile(r"^(\s*st\.global\.v4\.b32\s+\[%rd\d+)\](.*)$")
        for i in where:
            m = pattern.match(lines[i])
            if m:
                return i, m.group(1) + "+16]" + m.group(2)
    else:
        sys.exit(__doc__)
    sys.exit("mutate-ptx.py: no line for %s in the %s" %
             (kind, "module" if len(where) == len(lines) else "kernel"))


if len(sys.argv) not in (4, 5):
    sys.exit(__doc__)
kind, src, dst = sys.argv[1:4]
lines = open(src).read().split("\n")
index, new = mutate(kind, lines,
                    body(lines, sys.argv[4] if len(sys.argv) == 5 else None))
print("- %s" % lines[index].strip())
print("+ %s" % new.strip())
lines[index] = new
open(dst, "w").write("\n".join(lines))
