# -*- Python -*-

import os
import shlex
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

# lit pointed at the source tree (`lit test/Dialect/KPool/invalid.mlir`, or
# the check-kpool-<dir> targets, which run lit on source directories) finds
# this file before any lit.site.cfg.py. Load the build tree's site config
# instead; it sets the build's paths and loads this file again. This is what
# upstream's llvm-lit does with its config map; Debian's lit has none. The
# build tree: --param kpool_site_config=<build>/test/lit.site.cfg.py (the
# check-kpool-<dir> targets pass it), else $KPOOL_BUILD_DIR, else build/ next
# to this checkout (scripts/build.sh's default).
if getattr(config, "kpool_obj_root", None) is None:
    _src_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _site = lit_config.params.get("kpool_site_config")
    if not _site:
        _build = os.environ.get("KPOOL_BUILD_DIR") or os.path.join(_src_root,
                                                                  "build")
        _site = os.path.join(os.path.abspath(_build), "test",
                             "lit.site.cfg.py")
    if not os.path.exists(_site):
        lit_config.fatal(
            "no kpool build tree at %r: build one (scripts/build.sh), or name "
            "it with KPOOL_BUILD_DIR=<build> or --param "
            "kpool_site_config=<build>/test/lit.site.cfg.py" % _site)
    lit_config.load_config(config, _site)
    raise SystemExit

config.name = "KPOOL"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kpool_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs", "lit.local.cfg"]

# lit.site.cfg.py.in does not set llvm_shlib_ext, and its mlir_lib_dir is empty
# (Debian's MLIRConfig exports no MLIR_LIBRARY_DIR): fall back to the LLVM
# install, where libMLIR and the runner libraries live.
if not getattr(config, "llvm_shlib_ext", None):
    config.llvm_shlib_ext = ".so"
if not getattr(config, "mlir_lib_dir", None):
    config.mlir_lib_dir = config.llvm_lib_dir

config.substitutions.append(("%PATH%", config.environment["PATH"]))

# Kernels the JIT compiles are cached on disk (kpool/Runtime/KernelCache.h):
# the suite's go to one folder of the build tree, shared by its tests (the
# configurations many tests use compile once), never to the user's
# ~/.cache. The cache's own tests set their own folders.
config.environment["KPOOL_CACHE_DIR"] = os.path.join(
    config.kpool_obj_root, "test", "kernel-cache")
config.substitutions.append(("%kpool_lib_dir", config.kpool_lib_dir))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%kpool_src_root", config.kpool_src_root))
config.substitutions.append(("%kpool_obj_root", config.kpool_obj_root))
config.substitutions.append(("%kpool_version", config.kpool_version))
config.substitutions.append(("%mlir_lib_dir", config.mlir_lib_dir))

# libdevice and ptxas are found through the CUDA environment variables, which
# lit otherwise strips.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kpool_tools_dir, append_path=True)

tool_dirs = [config.kpool_tools_dir, config.llvm_tools_dir]
tools = [
    "kpool-opt",
    "mlir-runner",
    ToolSubst("%mlir_runner_utils",
              os.path.join(config.mlir_lib_dir, "libmlir_runner_utils.so")),
    ToolSubst("%mlir_c_runner_utils",
              os.path.join(config.mlir_lib_dir, "libmlir_c_runner_utils.so")),
    ToolSubst("%libomp", os.path.join(config.llvm_lib_dir, "libomp.so")),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# ptxas assembles the PTX the GPU pipeline produces: the main check of the
# generated GPU code on machines without a GPU.
cuda_root = config.cuda_toolkit_root or os.environ.get("CUDA_HOME", "/usr/local/cuda")
ptxas = shutil.which("ptxas") or os.path.join(cuda_root, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# fatbinary packs PTX and cubins into the fatbins the GPU modules embed.
fatbinary = os.path.join(os.path.dirname(ptxas), "fatbinary")
if os.path.exists(fatbinary):
    config.available_features.add("fatbinary")
    config.substitutions.append(("%fatbinary", fatbinary))

# test/Docs regenerates the dialect and pass docs with the installed
# mlir-tblgen and diffs them against the committed copies in docs/dialect;
# test/Pipelines checks that the lowered modules translate to LLVM IR.
config.substitutions.append(
    ("%mlir_include_dir",
     os.path.join(os.path.dirname(config.llvm_tools_dir), "include")))
llvm_config.add_tool_substitutions(["mlir-tblgen", "mlir-translate",
                                    "llvm-nm", "llvm-readelf"],
                                   [config.llvm_tools_dir])

# test/Plugin: the stock mlir-opt of the LLVM/MLIR this build uses (Debian's),
# with kpool loaded as a plugin.
llvm_config.add_tool_substitutions(["mlir-opt"], [config.llvm_tools_dir])
config.substitutions.append(
    ("%kpool_plugin", os.path.join(config.kpool_lib_dir,
                                   "libKPoolPlugin" + config.llvm_shlib_ext)))

# Embedding (test/CAPI, test/Python, test/Examples): the C API library,
# Debian's Python with numpy and pytest (the `python3` first on PATH may be
# another interpreter without them), and the CMake, generator and compiler
# that configured this build, for building the example against an install.
config.substitutions.append(
    ("%kpool_capi_lib", os.path.join(config.kpool_lib_dir,
                                     "libKPoolRuntime.so")))

import subprocess

_python_numpy = "/usr/bin/python3"
if os.path.exists(_python_numpy) and subprocess.call(
        [_python_numpy, "-c", "import numpy, pytest"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("python-numpy")
# Building and installing the wheel (test/Python/wheel.test): pip,
# setuptools, wheel and venv (Debian: python3-pip, python3-setuptools,
# python3-wheel, python3-venv; scripts/setup.sh --tests installs them).
if os.path.exists(_python_numpy) and subprocess.call(
        [_python_numpy, "-c", "import setuptools, pip, wheel, venv, ensurepip"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("python-packaging")


def _read_cmake_cache(path):
    entries = {}
    if not os.path.exists(path):
        return entries
    with open(path) as cache:
        for line in cache:
            line = line.strip()
            if not line or line.startswith(("#", "//")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            entries[key.split(":", 1)[0]] = value
    return entries


_cache = _read_cmake_cache(os.path.join(config.kpool_obj_root,
                                        "CMakeCache.txt"))
if _cache.get("CMAKE_COMMAND") and _cache.get("CMAKE_CXX_COMPILER"):
    config.available_features.add("kpool-build-tree")
    config.substitutions.append(("%cmake_generator",
                                 '"%s"' % _cache.get("CMAKE_GENERATOR",
                                                     "Ninja")))
    config.substitutions.append(("%cmake_cxx_compiler",
                                 _cache["CMAKE_CXX_COMPILER"]))
    config.substitutions.append(("%cmake_linker_flags",
                                 "-fuse-ld=lld"
                                 if _cache.get("LLVM_USE_LINKER") == "lld"
                                 else ""))
    # After %cmake_* (lit substitutes in order, and %cmake is a prefix).
    config.substitutions.append(("%cmake", _cache["CMAKE_COMMAND"]))

# A sanitized build (KPOOL_SANITIZE, docs/testing.md): every report is fatal,
# leaks are checked in the C and C++ programs, and Python, which is not
# instrumented, preloads the sanitizer runtime before it loads the
# instrumented libKPoolCAPI.so (its own allocations are not leak-checked).
_python_cmd = _python_numpy
_sanitize = _cache.get("KPOOL_SANITIZE", "")
if _sanitize:
    config.available_features.add("sanitized")
    config.environment["ASAN_OPTIONS"] = (
        "abort_on_error=1:detect_leaks=1:allocator_may_return_null=1:"
        "strict_string_checks=1:"
        "check_initialization_order=1:detect_stack_use_after_return=1")
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    _runtime = _cache.get("KPOOL_ASAN_RUNTIME", "")
    if "address" in _sanitize and _runtime:
        _python_cmd = ("env LD_PRELOAD=%s ASAN_OPTIONS=abort_on_error=1:"
                       "allocator_may_return_null=1:"
                       "detect_leaks=0 %s" % (_runtime, _python_numpy))
if "python-numpy" in config.available_features:
    config.substitutions.append(("%kpool_python", _python_cmd))

# GPU execution (test/Integration/GPU, test/CudaEmu; docs/gpu.md). Where
# libkpool_cuda_runtime was built, the GPU tests run on an NVIDIA GPU when a
# probe finds one (libcuda.so.1 loads, cuInit succeeds, a device is there:
# feature cuda-gpu), else through the emulated CUDA driver of
# test/lib/CudaEmu (feature cuda-emu): the same binaries, with
# LD_LIBRARY_PATH naming <build>/lib/cuda-emu and the KPOOL_EMU_* defaults
# below. ptx-executor: kernels execute (a GPU, or the emulated driver with
# the PTX executor rather than its placeholder). KPOOL_GPU_TESTS=0 skips the
# GPU tests, =1 runs them on the system's driver whatever the probe says,
# =emulated uses the emulated driver even on a GPU machine.
_GPU_PROBE = r"""
import ctypes, sys
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    sys.exit(1)
if hasattr(cuda, "kpoolEmuStreamLaunches"):
    sys.exit(1)  # the emulated driver is first in LD_LIBRARY_PATH
count = ctypes.c_int(0)
if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
    sys.exit(1)
sys.exit(0 if count.value > 0 else 1)
"""


def _have_gpu():
    try:
        # In a child process: the lit process itself keeps no CUDA state.
        return subprocess.run([sys.executable, "-c", _GPU_PROBE],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


import sys

_cuda_runtime = os.path.join(config.kpool_lib_dir, "libkpool_cuda_runtime.so")
_cuda_emu_dir = os.path.join(config.kpool_lib_dir, "cuda-emu")
_gpu_tests = os.environ.get("KPOOL_GPU_TESTS", "")
config.kpool_gpu = None
config.kpool_gpu_environment = {}
config.kpool_cuda_emu_environment = None
if os.path.exists(_cuda_runtime) and _gpu_tests != "0":
    config.substitutions.append(("%kpool_cuda_runtime", _cuda_runtime))
    config.substitutions.append(("%cuda_emu_dir", _cuda_emu_dir))
    if os.path.exists(os.path.join(_cuda_emu_dir, "libcuda.so.1")):
        _path = os.environ.get("LD_LIBRARY_PATH", "")
        config.kpool_cuda_emu_environment = {
            "LD_LIBRARY_PATH": _cuda_emu_dir + (":" + _path if _path else ""),
            "KPOOL_EMU_ORDER": "forward",
            "KPOOL_EMU_SEED": "0",
            "KPOOL_EMU_APPROX": "nominal",
            "KPOOL_EMU_CHECKS": "all",
            "KPOOL_EMU_ON_FINDING": "exit",
        }
        # test/CudaEmu: the emulated driver's own tests, on every machine.
        # Tests elsewhere that run a program on it (CUDA kernel sets from
        # C, C++ and Python: test/CAPI, test/Runtime, test/Python) use
        # `env %cuda_emu_env <program>`.
        if config.kpool_cuda_emu_executes:
            config.available_features.add("cuda-emu-executes")
            config.substitutions.append(
                ("%cuda_emu_env",
                 " ".join("%s=%s" % (name, shlex.quote(value)) for name, value
                          in config.kpool_cuda_emu_environment.items())))
    if _gpu_tests == "1" or (_gpu_tests != "emulated" and _have_gpu()):
        config.kpool_gpu = "gpu"
        config.available_features.update(["cuda-gpu", "ptx-executor"])
    elif config.kpool_cuda_emu_environment:
        config.kpool_gpu = "emulated"
        config.kpool_gpu_environment = config.kpool_cuda_emu_environment
        config.available_features.add("cuda-emu")
        if config.kpool_cuda_emu_executes:
            config.available_features.add("ptx-executor")
