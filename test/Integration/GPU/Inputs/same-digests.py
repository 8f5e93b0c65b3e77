"""Checks that runs of one program downloaded the same bytes.

  same-digests.py <output>...

Each output holds a line "digest of every device download: <hex>"; outputs
are grouped by the name before the first dot (check.forward, check.reverse
-> check), and every group must have one digest. Prints the groups.
"""

import collections
import os
import re
import sys

groups = collections.defaultdict(dict)
for path in sys.argv[1:]:
    text = open(path).read()
    found = re.findall(r"digest of every device download: ([0-9a-f]+)", text)
    if len(found) != 1:
        sys.exit("%s: %d digest lines" % (path, len(found)))
    name = os.path.basename(path)
    groups[name.split(".")[0]][name] = found[0]
bad = False
for group, runs in sorted(groups.items()):
    digests = set(runs.values())
    print("%s: %d runs, %s" % (group, len(runs),
                               "same digest %s" % digests.pop()
                               if len(digests) == 1 else "DIFFERENT: %s" % runs))
    bad |= len(set(runs.values())) != 1
sys.exit(1 if bad else 0)
