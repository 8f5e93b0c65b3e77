"""Mutates one line of a dumped PTX module (KPOOL_PTX_DUMP) for
KPOOL_PTX_OVERRIDE: the mutation tests of test/Integration/GPU show that
the checks fail on PTX that differs from what kpool ships by one operand.

  mutate-ptx.py MUTATION IN.ptx OUT.ptx

MUTATION:
  shuffle-offset  the first butterfly shuffle's lane offset 1 becomes 2
                  (`shfl.sync.bfly.b32 d, a, 1, 31, m`)
  lane-stride=S   the multiplier mapping a lane (%tid.x) to its first
                  channel, 8 (16-byte vectors of 8 bf16 channels), becomes S:
                  `mul.wide.u32 %rdN, %rT, 8` with %rT = %tid.x
  store-offset    the first 16-byte global store `st.global.v4.b32 [%rdN]`
                  stores at [%rdN+16] instead

Prints the line before and after (`-` and `+`); fails when the pattern is
not found, so a change in the generated PTX shows here first.
"""

import re
import sys


def mutate(kind, lines):
    stride = None
    if kind.startswith("lane-stride="):
        kind, stride = "lane-stride", kind.split("=", 1)[1]
    if kind == "shuffle-offset":
        pattern = re.compile(r"^(\s*shfl\.sync\.bfly\.b32 [^,]+, [^,]+, )1(, 31,.*)$")
        for i, line in enumerate(lines):
            m = pattern.match(line)
            if m:
                return i, m.group(1) + "2" + m.group(2)
    elif kind == "lane-stride":
        tid = None
        for i, line in enumerate(lines):
            m = re.match(r"^\s*mov\.u32 (%r\d+), %tid\.x;", line)
            if m:
                tid = m.group(1)
                continue
            m = tid and re.match(r"^(\s*mul\.wide\.u32 %rd\d+, " +
                                 re.escape(tid) + r", )8;(.*)$", line)
            if m:
                return i, m.group(1) + stride + ";" + m.group(2)
    elif kind == "store-offset":
        pattern = re.compile(r"^(\s*st\.global\.v4\.b32 \[%rd\d+)\](.*)$")
        for i, line in enumerate(lines):
            m = pattern.match(line)
            if m:
                return i, m.group(1) + "+16]" + m.group(2)
    else:
        sys.exit(__doc__)
    sys.exit("mutate-ptx.py: no line for %s in the module" % kind)


if len(sys.argv) != 4:
    sys.exit(__doc__)
kind, src, dst = sys.argv[1:]
lines = open(src).read().split("\n")
index, new = mutate(kind, lines)
print("- %s" % lines[index].strip())
print("+ %s" % new.strip())
lines[index] = new
open(dst, "w").write("\n".join(lines))
