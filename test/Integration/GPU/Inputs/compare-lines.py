"""Compares one named line across program outputs.

  compare-lines.py --same PREFIX <output>...
  compare-lines.py --differ PREFIX <base> <output>...

Each output holds exactly one line starting with PREFIX. --same: the line
is the same in every output. --differ: it differs, in every output, from
the base's (e.g. bits that the adversarial approximate mode must change).
Prints the lines.
"""

import sys

if len(sys.argv) < 4 or sys.argv[1] not in ("--same", "--differ"):
    sys.exit(__doc__)
mode, prefix, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = {}
for path in paths:
    found = [l.rstrip("\n") for l in open(path) if l.startswith(prefix)]
    if len(found) != 1:
        sys.exit("%s: %d lines starting with %r" % (path, len(found), prefix))
    lines[path] = found[0]
    print("%s: %s" % (path, found[0]))
base = lines[paths[0]]
if mode == "--same":
    bad = [p for p in paths if lines[p] != base]
    what = "differs from %s's" % paths[0]
else:
    bad = [p for p in paths[1:] if lines[p] == base]
    what = "equals %s's" % paths[0]
for p in bad:
    print("FAIL: %s: the line %s" % (p, what))
sys.exit(1 if bad else 0)
