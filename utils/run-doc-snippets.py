#!/usr/bin/env python3
"""Runs the code blocks of the project's markdown documentation.

usage: run-doc-snippets.py --src SRC --build BUILD FILE.md|DIR...

A DIR stands for its *.md files (not those of its subdirectories: the
generated docs/dialect reference is not a guide).

Every fenced block is handled by its info string (the word after the
opening fence):

  python      executed; the blocks of one file run in order in one
              namespace, as a reader following the guide would run them
  mlir        parsed and verified by BUILD/bin/kpool-opt
  c, cpp      compiled (syntax and types: -fsyntax-only) against the kpool,
              MLIR and LLVM headers; a block with `int main` is also linked
              against libKPoolCAPI.so (C) and run
  sh run      executed with bash -e, in a scratch directory where `build`,
              `examples`, `python`, `utils` and `scripts` are the build and
              source directories (so `build/bin/kpool-opt examples/...`
              works as written)
  anything else (sh without `run`: builds and installs, which CI runs;
  cmake; text) is listed as not run.

Prints one line per block and a summary; exits 1 when any block fails.
"""

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import traceback

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)\s*(.*)$")


def blocks(path):
    """(line, language, flags, code) of each fenced block."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, flags = m.groups()
        start = i + 1
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent)
                        else line.lstrip())
            i += 1
        i += 1
        yield start, lang, flags.split(), "".join(body)


def run(cmd, **kwargs):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--cc", default="clang-22")
    parser.add_argument("--cxx", default="clang++-22")
    parser.add_argument("--llvm", default="/usr/lib/llvm-22")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    src, build = os.path.abspath(args.src), os.path.abspath(args.build)
    scratch = tempfile.mkdtemp(prefix="kpool-doc-snippets-")
    for name, target in [("build", build), ("examples", f"{src}/examples"),
                         ("python", f"{src}/python"), ("utils", f"{src}/utils"),
                         ("scripts", f"{src}/scripts")]:
        os.symlink(target, os.path.join(scratch, name))
    sys.path.insert(0, os.path.join(src, "python"))
    env = dict(os.environ, PYTHONPATH=os.path.join(src, "python"),
               PYTHONDONTWRITEBYTECODE="1")
    includes = [f"-I{src}/include", f"-I{build}/include",
                f"-I{args.llvm}/include"]
    files = []
    for path in args.files:  # a directory: its *.md (not its subdirectories)
        if os.path.isdir(path):
            files += sorted(os.path.join(path, n) for n in os.listdir(path)
                            if n.endswith(".md"))
        else:
            files.append(path)
    failed = counted = 0
    for md in files:
        namespace = {"__name__": "__doc__"}
        rel = os.path.relpath(md, src)
        for line, lang, flags, code in blocks(md):
            where = f"{rel}:{line} {lang or 'text'}"
            ok, output, skipped = True, "", None
            if lang == "python":
                buffer = io.StringIO()
                cwd = os.getcwd()
                os.chdir(scratch)
                try:
                    with contextlib.redirect_stdout(buffer):
                        exec(compile(code, f"{rel}:{line}", "exec"), namespace)
                except Exception:
                    ok, output = False, traceback.format_exc()
                finally:
                    os.chdir(cwd)
            elif lang == "mlir":
                path = os.path.join(scratch, f"snippet{line}.mlir")
                with open(path, "w") as f:
                    f.write(code)
                r = run([f"{build}/bin/kpool-opt", path, "-o", os.devnull])
                ok, output = r.returncode == 0, r.stdout
            elif lang in ("c", "cpp"):
                ext, compiler, std = ((".c", args.cc, "-std=c11")
                                      if lang == "c" else
                                      (".cpp", args.cxx, "-std=c++17"))
                path = os.path.join(scratch, f"snippet{line}{ext}")
                with open(path, "w") as f:
                    f.write(code)
                r = run([compiler, std, "-fsyntax-only", "-Wall", "-Werror",
                         "-Wno-unused-variable", "-Wno-unused-function",
                         *includes, path])
                ok, output = r.returncode == 0, r.stdout
                if ok and lang == "c" and re.search(r"\bint main\b", code):
                    exe = path[:-2]
                    r = run([compiler, std, *includes, path, "-o", exe,
                             f"-L{build}/lib", "-lKPoolCAPI", "-lm",
                             f"-Wl,-rpath,{build}/lib"])
                    if r.returncode == 0:
                        r = run([exe], cwd=scratch, env=env)
                    ok, output = r.returncode == 0, r.stdout
            elif lang == "sh" and "run" in flags:
                r = run(["bash", "-e", "-c", code], cwd=scratch, env=env)
                ok, output = r.returncode == 0, r.stdout
            else:
                skipped = "not run"
            if skipped:
                print(f"{where}: {skipped}")
                continue
            counted += 1
            print(f"{where}: {'ok' if ok else 'FAILED'}")
            if not ok:
                failed += 1
                print("    " + output.strip().replace("\n", "\n    "))
    print(f"{counted} snippets run, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
