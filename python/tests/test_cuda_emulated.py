"""CUDA kernel sets from Python on the emulated CUDA driver.

Runs only under test/Python/cuda-emulated.test, which puts the emulated
CUDA driver (test/lib/CudaEmu, <build>/lib/cuda-emu/libcuda.so.1) first in
LD_LIBRARY_PATH and sets KPOOL_TEST_CUDA_EMU=1. The driver executes the
kernels' PTX: the default kernel pack's kernels and the JIT's (compiled in
this process) run on device memory, their results compared with the CPU
kernel set of the same configuration; module loads in prepare, launches on
the caller's stream, capture and replay, docs/python.md's CUDA-graph decode
loop and kpool.torch's CUDA implementation (with stand-ins for CUDA
tensors) run as they would on a GPU. The emulated driver's introspection
(test/lib/CudaEmu/Introspection.h) counts loads and launches.

Device memory and copies come from kpool's CUDA layer
(libkpool_cuda_runtime.so, mgpu*), graphs from the driver API.
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
    os.environ.get("KPOOL_TEST_CUDA_EMU") != "1",
    reason="needs the emulated CUDA driver first in LD_LIBRARY_PATH "
           "(test/Python/cuda-emulated.test runs this file)")

D, K = 128, 4


class Emu:
    """kpool's CUDA layer (mgpu*), the driver's graph calls and the
    emulated driver's introspection."""

    def __init__(self):
        lib_dir = os.path.dirname(_capi.library_path())
        rt = ctypes.CDLL(os.path.join(lib_dir, "libkpool_cuda_runtime.so"))
        cu = ctypes.CDLL("libcuda.so.1")
        assert hasattr(cu, "kpoolEmuKernelLaunches"), \
            "libcuda.so.1 is not the emulated CUDA driver"
        vp, i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
        for lib, name, res, args in [
                (rt, "mgpuStreamCreate", vp, []),
                (rt, "mgpuStreamSynchronize", None, [vp]),
                (rt, "mgpuMemAlloc", vp, [ctypes.c_uint64, vp,
                                          ctypes.c_bool]),
                (rt, "mgpuMemcpy", None, [vp, vp, ctypes.c_size_t, vp]),
                (cu, "kpoolEmuStreamLaunches", ctypes.c_int, [vp, i64p]),
                (cu, "kpoolEmuModuleLoads", ctypes.c_int, [i64p, i64p,
                                                           i64p]),
                (cu, "kpoolEmuLaunches", ctypes.c_int, [i64p, i64p, i64p]),
                (cu, "kpoolEmuKernelLaunches", ctypes.c_int,
                 [ctypes.c_char_p, i64p]),
                (cu, "cuStreamBeginCapture_v2", ctypes.c_int,
                 [vp, ctypes.c_int]),
                (cu, "cuStreamEndCapture", ctypes.c_int,
                 [vp, ctypes.POINTER(vp)]),
                (cu, "cuGraphInstantiateWithFlags", ctypes.c_int,
                 [ctypes.POINTER(vp), vp, ctypes.c_ulonglong]),
                (cu, "cuGraphGetNodes", ctypes.c_int,
                 [vp, vp, ctypes.POINTER(ctypes.c_size_t)]),
                (cu, "cuGraphLaunch", ctypes.c_int, [vp, vp])]:
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        self.rt, self.cu = rt, cu
        # The driver initialized and the primary context current in this
        # thread, as torch.cuda makes it (graphs need a current context).
        device, context = ctypes.c_int(), ctypes.c_void_p()
        assert cu.cuInit(0) == 0
        assert cu.cuDeviceGet(ctypes.byref(device), 0) == 0
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
        assert cu.cuCtxSetCurrent(context) == 0

    def stream(self):
        return self.rt.mgpuStreamCreate()

    @staticmethod
    def _count(fn, *args):
        n = ctypes.c_int64(-1)
        assert fn(*args, ctypes.byref(n)) == 0
        return n.value

    def stream_launches(self, stream):
        """Kernel launches executed on `stream` so far."""
        return self._count(self.cu.kpoolEmuStreamLaunches, stream)

    def launches_of(self, part):
        """Launches executed so far of kernels whose name contains
        `part` ("" for all)."""
        return self._count(self.cu.kpoolEmuKernelLaunches, part.encode())

    def launches(self):
        return self._count(lambda out: self.cu.kpoolEmuLaunches(out, None,
                                                                 None))

    def module_loads(self):
        return self._count(lambda out: self.cu.kpoolEmuModuleLoads(
            out, None, None))

    def capture(self, stream, calls):
        """Runs `calls()` under a stream capture; returns the instantiated
        graph and its number of kernel nodes."""
        graph, exec_ = ctypes.c_void_p(), ctypes.c_void_p()
        assert self.cu.cuStreamBeginCapture_v2(stream, 0) == 0  # global
        calls()
        assert self.cu.cuStreamEndCapture(stream, ctypes.byref(graph)) == 0
        assert self.cu.cuGraphInstantiateWithFlags(ctypes.byref(exec_),
                                                   graph, 0) == 0
        nodes = ctypes.c_size_t(0)
        assert self.cu.cuGraphGetNodes(graph, None, ctypes.byref(nodes)) == 0
        return exec_, nodes.value

    def replay(self, graph, stream):
        assert self.cu.cuGraphLaunch(graph, stream) == 0


class DeviceArray:
    """Device memory (kpool's CUDA layer) behind the CUDA array interface
    (v3), with a host copy: `upload` copies it there, `download` back, each
    in order on the stream."""

    def __init__(self, emu, host, stream):
        self.emu, self.stream = emu, stream
        self.host = np.ascontiguousarray(host)
        self.address = emu.rt.mgpuMemAlloc(max(self.host.nbytes, 1), None,
                                           False)
        self.shape, self.dtype = self.host.shape, self.host.dtype
        self.upload()
        self.__cuda_array_interface__ = {
            "shape": self.host.shape, "typestr": self.host.dtype.str,
            "data": (self.address, False), "strides": None, "version": 3}

    def upload(self):
        self.emu.rt.mgpuMemcpy(self.address, self.host.ctypes.data,
                               self.host.nbytes, self.stream)
        self.emu.rt.mgpuStreamSynchronize(self.stream)

    def download(self):
        out = np.empty_like(self.host)
        self.emu.rt.mgpuMemcpy(out.ctypes.data, self.address, out.nbytes,
                               self.stream)
        self.emu.rt.mgpuStreamSynchronize(self.stream)
        return out


@pytest.fixture(scope="module")
def emu():
    kpool._capi.load()
    return Emu()


def max_ulps(got, want, etype):
    return int(kpool.ulp_distance(got, want, etype).max(initial=0))


def compress_operands(etype, dim, pool, seed=0):
    """Host operands of one compress call: two requests of 9 and 14 tokens
    (cached 0 and 5), positive keys so that ulps of the result mean
    something."""
    rng = np.random.default_rng(seed + dim * 7 + pool)
    rows = 23
    iro = np.array([0, 9, rows], np.uint32)
    cache = np.array([0, 5], np.uint32)
    return {
        "k": kpool.from_f32(rng.uniform(0.25, 2, (rows, dim)).astype(
            np.float32), etype),
        "gate": kpool.from_f32((rng.standard_normal((rows, dim)) * 4).astype(
            np.float32), etype),
        "ape": (rng.standard_normal((pool, dim)) * 2).astype(np.float32),
        "iro": iro, "cache": cache,
        "pro": kpool.pool_offsets(iro, cache, pool).astype(np.uint32)}


def check_compress(emu, ks, etype, dim, pool, kernel):
    """compress on `ks` (CUDA) against the CPU kernel set."""
    host = compress_operands(etype, dim, pool)
    expected = kpool.KernelSet(etype, dim, pool).compress(
        host["k"], host["gate"], host["ape"], host["iro"], host["pro"],
        host["cache"])
    stream = emu.stream()
    ks.prepare(stream)
    d = {n: DeviceArray(emu, a, stream) for n, a in host.items()}
    d["out"] = DeviceArray(emu, np.zeros_like(expected), stream)
    launches, of_kernel = emu.stream_launches(stream), emu.launches_of(kernel)
    got = ks.compress(d["k"], d["gate"], d["ape"], d["iro"], d["pro"],
                      d["cache"], out=d["out"], stream=stream)
    assert got is d["out"]                    # the caller's object
    pooled = d["out"].download()
    assert emu.stream_launches(stream) > launches
    assert emu.launches_of(kernel) > of_kernel
    assert expected.shape[0] > 0
    assert max_ulps(pooled, expected, etype) <= 4


def test_default_pack_set(emu):
    """bf16, head_dim 128, kpool 4 comes from the default pack: nothing is
    compiled; its modules load in prepare, none after; compress runs on the
    caller's stream and computes what the CPU set does."""
    before = kpool.cache.statistics()
    ks = kpool.KernelSet("bf16", D, K, target="cuda")
    after = kpool.cache.statistics()
    assert after.compiled == before.compiled and after.hits == before.hits
    loads = emu.module_loads()
    ks.prepare(emu.stream())
    assert emu.module_loads() > loads
    loads = emu.module_loads()
    check_compress(emu, ks, "bf16", D, K, "kpool_bf16_d128_k4_cuda_compress")
    assert emu.module_loads() == loads


def test_jit_set(emu):
    """A configuration in no pack is compiled by the JIT in this process
    (or read from its disk cache), and its kernels compute."""
    before = kpool.cache.statistics()
    ks = kpool.KernelSet("f16", 64, 2, target="cuda")
    after = kpool.cache.statistics()
    assert (after.compiled - before.compiled) + (after.hits - before.hits) == 1
    check_compress(emu, ks, "f16", 64, 2, "kpool_f16_d64_k2_cuda_compress")


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


def test_docs_decode_loop(emu):
    """docs/python.md's decode loop under CUDA-graph capture: the same
    sizes, calls and order, with the emulated driver's streams and graphs
    standing in for torch.cuda's. A captured step runs nothing; each replay
    runs the graph's kernels, with k, gate and the cache lengths rewritten
    in place between replays; every replay's outputs and the ring equal the
    CPU kernel set's step on the same inputs (closed rows within 4 ulps);
    the status word stays 0."""
    SLOTS, B = 64, 8
    T = B
    rng = np.random.default_rng(5)
    ks = kpool.KernelSet("bf16", D, K, target="cuda")
    cpu = kpool.KernelSet("bf16", D, K)
    stream = emu.stream()
    host = {
        "ape": (rng.standard_normal((K, D)) * 2).astype(np.float32),
        "tail": np.zeros((SLOTS, 2, K, D), np.uint16),
        "k": np.zeros((T, D), np.uint16), "gate": np.zeros((T, D), np.uint16),
        "iro": np.arange(B + 1, dtype=np.int32),
        "cache": np.zeros(B, np.int32),
        "slots": np.arange(B, dtype=np.int32),
        "pooled": np.zeros((T // K + B, D), np.uint16),
        "closed": np.zeros((B, D), np.uint16),
        "closed_pool": np.zeros(B, np.int32),
        "pro": np.zeros(B + 1, np.int32),
        "status": np.zeros(1, np.int64)}
    v = {n: DeviceArray(emu, a, stream) for n, a in host.items()}
    ks.prepare(stream)  # loads the GPU modules; never during capture
    launched = emu.launches()
    graph, nodes = emu.capture(stream, lambda: ks.step(
        v["tail"], v["k"], v["gate"], v["ape"], v["iro"], v["cache"],
        v["slots"], pooled=v["pooled"], closed=v["closed"],
        closed_pool=v["closed_pool"], pool_row_offsets=v["pro"],
        stream=stream, status=v["status"]))
    assert emu.launches() == launched
    assert nodes >= 1
    tail = host["tail"].copy()
    steps = 2 * K + 1        # every request closes two pools
    for n in range(steps):
        k = kpool.from_f32(rng.uniform(0.25, 2, (T, D)).astype(np.float32),
                           "bf16")
        gate = kpool.from_f32(rng.standard_normal((T, D)).astype(np.float32),
                              "bf16")
        v["k"].host[:], v["gate"].host[:] = k, gate     # in place
        v["k"].upload()
        v["gate"].upload()
        before = emu.launches_of("")
        emu.replay(graph, stream)
        closed, closed_pool, pro, pooled = cpu.step(
            tail, k, gate, host["ape"], host["iro"], v["cache"].host,
            host["slots"])
        assert max_ulps(v["closed"].download(), closed, "bf16") <= 4, n
        assert (v["closed_pool"].download() == closed_pool).all(), n
        assert (v["pro"].download() == pro).all(), n
        assert (v["tail"].download() == tail).all(), n
        assert emu.launches_of("") - before == nodes
        if n % K == K - 1:
            assert (closed_pool >= 0).all(), n   # every request closed one
        v["cache"].host[:] += 1                  # every request grew by one
        v["cache"].upload()
    word = int(v["status"].download()[0])
    assert word == 0, kpool.status_error(word)


@pytest.mark.parametrize("case", ["pack", "jit"])
def test_torch_cuda_implementation(emu, monkeypatch, case):
    """kpool.torch's CUDA implementations (the functions registered for
    the CUDA dispatch key) with stand-ins for CUDA tensors: device arrays
    with a torch dtype, and torch.cuda.current_stream giving the test's
    stream (Debian's torch has no CUDA). bf16, head_dim 128, kpool 4 comes
    from the default pack; f16, 64, 2 from the JIT. compress and seed_tail
    compute what the CPU kernel set does."""
    torch = pytest.importorskip("torch", reason="needs python3-torch")
    import kpool.torch as kt

    etype, dtype, dim, pool = {
        "pack": ("bf16", torch.bfloat16, 128, 4),
        "jit": ("f16", torch.float16, 64, 2)}[case]
    stream = emu.stream()

    class FakeTensor(DeviceArray):
        def __init__(self, host, dtype):
            super().__init__(emu, host, stream)
            self.dtype, self.is_cuda, self.device = dtype, True, "cuda:0"

    class Stream:
        cuda_stream = stream

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None:
                        Stream())
    host = compress_operands(etype, dim, pool, seed=1)
    cpu = kpool.KernelSet(etype, dim, pool)
    rows = host["k"].shape[0]
    t = {n: FakeTensor(a, torch.float32 if n == "ape" else dtype
                       if n in ("k", "gate") else torch.int32)
         for n, a in host.items()}
    pooled = FakeTensor(np.zeros((rows // pool + 2, dim), host["k"].dtype),
                        dtype)
    name = f"kpool_{etype}_d{dim}_k{pool}_cuda"
    before = emu.stream_launches(stream)
    kt.implementations[("compress", "CUDA")](
        t["k"], t["gate"], t["ape"], t["iro"], t["pro"], t["cache"],
        pooled=pooled)
    expected = cpu.compress(host["k"], host["gate"], host["ape"], host["iro"],
                            host["pro"], host["cache"])
    got = pooled.download()[:expected.shape[0]]
    assert emu.stream_launches(stream) > before
    assert max_ulps(got, expected, etype) <= 4
    ring = np.zeros((4, 2, pool, dim), host["k"].dtype)
    tail = FakeTensor(ring, dtype)
    slots = FakeTensor(np.array([2, 0], np.int32), torch.int32)
    before = emu.launches_of(name + "_seed_tail")
    kt.implementations[("seed_tail", "CUDA")](
        tail, t["k"], t["gate"], t["iro"], t["cache"], slots)
    got = tail.download()          # waits for the stream: the launch ran
    assert emu.launches_of(name + "_seed_tail") > before
    cpu.seed_tail(ring, host["k"], host["gate"], host["iro"], host["cache"],
                  slots.host)
    assert (got == ring).all()
