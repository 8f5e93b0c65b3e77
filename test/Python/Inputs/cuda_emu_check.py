"""CUDA kernel sets computing, under the PTX-executing emulated driver
(cuda-emu-executed.test; gated by the lit feature cuda-emu).

Device memory, copies and streams come from libkpool_cuda_runtime (mgpu*,
what kpool's own CUDA layer calls on the driver), graphs from the driver
(libcuda.so.1, the emulated one first in LD_LIBRARY_PATH). Each CUDA kernel
set -- the default pack's bf16 set and a set the JIT compiles -- runs
compress and a captured, replayed decode step; the outputs are compared with
the same configuration's CPU kernel set (within the contract's tolerance:
the GPU's exp is libdevice's, the CPU's kpool's own).
"""

import ctypes
import sys

import numpy as np

import kpool
from kpool import _capi


def runtime():
    _capi.load()
    lib = ctypes.CDLL("libkpool_cuda_runtime.so")
    vp = ctypes.c_void_p
    for name, res, args in [("mgpuStreamCreate", vp, []),
                            ("mgpuStreamSynchronize", None, [vp]),
                            ("mgpuMemAlloc", vp, [ctypes.c_uint64, vp,
                                                  ctypes.c_bool]),
                            ("mgpuMemcpy", None, [vp, vp, ctypes.c_size_t,
                                                  vp])]:
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


def driver():
    cu = ctypes.CDLL("libcuda.so.1")

    def fn(*names):
        for n in names:
            if hasattr(cu, n):
                return getattr(cu, n)
        raise RuntimeError(f"the driver has none of {names}")

    return {"begin": fn("cuStreamBeginCapture_v2", "cuStreamBeginCapture"),
            "end": fn("cuStreamEndCapture"),
            "instantiate": fn("cuGraphInstantiateWithFlags",
                              "cuGraphInstantiate"),
            "launch": fn("cuGraphLaunch")}


class Device:
    """A device copy of a host array, behind the CUDA array interface."""

    def __init__(self, rt, host, stream):
        self.rt, self.stream = rt, stream
        self.host = np.ascontiguousarray(host)
        self.address = rt.mgpuMemAlloc(max(self.host.nbytes, 1), None, False)
        self.upload()
        self.__cuda_array_interface__ = {
            "shape": self.host.shape, "typestr": self.host.dtype.str,
            "data": (self.address, False), "strides": None, "version": 3}

    def upload(self):
        self.rt.mgpuMemcpy(self.address, self.host.ctypes.data,
                           self.host.nbytes, self.stream)
        self.rt.mgpuStreamSynchronize(self.stream)

    def download(self):
        out = np.empty_like(self.host)
        self.rt.mgpuMemcpy(out.ctypes.data, self.address, out.nbytes,
                           self.stream)
        self.rt.mgpuStreamSynchronize(self.stream)
        return out


def within(gpu, cpu, etype, what, limit=4):
    ulps = int(kpool.ulp_distance(gpu, cpu, etype).max(initial=0))
    ok = ulps <= limit
    print(f"{what}: {'ok' if ok else 'FAIL'} (max {ulps} ulps)")
    return ok


def compress_case(rt, dtype, dim, pool, stream):
    rng = np.random.default_rng(dim * 7 + pool)
    etype = dtype
    rows, iro, cache = 23, np.array([0, 9, 23], np.uint32), \
        np.array([0, 5], np.uint32)
    k = kpool.from_f32(rng.uniform(0.25, 2, (rows, dim)).astype(np.float32),
                       etype)
    gate = kpool.from_f32((rng.standard_normal((rows, dim)) * 4).astype(
        np.float32), etype)
    ape = (rng.standard_normal((pool, dim)) * 2).astype(np.float32)
    cpu = kpool.KernelSet(dtype, dim, pool)
    pro = kpool.pool_offsets(iro, cache, pool).astype(np.uint32)
    expected = cpu.compress(k, gate, ape, iro, pro, cache)
    gpu = kpool.KernelSet(dtype, dim, pool, target="cuda")
    gpu.prepare(stream)
    d = {n: Device(rt, a, stream) for n, a in
         [("k", k), ("gate", gate), ("ape", ape), ("iro", iro),
          ("pro", pro), ("cache", cache),
          ("out", np.zeros_like(expected))]}
    gpu.compress(d["k"], d["gate"], d["ape"], d["iro"], d["pro"], d["cache"],
                 out=d["out"], stream=stream)
    return within(d["out"].download(), expected, etype,
                  f"compress {dtype} d{dim} k{pool}")


def decode_case(rt, cu, stream):
    """docs/python.md's decode loop: a step captured once, replayed per
    token with the inputs rewritten in place; the CPU runs the same steps."""
    B, SLOTS, T, D, K = 4, 8, 4, 128, 4
    rng = np.random.default_rng(5)
    gpu = kpool.KernelSet("bf16", D, K, target="cuda")
    cpu = kpool.KernelSet("bf16", D, K)
    ape = (rng.standard_normal((K, D)) * 2).astype(np.float32)
    host = {
        "tail": np.zeros((SLOTS, 2, K, D), np.uint16),
        "k": np.zeros((T, D), np.uint16), "gate": np.zeros((T, D), np.uint16),
        "iro": np.arange(B + 1, dtype=np.uint32),
        "cache": np.zeros(B, np.uint32),
        "slots": np.arange(B, dtype=np.uint32),
        "pooled": np.zeros((T // K + B, D), np.uint16),
        "closed": np.zeros((B, D), np.uint16),
        "closed_pool": np.zeros(B, np.int32),
        "pro": np.zeros(B + 1, np.uint32),
        "status": np.zeros(1, np.uint64), "ape": ape}
    d = {n: Device(rt, a, stream) for n, a in host.items()}
    gpu.prepare(stream)
    graph, exec_ = ctypes.c_void_p(), ctypes.c_void_p()
    if cu["begin"](ctypes.c_void_p(stream), 0) != 0:
        print("decode: FAIL (cuStreamBeginCapture)")
        return False
    gpu.step(d["tail"], d["k"], d["gate"], d["ape"], d["iro"], d["cache"],
             d["slots"], pooled=d["pooled"], closed=d["closed"],
             closed_pool=d["closed_pool"], pool_row_offsets=d["pro"],
             stream=stream, status=d["status"])
    if cu["end"](ctypes.c_void_p(stream), ctypes.byref(graph)) != 0 or \
            cu["instantiate"](ctypes.byref(exec_), graph, 0) != 0:
        print("decode: FAIL (capture)")
        return False
    tail = host["tail"].copy()
    ok = True
    for n in range(6):
        k = kpool.from_f32(rng.uniform(0.25, 2, (T, D)).astype(np.float32),
                           "bf16")
        gate = kpool.from_f32(rng.standard_normal((T, D)).astype(np.float32),
                              "bf16")
        d["k"].host[:], d["gate"].host[:] = k, gate
        d["k"].upload()
        d["gate"].upload()
        cache = np.full(B, n, np.uint32)
        d["cache"].host[:] = cache
        d["cache"].upload()
        cu["launch"](exec_, ctypes.c_void_p(stream))
        closed, closed_pool, pro, pooled = cpu.step(
            tail, k, gate, ape, host["iro"], cache, host["slots"])
        ok &= within(d["closed"].download(), closed, "bf16",
                     f"decode step {n}: closed")
        ok &= bool((d["closed_pool"].download() == closed_pool).all())
    word = int(d["status"].download()[0])
    print(f"decode: status word {word:#x}")
    return ok and word == 0


def main():
    rt = runtime()
    cu = driver()
    stream = rt.mgpuStreamCreate()
    ok = compress_case(rt, "bf16", 128, 4, stream)     # the default pack
    ok &= compress_case(rt, "f16", 64, 2, stream)      # the JIT
    ok &= decode_case(rt, cu, stream)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
