#!/usr/bin/env python3
"""Compares the `pools F:` memref that agreement-program.mlir prints in two
runs (two backends, or two lowerings).

Default: every value within 4 units in the last place of bf16 (the spec's
"a few units in the last place" across backends), plus 1e-6 absolute for
values near zero. --exact: the same printed values.
Prints the number of values compared and the largest difference in bf16
ulps; fails (exit 1) naming the first value out of tolerance.
"""

import math
import re
import sys


def pools(path):
    text = open(path).read()
    start = text.find('pools F:')
    if start < 0:
        sys.exit('compare-pools.py: no "pools F:" in %s' % path)
    data = text[start:]
    data = data[data.find('data ='):] if 'data =' in data else data
    values = [float(v) for v in
              re.findall(r'[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)',
                         data.split('=', 1)[-1])]
    if not values:
        sys.exit('compare-pools.py: no values after "pools F:" in %s' % path)
    return values


def bf16_ulp(x):
    x = abs(x)
    if x == 0 or not math.isfinite(x):
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(x)) - 7)


def main():
    args = sys.argv[1:]
    exact = '--exact' in args
    args = [a for a in args if a != '--exact']
    if len(args) != 2:
        sys.exit('usage: compare-pools.py [--exact] RUN_A RUN_B')
    a, b = pools(args[0]), pools(args[1])
    if len(a) != len(b):
        sys.exit('compare-pools.py: %d values vs %d' % (len(a), len(b)))
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        ulps = abs(x - y) / bf16_ulp(max(abs(x), abs(y)))
        worst = max(worst, ulps)
        ok = x == y if exact else abs(x - y) <= 4 * bf16_ulp(
            max(abs(x), abs(y))) + 1e-6
        if not ok:
            sys.exit('compare-pools.py: value %d (row %d, channel %d): %r vs '
                     '%r (%.1f bf16 ulps)' % (i, i // 128, i % 128, x, y, ulps))
    print('compared %d values, largest difference %.1f bf16 ulps'
          % (len(a), worst))


if __name__ == '__main__':
    main()
