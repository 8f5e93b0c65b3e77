"""Builds the kpool wheel: the Python package and the C libraries it loads.

The wheel holds, under kpool/_lib:

  libKPoolRuntime.so        the runtime's C API (no MLIR)
  libKPoolJit.so            the JIT, opened on demand; it needs LLVM/MLIR 22
                            (Debian: libmlir-22), found at Debian's path
  libkpool_cuda_runtime.so  the CUDA layer (needs the CUDA driver)
  kpool-packs/cuda/*.so     the default kernel pack (CUDA, no MLIR needed)

each with a run path relative to itself ($ORIGIN), so the package works
wherever pip puts it. The libraries come from an install of a CMake build
tree ($KPOOL_BUILD_DIR when set: an existing build, e.g. the one the tests
run from; else one configured and built here under build/pip), whose
libraries are built with their install run paths.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' own scratch space: under build/ (the CMake build's default
# folder is build/ as well; keep out of its lib/).
SCRATCH = os.environ.get("KPOOL_SETUPTOOLS_BUILD",
                         os.path.join(ROOT, "build", "setuptools"))
# The CMake targets the wheel needs (kpool_default_cuda and
# kpool_cuda_runtime exist when a CUDA toolkit was found).
TARGETS = ["KPoolRuntime", "KPoolJit"]
CUDA_TARGETS = ["kpool_cuda_runtime", "kpool_default_cuda"]


def version():
    """kpool's version, from the one place it is written."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(kpool\s+VERSION\s+([0-9][^\s)]*)", f.read())
    if not m:
        raise RuntimeError("project(kpool VERSION ...) not found in "
                           "CMakeLists.txt")
    return m.group(1)


def run(cmd, **kw):
    print("kpool setup:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def build_tree():
    """A CMake build tree with the libraries built: $KPOOL_BUILD_DIR, taken
    as it is (built by its owner: nothing is rebuilt there), or one
    configured and built here."""
    given = os.environ.get("KPOOL_BUILD_DIR")
    if given:
        given = os.path.abspath(given)
        if not os.path.exists(os.path.join(given, "CMakeCache.txt")):
            raise RuntimeError(f"KPOOL_BUILD_DIR={given} is not a CMake "
                               "build tree of kpool (no CMakeCache.txt)")
        return given
    build = os.path.join(ROOT, "build", "pip")
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        cmd = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release"]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        if shutil.which("clang-22") and shutil.which("clang++-22"):
            cmd += ["-DCMAKE_C_COMPILER=clang-22",
                    "-DCMAKE_CXX_COMPILER=clang++-22"]
        if shutil.which("ld.lld-22") or shutil.which("ld.lld"):
            cmd += ["-DLLVM_USE_LINKER=lld"]
        run(cmd)
    targets = list(TARGETS)
    # Build what is missing (a no-op in an up-to-date tree).
    probe = subprocess.run(["cmake", "--build", build, "--target", "help"],
                           capture_output=True, text=True)
    targets += [t for t in CUDA_TARGETS if t + ":" in probe.stdout]
    run(["cmake", "--build", build, "--target"] + targets)
    return build


def stage_libraries(build, dest):
    """Copies the libraries the package loads from the build tree's lib/
    into `dest` (kpool/_lib). They are built with their install run paths
    ($ORIGIN-relative; the JIT's names Debian's LLVM), so the copies work
    wherever pip puts them."""
    lib = os.path.join(build, "lib")
    os.makedirs(dest, exist_ok=True)
    for name in ["libKPoolRuntime.so", "libKPoolJit.so",
                 "libkpool_cuda_runtime.so"]:
        if os.path.exists(os.path.join(lib, name)):
            shutil.copy2(os.path.join(lib, name), os.path.join(dest, name))
    for pack in glob.glob(os.path.join(lib, "kpool-packs", "*", "*.so")):
        rel = os.path.relpath(pack, lib)
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(pack, os.path.join(dest, rel))
    if not os.path.exists(os.path.join(dest, "libKPoolRuntime.so")):
        raise RuntimeError(f"{lib} has no libKPoolRuntime.so: build the "
                           "targets " + " ".join(TARGETS + CUDA_TARGETS) +
                           " there first")


class BuildPyWithLibraries(build_py):
    """build_py, then the C libraries into the package."""

    def run(self):
        super().run()
        stage_libraries(build_tree(),
                        os.path.join(self.build_lib, "kpool", "_lib"))


class BinaryDistribution(Distribution):
    """The wheel holds shared libraries: a platform wheel, not a pure one."""

    def has_ext_modules(self):
        return True


os.makedirs(SCRATCH, exist_ok=True)
setup(
    version=version(),
    package_dir={"": "python"},
    packages=["kpool"],
    cmdclass={"build_py": BuildPyWithLibraries},
    distclass=BinaryDistribution,
    options={
        "build": {"build_base": SCRATCH},
        "egg_info": {"egg_base": SCRATCH},
    },
    zip_safe=False,
)
