"""CUDA kernel sets from Python on the mgpu-level emulation.

Runs only under test/Python/cuda-emulated.test, which puts the emulation of
the CUDA layer (test/lib/GPU/FakeCudaRuntime.cpp built as
libkpool_cuda_runtime.so) first in LD_LIBRARY_PATH and sets
KPOOL_TEST_MGPU_EMU=1: the default kernel pack's kernels and the JIT's
(compiled in this process) are loaded, their GPU modules registered and
loaded, their launches checked and counted on the caller's stream, captured
and replayed -- but not executed (the emulation runs no PTX; what they
compute is checked where PTX runs, under the PTX-executing emulated driver).
Device arrays are stand-ins: host memory behind __cuda_array_interface__.
"""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import kpool
import kpool.cache
from kpool import _capi

pytestmark = pytest.mark.skipif(
    os.environ.get("KPOOL_TEST_MGPU_EMU") != "1",
    reason="needs the mgpu-level CUDA emulation first in LD_LIBRARY_PATH "
           "(test/Python/cuda-emulated.test runs this file)")

D, K = 128, 4


class Emu:
    """The emulation's functions (mgpu* and its kpoolEmu* test interface)."""

    def __init__(self):
        lib = ctypes.CDLL("libkpool_cuda_runtime.so")
        assert lib.kpoolEmuIsEmulated() == 1
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        for name, res, args in [
                ("mgpuStreamCreate", vp, []),
                ("mgpuMemAlloc", vp, [ctypes.c_uint64, vp, ctypes.c_bool]),
                ("kpoolEmuKernelLaunches", i64, []),
                ("kpoolEmuKernelLaunchesOf", i64, [ctypes.c_char_p]),
                ("kpoolEmuLastKernel", ctypes.c_char_p, []),
                ("kpoolEmuModulesRegistered", i64, []),
                ("kpoolEmuModuleLoads", i64, []),
                ("kpoolEmuStreamLaunches", i64, [vp]),
                ("kpoolEmuBeginCapture", None, [vp]),
                ("kpoolEmuEndCapture", vp, [vp]),
                ("kpoolEmuLaunchGraph", None, [vp, vp]),
                ("kpoolEmuGraphLaunches", i64, [vp])]:
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        self.lib = lib

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def launches_of(self, part):
        return self.lib.kpoolEmuKernelLaunchesOf(part.encode())


class DeviceArray:
    """Emulated device memory (mgpuMemAlloc) behind the CUDA array interface
    (v3); `host` is a numpy view of it, for filling and reading."""

    def __init__(self, emu, shape, dtype):
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.address = emu.mgpuMemAlloc(max(n, 1), None, False)
        buf = (ctypes.c_char * max(n, 1)).from_address(self.address)
        self.host = np.frombuffer(buf, dtype, count=n // dtype.itemsize
                                  ).reshape(shape)
        self.host[...] = 0
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": dtype.str,
            "data": (self.address, False), "strides": None, "version": 3}


@pytest.fixture(scope="module")
def emu():
    kpool._capi.load()
    return Emu()


def decode_operands(emu, batch=2, tokens=9, dim=D, pool=K, etype=np.uint16):
    """Device arrays for compress/step: B requests over `tokens` rows."""
    a = {
        "k": DeviceArray(emu, (tokens, dim), etype),
        "gate": DeviceArray(emu, (tokens, dim), etype),
        "ape": DeviceArray(emu, (pool, dim), np.float32),
        "iro": DeviceArray(emu, (batch + 1,), np.int32),
        "pro": DeviceArray(emu, (batch + 1,), np.int32),
        "cache": DeviceArray(emu, (batch,), np.int32),
        "slots": DeviceArray(emu, (batch,), np.int32),
        "pooled": DeviceArray(emu, (tokens // pool + batch, dim), etype),
        "closed": DeviceArray(emu, (batch, dim), etype),
        "closed_pool": DeviceArray(emu, (batch,), np.int32),
        "tail": DeviceArray(emu, (8, 2, pool, dim), etype),
        "status": DeviceArray(emu, (1,), np.uint64),
    }
    a["iro"].host[:] = np.linspace(0, tokens, batch + 1).astype(np.int32)
    a["slots"].host[:] = np.arange(batch)
    return a


def test_default_pack_set(emu):
    """bf16, head_dim 128, kpool 4 comes from the default pack: nothing is
    compiled; its modules load in prepare; compress runs on the stream."""
    before = kpool.cache.statistics()
    ks = kpool.KernelSet("bf16", D, K, target="cuda")
    after = kpool.cache.statistics()
    assert after.compiled == before.compiled and after.hits == before.hits
    assert emu.kpoolEmuModulesRegistered() > 0
    stream = emu.mgpuStreamCreate()
    ks.prepare(stream)
    assert emu.kpoolEmuModuleLoads() == 1
    a = decode_operands(emu)
    launches = emu.kpoolEmuStreamLaunches(stream)
    got = ks.compress(a["k"], a["gate"], a["ape"], a["iro"], a["pro"],
                      a["cache"], out=a["pooled"], stream=stream)
    assert got is a["pooled"]                 # the caller's object
    assert emu.kpoolEmuStreamLaunches(stream) > launches
    assert emu.kpoolEmuLastKernel().decode().startswith(
        "kpool_bf16_d128_k4_cuda_compress")


def test_jit_set(emu):
    """A configuration in no pack is compiled by the JIT in this process
    (or read from its disk cache)."""
    before = kpool.cache.statistics()
    ks = kpool.KernelSet("f16", 64, 2, target="cuda")
    after = kpool.cache.statistics()
    assert (after.compiled - before.compiled) + (after.hits - before.hits) == 1
    stream = emu.mgpuStreamCreate()
    a = decode_operands(emu, dim=64, pool=2, etype=np.float16)
    n = emu.launches_of("kpool_f16_d64_k2_cuda_compress")
    ks.compress(a["k"], a["gate"], a["ape"], a["iro"], a["pro"], a["cache"],
                out=a["pooled"], stream=stream)
    assert emu.launches_of("kpool_f16_d64_k2_cuda_compress") > n


def test_pool_cache_format_from_pack(emu):
    before = kpool.cache.statistics()
    ks = kpool.KernelSet("bf16", D, K, target="cuda", cache="fp8",
                         rotate="hadamard", scale="absmax")
    assert kpool.cache.statistics().compiled == before.compiled
    assert ks.cache == "fp8"


def test_neither_says_how(emu):
    """No pack and no JIT: the error says how to get the configuration."""
    env = dict(os.environ, KPOOL_JIT_LIBRARY="", KPOOL_KERNEL_PACKS="")
    code = ("import kpool\n"
            "try:\n"
            "    kpool.KernelSet('bf16', 96, 4, target='cuda')\n"
            "except kpool.KPoolError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert "no kernels for bf16, head_dim 96, kpool 4 on the CUDA target" in out
    assert "kpool-aot --pack --target=cuda --config=bf16:96:4" in out
    assert "kpool.load_kernel_pack" in out
    assert "the JIT is off" in out


def test_default_pack_without_mlir(emu):
    """With no JIT to load (as on a machine without LLVM/MLIR), the default
    pack's configurations still work and load neither libMLIR nor libLLVM;
    another configuration fails saying how to get it."""
    env = dict(os.environ, KPOOL_JIT_LIBRARY="/nonexistent/libKPoolJit.so",
               KPOOL_DISABLE_CACHE="1")
    code = ("import kpool\n"
            "ks = kpool.KernelSet('f16', 128, 4, target='cuda')\n"
            "maps = open('/proc/self/maps').read()\n"
            "print('pack:', ks.target, 'libMLIR' in maps, 'libLLVM' in maps)\n"
            "try:\n"
            "    kpool.KernelSet('f16', 96, 4, target='cuda')\n"
            "except kpool.KPoolError as e:\n"
            "    print('other:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert "pack: cuda False False" in out, out
    assert "other: no kernels for f16, head_dim 96, kpool 4 on the CUDA " \
        "target" in out, out
    assert "the JIT library could not be loaded: /nonexistent/" in out, out


def test_load_kernel_pack(emu):
    lib_dir = os.path.dirname(_capi.library_path())
    pack = os.path.join(lib_dir, "kpool-packs", "cuda", "kpool_default_cuda.so")
    assert os.path.exists(pack)
    kpool.KernelSet("bf16", D, K, target="cuda")   # loads it by itself
    assert kpool.load_kernel_pack(pack) == 0       # already loaded
    with pytest.raises(kpool.KPoolError, match="not a kernel pack"):
        kpool.load_kernel_pack(_capi.library_path())
    with pytest.raises(kpool.KPoolError, match="cannot be loaded"):
        kpool.load_kernel_pack(os.path.join(lib_dir, "no-such-pack.so"))


def test_capture_and_replay(emu):
    """A step captured on a stream runs nothing; each replay runs its
    launches; prepare before the capture keeps module loading out of it."""
    ks = kpool.KernelSet("bf16", D, K, target="cuda")
    stream = emu.mgpuStreamCreate()
    ks.prepare(stream)
    a = decode_operands(emu)
    emu.kpoolEmuBeginCapture(stream)
    launched = emu.kpoolEmuKernelLaunches()
    ks.step(a["tail"], a["k"], a["gate"], a["ape"], a["iro"], a["cache"],
            a["slots"], pooled=a["pooled"], closed=a["closed"],
            closed_pool=a["closed_pool"], pool_row_offsets=a["pro"],
            stream=stream, status=a["status"])
    graph = emu.kpoolEmuEndCapture(stream)
    assert emu.kpoolEmuKernelLaunches() == launched
    per_replay = emu.kpoolEmuGraphLaunches(graph)
    assert per_replay >= 1
    for _ in range(3):
        emu.kpoolEmuLaunchGraph(graph, stream)
    assert emu.kpoolEmuKernelLaunches() == launched + 3 * per_replay


def test_docs_decode_loop(emu):
    """docs/python.md's decode loop under graph capture, with the
    emulation's streams and graphs standing in for torch.cuda's: the same
    calls in the same order, the inputs and metadata rewritten in place
    between replays, the status word read at the end."""
    B, SLOTS, T = 8, 64, 8
    ks = kpool.KernelSet("bf16", D, K, target="cuda")
    arrays = {
        "ape": DeviceArray(emu, (K, D), np.float32),
        "tail": DeviceArray(emu, (SLOTS, 2, K, D), np.uint16),
        "k": DeviceArray(emu, (T, D), np.uint16),
        "gate": DeviceArray(emu, (T, D), np.uint16),
        "iro": DeviceArray(emu, (B + 1,), np.int32),
        "cache": DeviceArray(emu, (B,), np.int32),
        "slots": DeviceArray(emu, (B,), np.int32),
        "pooled": DeviceArray(emu, (T // K + B, D), np.uint16),
        "closed": DeviceArray(emu, (B, D), np.uint16),
        "closed_pool": DeviceArray(emu, (B,), np.int32),
        "pro": DeviceArray(emu, (B + 1,), np.int32),
        "status": DeviceArray(emu, (1,), np.int64),
    }
    v = {n: a for n, a in arrays.items()}
    v["iro"].host[:] = np.arange(B + 1)
    v["slots"].host[:] = np.arange(B)
    stream = emu.mgpuStreamCreate()
    ks.prepare(stream)
    emu.kpoolEmuBeginCapture(stream)
    ks.step(v["tail"], v["k"], v["gate"], v["ape"], v["iro"], v["cache"],
            v["slots"], pooled=v["pooled"], closed=v["closed"],
            closed_pool=v["closed_pool"], pool_row_offsets=v["pro"],
            stream=stream, status=v["status"])
    graph = emu.kpoolEmuEndCapture(stream)
    steps = emu.launches_of("step")
    rng = np.random.default_rng(1)
    for n in range(5):
        v["k"].host[:] = rng.integers(0, 1 << 16, (T, D))   # in place
        v["gate"].host[:] = rng.integers(0, 1 << 16, (T, D))
        emu.kpoolEmuLaunchGraph(graph, stream)
        v["cache"].host[:] += 1
    assert emu.launches_of("step") == steps + 5 * emu.kpoolEmuGraphLaunches(
        graph)
    assert int(v["status"].host[0]) == 0
    assert kpool.status_error(int(v["status"].host[0])) is None


@pytest.mark.parametrize("case", ["pack", "jit"])
def test_torch_cuda_implementation(emu, monkeypatch, case):
    """kpool.torch's CUDA implementations (the functions registered for
    the CUDA dispatch key) with stand-ins for CUDA tensors: the device
    arrays above, with a torch dtype, and torch.cuda.current_stream giving
    an emulated stream (Debian's torch has no CUDA). bf16, head_dim 128,
    kpool 4 comes from the default pack; f16, 64, 2 from the JIT."""
    torch = pytest.importorskip("torch", reason="needs python3-torch")
    import kpool.torch as kt

    dtype, np_dtype, dim, pool = {
        "pack": (torch.bfloat16, np.uint16, 128, 4),
        "jit": (torch.float16, np.float16, 64, 2)}[case]
    stream = emu.mgpuStreamCreate()

    class FakeTensor(DeviceArray):
        def __init__(self, shape, dtype, np_dtype):
            super().__init__(emu, shape, np_dtype)
            self.dtype, self.is_cuda, self.device = dtype, True, "cuda:0"
            self.shape = tuple(shape)

    class Stream:
        cuda_stream = stream

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None:
                        Stream())
    k = FakeTensor((9, dim), dtype, np_dtype)
    gate = FakeTensor((9, dim), dtype, np_dtype)
    ape = FakeTensor((pool, dim), torch.float32, np.float32)
    iro = FakeTensor((3,), torch.int32, np.int32)
    pro = FakeTensor((3,), torch.int32, np.int32)
    cache = FakeTensor((2,), torch.int32, np.int32)
    pooled = FakeTensor((9 // pool + 2, dim), dtype, np_dtype)
    iro.host[:] = [0, 5, 9]
    name = f"kpool_{'bf16' if case == 'pack' else 'f16'}_d{dim}_k{pool}_cuda"
    before = emu.kpoolEmuStreamLaunches(stream)
    kt._compress(True)(k, gate, ape, iro, pro, cache, pooled)
    assert emu.kpoolEmuStreamLaunches(stream) > before
    assert emu.kpoolEmuLastKernel().decode().startswith(name + "_compress")
    tail = FakeTensor((4, 2, pool, dim), dtype, np_dtype)
    slots = FakeTensor((2,), torch.int32, np.int32)
    before = emu.launches_of(name + "_seed_tail")
    kt._seed_tail(True)(tail, k, gate, iro, cache, slots)
    assert emu.launches_of(name + "_seed_tail") > before
