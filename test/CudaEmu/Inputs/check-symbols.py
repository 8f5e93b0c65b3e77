"""Checks that a libcuda.so.1 defines every cu* symbol some binaries need.

  check-symbols.py --nm <llvm-nm> --driver <libcuda.so.1> <binary>...

Prints, per binary, how many CUDA driver symbols it references and which
the driver lacks; exits 1 when any is missing.
"""

import argparse
import os
import subprocess
import sys


def symbols(nm, path, which):
    out = subprocess.run([nm, "-D", which, path], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        name = line.split()[-1].split("@")[0]
        if name.startswith("cu") and name[2:3].isupper():
            names.add(name)
    return names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nm", required=True)
    parser.add_argument("--driver", required=True)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    defined = symbols(args.nm, args.driver, "--defined-only")
    missing = False
    for binary in args.binaries:
        needed = symbols(args.nm, binary, "--undefined-only")
        lacking = sorted(needed - defined)
        name = os.path.basename(binary)
        if lacking:
            missing = True
            print("%s: missing %s" % (name, ", ".join(lacking)))
        else:
            print("%s: %d driver symbols, all defined" % (name, len(needed)))
    print("the emulated driver exports %d entry points" % len(defined))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
