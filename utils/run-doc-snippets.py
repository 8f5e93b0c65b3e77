#!/usr/bin/env python3
"""Runs the code blocks of the project's markdown documentation.

usage: run-doc-snippets.py --src SRC --build BUILD [--install PREFIX]
                           [--expect-counts FILE.md] FILE.md|DIR...

A DIR stands for the *.md files under it, subdirectories included (the
generated reference in docs/dialect too).

Every fenced block is either code, which runs unless it is marked, or text.
The language is the first word of the info string; the words after it
(such as the `run` of older `sh run` blocks) change nothing.

  python, py  executed; the blocks of one file run in order in one
              namespace, in one Python process per file, as a reader
              following the guide would run them, with the build's
              emulated CUDA driver first in LD_LIBRARY_PATH (docs/gpu.md)
  mlir        parsed and verified by BUILD/bin/kpool-opt; a block without a
              function or module (an op on its own, as in the generated op
              reference) is verified inside a function whose arguments are
              the values the block uses but does not define, typed as the
              op's syntax names them
  c, cpp      compiled (syntax and types: -fsyntax-only) against the kpool,
              MLIR and LLVM headers; a C block with `int main` is also
              linked against the C API's libraries (libKPoolRuntime.so,
              libKPoolCAPI.so) and run
  sh          executed with bash -e, in a scratch directory of the file's
              own where `build`, `examples`, `python`, `utils` and `scripts`
              are the build and source directories (so `build/bin/kpool-opt
              examples/...` works as written)
  cmake       the block is a downstream CMakeLists.txt, configured with
              -DKPool_DIR=<install>/lib/cmake/kpool and built; each target
              it links but does not create is an executable with an empty
              main()

A code block that is not run says so, with the reason, in its first line,
a comment of its language that the reader sees:

  # not run: <reason>         (python, sh, cmake)
  // not run: <reason>        (mlir, c, cpp)

Text -- no info string, or `text`, `console`, `output` -- is output,
formulas or grammar, not code. A block in any other language fails.

A Python block that stops on `import torch` where PyTorch is not installed
is reported as needing it, not as failed.

Prints one line per block, then "N snippets run, M marked not run, F
failed" (F: blocks that ran and failed, and blocks neither run nor
properly marked); exits 1 when F is not 0 or, with --expect-counts, when
the counts the given file states ("**N** code blocks run ... **M** are
marked not run") are not N (with the blocks that need a missing module)
and M.
"""

import argparse
import concurrent.futures
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)\s*(.*)$")
TEXT = {"", "text", "console", "output"}
COMMENT = {"python": "#", "py": "#", "sh": "#", "bash": "#", "cmake": "#",
           "mlir": "//", "c": "//", "cpp": "//"}
NOT_RUN = re.compile(r"^\s*(#|//)\s*not run\b:?\s*(.*)$")
# Modules a Python block may need that a machine may lack.
OPTIONAL_MODULES = {"torch"}
# A count sentence of --expect-counts.
COUNTS = re.compile(r"\*\*(\d+)\*\*\s+code\s+blocks\s+run\b.*?\*\*(\d+)\*\*\s+"
                    r"(?:are|is)\s+marked\s+not\s+run", re.S)
MLIR_UNIT = re.compile(r"^\s*(func\.func|module|gpu\.module|llvm\.func|"
                       r"\"?builtin\.module)\b", re.M)
MLIR_VALUE = re.compile(r"%[A-Za-z_$.\-0-9]+")
MLIR_DEFINED = re.compile(r"^\s*(%[^=]*?)\s*=\s*[A-Za-z\"]", re.M)
MLIR_TYPE_OF = re.compile(r"use of value '(%[^']+)' expects different type "
                          r"than prior uses: '(.+)' vs 'none'")


def blocks(path):
    """(line, language, code) of each fenced block."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, _ = m.groups()
        start = i + 1
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent)
                        else line.lstrip())
            i += 1
        i += 1
        yield start, lang.lower(), "".join(body)


TIMEOUT = 300  # seconds per block; --timeout


def run(cmd, **kwargs):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=kwargs.pop("timeout", TIMEOUT), **kwargs)
    except subprocess.TimeoutExpired as e:
        output = e.output.decode(errors="replace") if isinstance(
            e.output, bytes) else (e.output or "")
        return subprocess.CompletedProcess(
            cmd, 124, output + f"\n(stopped after {e.timeout:.0f} s)")


def not_run_reason(lang, code):
    """The reason of a block marked not run, '' for one marked without a
    reason, None for a block to run."""
    first = next((l for l in code.splitlines() if l.strip()), "")
    m = NOT_RUN.match(first)
    if not m:
        return None
    if m.group(1) != COMMENT[lang]:
        return ""  # not a comment of the block's language
    return m.group(2).strip()


class Runner:
    def __init__(self, args):
        self.args = args
        self.src = os.path.abspath(args.src)
        self.build = os.path.abspath(args.build)
        self.root = tempfile.mkdtemp(prefix="kpool-doc-snippets-")
        self.install = args.install and os.path.abspath(args.install)
        self.includes = [f"-I{self.src}/include", f"-I{self.build}/include",
                         f"-I{args.llvm}/include"]
        env = dict(os.environ, PYTHONPATH=os.path.join(self.src, "python"),
                   PYTHONDONTWRITEBYTECODE="1")
        env.setdefault("KPOOL_CAPI_LIB",
                       os.path.join(self.build, "lib", "libKPoolRuntime.so"))
        self.env = env
        emu = os.path.join(self.build, "lib", "cuda-emu")
        self.python_env = dict(env)
        if os.path.exists(os.path.join(emu, "libcuda.so.1")):
            path = env.get("LD_LIBRARY_PATH")
            self.python_env["LD_LIBRARY_PATH"] = emu + (":" + path if path
                                                        else "")

    def scratch(self, md):
        """A scratch directory for one markdown file's blocks."""
        path = tempfile.mkdtemp(prefix=os.path.basename(md)[:-3] + "-",
                                dir=self.root)
        for name, target in [("build", self.build),
                             ("examples", f"{self.src}/examples"),
                             ("python", f"{self.src}/python"),
                             ("utils", f"{self.src}/utils"),
                             ("scripts", f"{self.src}/scripts")]:
            os.symlink(target, os.path.join(path, name))
        return path

    def installed(self):
        if not self.install:
            self.install = os.path.join(self.root, "prefix")
            r = run([self.args.cmake, "--install", self.build, "--prefix",
                     self.install])
            if r.returncode != 0:
                raise RuntimeError("cmake --install failed:\n" + r.stdout)
        return self.install

    # Each run_<lang> returns (ok, output).

    def run_mlir(self, code, scratch, line):
        path = os.path.join(scratch, f"snippet{line}.mlir")
        if MLIR_UNIT.search(code):
            with open(path, "w") as f:
                f.write(code)
            r = run([f"{self.build}/bin/kpool-opt", path, "-o", os.devnull])
            return r.returncode == 0, r.stdout
        # An op on its own: its undefined values become arguments of a
        # function, each typed by the parser's complaint about `none`.
        defined = set()
        for m in MLIR_DEFINED.finditer(code):
            defined.update(MLIR_VALUE.findall(m.group(1)))
        types = {}
        for v in MLIR_VALUE.findall(code):
            if v not in defined:
                types.setdefault(v.split("#")[0], "none")
        for _ in range(len(types) + 1):
            args = ", ".join(f"{v}: {t}" for v, t in types.items())
            with open(path, "w") as f:
                f.write(f"func.func @snippet({args}) {{\n{code}  return\n}}\n")
            r = run([f"{self.build}/bin/kpool-opt", path, "-o", os.devnull])
            if r.returncode == 0:
                return True, ""
            m = MLIR_TYPE_OF.search(r.stdout)
            if not m or types.get(m.group(1)) != "none":
                return False, ("(the block as the body of a function, from "
                               "its second line)\n" + r.stdout)
            types[m.group(1)] = m.group(2)
        return False, r.stdout

    def run_c(self, code, scratch, line, lang):
        ext, compiler, std = ((".c", self.args.cc, "-std=c11") if lang == "c"
                              else (".cpp", self.args.cxx, "-std=c++17"))
        path = os.path.join(scratch, f"snippet{line}{ext}")
        with open(path, "w") as f:
            f.write(code)
        r = run([compiler, std, "-fsyntax-only", "-Wall", "-Werror",
                 "-Wno-unused-variable", "-Wno-unused-function",
                 *self.includes, path])
        if r.returncode != 0 or lang != "c" or not re.search(r"\bint main\b",
                                                             code):
            return r.returncode == 0, r.stdout
        exe = path[:-2]
        r = run([compiler, std, *self.includes, path, "-o", exe,
                 f"-L{self.build}/lib", "-lKPoolRuntime", "-lKPoolCAPI",
                 "-lm",
                 f"-Wl,-rpath,{self.build}/lib"])
        if r.returncode == 0:
            r = run([exe], cwd=scratch, env=self.env)
        return r.returncode == 0, r.stdout

    def run_sh(self, code, scratch):
        r = run(["bash", "-e", "-c", code], cwd=scratch, env=self.env)
        return r.returncode == 0, r.stdout

    def run_cmake(self, code, scratch, line):
        project = os.path.join(scratch, f"cmake{line}")
        os.makedirs(project)
        made = set(re.findall(r"\b(?:add_executable|add_library|"
                              r"kpool_add_aot_kernels)\(\s*([\w.+-]+)", code))
        linked = re.findall(r"\btarget_link_libraries\(\s*([\w.+-]+)", code)
        apps = [t for t in dict.fromkeys(linked) if t not in made]
        with open(os.path.join(project, "main.cpp"), "w") as f:
            f.write("int main() { return 0; }\n")
        with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.20)\n"
                    "project(kpool_doc_snippet LANGUAGES C CXX)\n")
            for app in apps:
                f.write(f"add_executable({app} main.cpp)\n")
            f.write(code)
        prefix = self.installed()
        r = run([self.args.cmake, "-G", self.args.cmake_generator, "-S",
                 project, "-B",
                 os.path.join(project, "build"),
                 f"-DKPool_DIR={prefix}/lib/cmake/kpool",
                 f"-DCMAKE_C_COMPILER={self.args.cc}",
                 f"-DCMAKE_CXX_COMPILER={self.args.cxx}",
                 *self.args.cmake_arg])
        if r.returncode != 0:
            return False, r.stdout
        r = run([self.args.cmake, "--build", os.path.join(project, "build")])
        return r.returncode == 0, r.stdout

    def run_python(self, rel, pending, scratch):
        """Runs a file's Python blocks in one worker process; returns
        {line: (ok, output, missing module, seconds)}."""
        results = os.path.join(scratch, "python-results.json")
        r = run([sys.executable, os.path.abspath(__file__), "--python-worker",
                 rel, results], input=json.dumps(pending), cwd=scratch,
                env=self.python_env, timeout=TIMEOUT * len(pending))
        try:
            with open(results) as f:
                done = {int(k): tuple(v) for k, v in json.load(f).items()}
        except (OSError, ValueError):
            done = {}
        for line, _ in pending:
            done.setdefault(line, (False, "the Python process stopped:\n"
                                   + r.stdout, None, 0))
        return done

    def run_file(self, md):
        """[(line, lang, status, detail, seconds)], status one of ok,
        FAILED (ran and failed), invalid (neither runs nor is marked),
        marked, text, missing."""
        rel = os.path.relpath(md, self.src)
        scratch = self.scratch(md)
        results = []
        python = [(line, code) for line, lang, code in blocks(md)
                  if lang in ("python", "py")
                  and not_run_reason(lang, code) is None]
        python_results = (self.run_python(rel, python, scratch) if python
                          else {})
        for line, lang, code in blocks(md):
            if lang in TEXT:
                results.append((line, lang or "text", "text", "", 0))
                continue
            if lang not in COMMENT:
                results.append((line, lang, "invalid",
                                f"no runner for '{lang}' blocks: run it in "
                                "another language, mark it not run or make "
                                "it text", 0))
                continue
            reason = not_run_reason(lang, code)
            if reason is not None:
                if reason:
                    results.append((line, lang, "marked", reason, 0))
                else:
                    results.append((line, lang, "invalid",
                                    "marked not run without a reason: the "
                                    f"first line must be `{COMMENT[lang]} not "
                                    "run: <reason>`", 0))
                continue
            start = time.monotonic()
            try:
                if lang in ("python", "py"):
                    ok, output, missing, seconds = python_results[line]
                    if missing:
                        results.append((line, lang, "missing", missing, 0))
                        continue
                    start -= seconds
                elif lang == "mlir":
                    ok, output = self.run_mlir(code, scratch, line)
                elif lang in ("c", "cpp"):
                    ok, output = self.run_c(code, scratch, line, lang)
                elif lang in ("sh", "bash"):
                    ok, output = self.run_sh(code, scratch)
                else:
                    ok, output = self.run_cmake(code, scratch, line)
            except Exception:
                ok, output = False, traceback.format_exc()
            results.append((line, lang, "ok" if ok else "FAILED",
                            "" if ok else output,
                            time.monotonic() - start))
        return rel, results


def python_worker(rel, results_path):
    """Executes the Python blocks given on stdin ([line, code] pairs) in one
    namespace; writes {line: [ok, output, missing module, seconds]}."""
    namespace = {"__name__": "__doc__"}
    results = {}
    for line, code in json.load(sys.stdin):
        buffer = io.StringIO()
        missing = None
        start = time.monotonic()
        try:
            with contextlib.redirect_stdout(buffer):
                exec(compile(code, f"{rel}:{line}", "exec"), namespace)
            ok, output = True, ""
        except ModuleNotFoundError as e:
            ok, output = False, traceback.format_exc()
            if e.name in OPTIONAL_MODULES:
                missing = e.name
        except BaseException:
            ok, output = False, traceback.format_exc()
        results[line] = [ok, output, missing, time.monotonic() - start]
        with open(results_path, "w") as f:  # what ran, should the next crash
            json.dump(results, f)
    return 0


def main():
    global TIMEOUT
    if len(sys.argv) == 4 and sys.argv[1] == "--python-worker":
        return python_worker(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--install",
                        help="an install of the build (default: installed "
                             "into a scratch directory when a cmake block "
                             "needs it)")
    parser.add_argument("--cc", default="clang-22")
    parser.add_argument("--cxx", default="clang++-22")
    parser.add_argument("--llvm", default="/usr/lib/llvm-22")
    parser.add_argument("--cmake", default="cmake")
    parser.add_argument("--cmake-generator", default="Ninja")
    parser.add_argument("--cmake-arg", action="append", default=[],
                        help="an extra argument for configuring cmake blocks")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="files run in parallel (a file's blocks run in "
                             "order)")
    parser.add_argument("--timeout", type=int, default=TIMEOUT,
                        help="seconds a block may run")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch directory (printed)")
    parser.add_argument("--expect-counts",
                        help="a markdown file stating the counts")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    TIMEOUT = args.timeout
    files = []
    for path in args.files:
        if os.path.isdir(path):
            for dirpath, dirnames, names in sorted(os.walk(path)):
                dirnames.sort()
                files += [os.path.join(dirpath, n) for n in sorted(names)
                          if n.endswith(".md")]
        else:
            files.append(path)
    runner = Runner(args)
    if args.keep:
        print(f"scratch directory: {runner.root}")
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        done = list(pool.map(runner.run_file, files))
    if not args.keep:
        shutil.rmtree(runner.root, ignore_errors=True)
    counts = {"ok": 0, "FAILED": 0, "invalid": 0, "marked": 0, "text": 0,
              "missing": 0}
    missing = set()
    for rel, results in done:
        for line, lang, status, detail, seconds in results:
            counts[status] += 1
            where = f"{rel}:{line} {lang}"
            if status == "ok":
                print(f"{where}: ok ({seconds:.1f} s)")
            elif status in ("FAILED", "invalid"):
                print(f"{where}: FAILED")
                print("    " + detail.strip().replace("\n", "\n    "))
            elif status == "marked":
                print(f"{where}: not run: {detail}")
            elif status == "missing":
                missing.add(detail)
                print(f"{where}: needs {detail}, which is not installed here")
            else:
                print(f"{where}: text")
    run_count = counts["ok"] + counts["FAILED"]
    print(f"{counts['text']} blocks of text (output, formulas, grammar)")
    if counts["missing"]:
        print(f"{counts['missing']} snippets need {', '.join(sorted(missing))}"
              ", which is not installed here")
    failed, stale = counts["FAILED"] + counts["invalid"], False
    if args.expect_counts:
        with open(args.expect_counts, encoding="utf-8") as f:
            m = COUNTS.search(f.read())
        expected_run = run_count + counts["missing"]
        if not m:
            print(f"{args.expect_counts}: no sentence stating the counts "
                  "(\"**N** code blocks run ... **M** are marked not run\")")
            stale = True
        elif (int(m.group(1)), int(m.group(2))) != (expected_run,
                                                    counts["marked"]):
            print(f"{args.expect_counts} states {m.group(1)} code blocks run "
                  f"and {m.group(2)} marked not run; there are {expected_run} "
                  f"and {counts['marked']}: update it")
            stale = True
    print(f"{run_count} snippets run, {counts['marked']} marked not run, "
          f"{failed} failed")
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
