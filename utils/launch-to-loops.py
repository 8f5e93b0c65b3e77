#!/usr/bin/env python3
"""Rewrites each gpu.launch of an MLIR file into sequential scf.for loops.

Testing aid for kpool-map-to-gpu on machines without a GPU: the kernels it
builds use no barriers, shared memory or warp operations, so running every
(block, thread) of a launch one after the other on the CPU computes what the
GPU computes, and the mapped IR can be executed with the CPU lowering.

    gpu.launch blocks(%bx, %by, %bz) in (%gx = %a, %gy = %b, %gz = %c)
               threads(%tx, %ty, %tz) in (%sx = %d, %sy = %e, %sz = %f) {
      BODY
      gpu.terminator
    }
becomes
    scf.for %bx = 0 to %a { scf.for %by ... { scf.for %bz ... {
    scf.for %ty = 0 to %e { scf.for %tx = 0 to %d { scf.for %tz ... {
      %gx = <%a> ... (the size arguments, as aliases)
      BODY
    } } } } } }

The input must be in the generic-free pretty form that kpool-opt prints, with
no async tokens, clusters or memory attributions on the launches (what
kpool-map-to-gpu emits). gpu.thread_id/block_id/block_dim/grid_dim ops inside
a launch are not rewritten; kpool-map-to-gpu does not create them.
"""

import argparse
import re
import sys

HEADER = re.compile(
    r'^(?P<indent>[ \t]*)gpu\.launch\s+'
    r'blocks\((?P<b>[^)]*)\)\s+in\s+\((?P<bs>[^)]*)\)\s+'
    r'threads\((?P<t>[^)]*)\)\s+in\s+\((?P<ts>[^)]*)\)'
    r'(?:\s+(?:module|function)\(@[\w$.-]+\))*\s*\{\s*$')
SIZE = re.compile(r'^\s*(%[\w$.-]+)\s*=\s*(%[\w$.-]+)\s*$')


def rewrite(text):
    lines = text.split('\n')
    out = []
    count = 0
    # Indentation of the launches whose closing brace is still ahead.
    open_launches = []
    for line in lines:
        m = HEADER.match(line)
        if m:
            ind = m.group('indent')
            blocks = [v.strip() for v in m.group('b').split(',')]
            threads = [v.strip() for v in m.group('t').split(',')]
            sizes = [SIZE.match(s) for s in
                     m.group('bs').split(',') + m.group('ts').split(',')]
            if len(blocks) != 3 or len(threads) != 3 or not all(sizes):
                sys.exit('launch-to-loops.py: unsupported gpu.launch: ' + line)
            names = [s.group(1) for s in sizes]
            values = [s.group(2) for s in sizes]
            zero, one = '%%__l2l_zero%d' % count, '%%__l2l_one%d' % count
            out.append('%s%s = arith.constant 0 : index' % (ind, zero))
            out.append('%s%s = arith.constant 1 : index' % (ind, one))
            # Blocks outermost, then threads with x innermost but one: the
            # order does not matter for race-free kernels.
            order = [(blocks[0], values[0]), (blocks[1], values[1]),
                     (blocks[2], values[2]), (threads[1], values[4]),
                     (threads[0], values[3]), (threads[2], values[5])]
            for iv, ub in order:
                out.append('%sscf.for %s = %s to %s step %s {'
                           % (ind, iv, zero, ub, one))
            for name, value in zip(names, values):
                out.append('%s  %s = arith.addi %s, %s : index'
                           % (ind, name, value, zero))
            open_launches.append(ind)
            count += 1
            continue
        if open_launches and line.strip() == 'gpu.terminator':
            continue
        if open_launches and line == open_launches[-1] + '}':
            out.append(open_launches[-1] + '}' * 6)
            open_launches.pop()
            continue
        out.append(line)
    if open_launches:
        sys.exit('launch-to-loops.py: unterminated gpu.launch')
    return '\n'.join(out), count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('input', help='MLIR file ("-" for stdin)')
    parser.add_argument('-o', '--output', help='output file (default stdout)')
    args = parser.parse_args()
    text = sys.stdin.read() if args.input == '-' else open(args.input).read()
    result, count = rewrite(text)
    if count == 0:
        sys.exit('launch-to-loops.py: no gpu.launch in %s' % args.input)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(result)
    else:
        sys.stdout.write(result)


if __name__ == '__main__':
    main()
