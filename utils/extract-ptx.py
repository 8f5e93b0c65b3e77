#!/usr/bin/env python3
"""Pulls the PTX text out of the gpu.binary ops of an MLIR file.

The NVVM target with `format=isa` stores each kernel module's PTX as the
`assembly = "..."` string of a `#gpu.object`. This script writes the decoded
PTX of every object it finds (or only of `--binary NAME`), one after another,
to stdout or to `-o FILE`, or one file per binary with `--split DIR`
(`DIR/NAME.ptx`). It fails when there is no PTX to extract, so a test that
pipes its output into ptxas cannot pass on an empty input.

    extract-ptx.py lowered.mlir -o all.ptx
    extract-ptx.py lowered.mlir --split ptx/
    extract-ptx.py lowered.mlir --ptxas /usr/local/cuda/bin/ptxas --no-extern

With `--ptxas`, every object is assembled for the architecture its `.target`
line names (or `--arch`), and one line `@<binary>: ptxas ok` is printed per
object (the rest of the PTX is not printed); any ptxas failure fails the
script with ptxas's message. `--no-extern` fails when a PTX object declares
an `.extern` function: a call left unresolved, such as `__nv_expf` when
libdevice was not linked.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

# `gpu.binary @name [objects]` ... then each object's assembly string.
BINARY = re.compile(r'gpu\.binary\s+@([A-Za-z0-9_$.-]+)')
ASSEMBLY = re.compile(r'assembly\s*=\s*"((?:[^"\\]|\\.)*)"', re.S)


def unescape(text):
    """Decodes an MLIR string literal body: \\XX hex bytes, \\\\, \\", \\n, \\t."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != '\\':
            out += c.encode('utf-8')
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < len(text) else ''
        if nxt in '\\"':
            out += nxt.encode()
            i += 2
        elif nxt == 'n':
            out += b'\n'
            i += 2
        elif nxt == 't':
            out += b'\t'
            i += 2
        elif re.fullmatch(r'[0-9A-Fa-f]{2}', text[i + 1:i + 3]):
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            raise ValueError('bad escape at offset %d: %r' % (i, text[i:i + 4]))
    return out.decode('utf-8')


def extract(source):
    """Returns [(binary name, ptx text)] in file order."""
    starts = [(m.start(), m.group(1)) for m in BINARY.finditer(source)]
    found = []
    for n, (start, name) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(source)
        for m in ASSEMBLY.finditer(source, start, end):
            found.append((name, unescape(m.group(1))))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('input', help='MLIR file ("-" for stdin)')
    parser.add_argument('-o', '--output', help='write all PTX here')
    parser.add_argument('--split', metavar='DIR',
                        help='write DIR/<binary>.ptx per gpu.binary')
    parser.add_argument('--binary', help='only this gpu.binary')
    parser.add_argument('--count', action='store_true',
                        help='print the number of PTX objects only')
    parser.add_argument('--ptxas', metavar='PATH',
                        help='assemble each object with this ptxas')
    parser.add_argument('--arch', help='ptxas -arch (default: .target)')
    parser.add_argument('--no-extern', action='store_true',
                        help='fail on .extern function declarations')
    args = parser.parse_args()

    source = sys.stdin.read() if args.input == '-' else open(args.input).read()
    found = extract(source)
    if args.binary:
        found = [(n, p) for n, p in found if n == args.binary]
    if not found:
        sys.exit('extract-ptx.py: no PTX (assembly) object in %s; lower with '
                 'format=isa' % args.input)
    if args.no_extern:
        for name, ptx in found:
            # `.extern .func (.param .b32 func_retval0) __nv_expf(...)`
            externs = re.findall(
                r'^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$]+)',
                ptx, re.M)
            if externs:
                sys.exit('extract-ptx.py: @%s calls unresolved extern '
                         'function(s): %s' % (name, ', '.join(externs)))
    if args.count:
        print(len(found))
        return
    if args.ptxas:
        with tempfile.TemporaryDirectory() as tmp:
            for n, (name, ptx) in enumerate(found):
                arch = args.arch
                if not arch:
                    m = re.search(r'^\s*\.target\s+(\w+)', ptx, re.M)
                    arch = m.group(1) if m else 'sm_90'
                src = os.path.join(tmp, '%d.ptx' % n)
                with open(src, 'w') as f:
                    f.write(ptx)
                run = subprocess.run(
                    [args.ptxas, '-arch=' + arch, src, '-o',
                     os.path.join(tmp, '%d.cubin' % n)],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    universal_newlines=True)
                if run.returncode != 0:
                    sys.exit('extract-ptx.py: ptxas -arch=%s rejected @%s:\n%s'
                             % (arch, name, run.stdout))
                print('@%s: ptxas ok' % name)
        return
    if args.split:
        os.makedirs(args.split, exist_ok=True)
        for name, ptx in found:
            with open(os.path.join(args.split, name + '.ptx'), 'w') as f:
                f.write(ptx)
        return
    text = ''.join('// ---- gpu.binary @%s\n%s\n' % (n, p) for n, p in found)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == '__main__':
    main()
