"""Device arrays on a CUDA kernel set, with fake arrays and a fake library.

No GPU here, and no CUDA kernel set can be created without kpool-aot's
registered kernels: these tests build a KernelSet of target "cuda" around
a recording stand-in of the C library, and give it fake device arrays
(numpy memory behind ``__cuda_array_interface__``, or a DLPack capsule
whose device says CUDA). They check what the Python layer hands the C API
(the views' pointers, sizes and strides, the stream, validate) and the
errors it raises first; nothing runs on a GPU.
"""

import numpy as np
import pytest

import kpool
from kpool import _capi, interop

D = 8
K = 4


class CAI:
    """A fake device array: `array`'s memory behind a
    __cuda_array_interface__ (v3) dict; strides in bytes, None when the
    array is row-major (as producers write them)."""

    def __init__(self, array, *, readonly=False, stream=None, strides=True,
                 typestr=None, version=3):
        self.array = array
        iface = {"shape": array.shape,
                 "typestr": typestr or array.dtype.str,
                 "data": (array.ctypes.data, readonly),
                 "version": version}
        if strides:
            iface["strides"] = (None if array.flags.c_contiguous
                                else array.strides)
        if stream is not None:
            iface["stream"] = stream
        self.__cuda_array_interface__ = iface


class DLPackCUDA:
    """A fake DLPack array on CUDA device `device_id`: numpy's own capsule
    of `array` with its device (and, with `bf16`, its uint16 dtype as
    kDLBfloat) rewritten. Records the streams __dlpack__ is asked for."""

    def __init__(self, array, device_id=0, bf16=False, device_type=2):
        self.array, self.device_id, self.bf16 = array, device_id, bf16
        self.device_type = device_type
        self.streams = []

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        capsule = self.array.__dlpack__()
        t = interop._DLTensor.from_address(
            interop._capsule_pointer(capsule, b"dltensor"))
        t.device.device_type = self.device_type
        t.device.device_id = self.device_id
        if self.bf16:
            t.dtype.code = 4
        return capsule


class FakeLib:
    """Records the kernel calls a KernelSet makes (kpoolCall on an argument
    struct): (kernel's C function, operands by ABI name -- views as
    (address, sizes, strides), scalars --, the status word, the stream and
    the validation by name)."""

    def __init__(self):
        self.calls = []

    def kpoolCall(self, handle, kernel_id, args, size, options):
        kernel = next(k for k in _capi.kernels().values()
                      if k.id == kernel_id)
        assert size == kernel.args_size
        named = {}
        for o in kernel.operands:
            if o.role == "scalar":
                named[o.name] = int.from_bytes(
                    bytes(args)[o.offset:o.offset + 4], "little", signed=True)
            elif o.role != "context":
                v = _capi.View.from_buffer_copy(bytes(args), o.offset)
                r = v.rank
                named[o.name] = (v.data or 0, tuple(v.sizes[:r]),
                                 tuple(v.strides[:r]))
        o = options._obj
        named["status"], named["stream"] = o.status, o.stream
        names = {v: n for n, v in
                 _capi.enum(_capi.ENUM_VALIDATION).items()}
        named["validation"] = names[o.validation]
        self.calls.append((kernel.capi_function, named))
        return None

    def operands(self, index=-1):
        """The last call's operands by ABI name."""
        return self.calls[index][1]


def cuda_set(dtype="f32", cache=None):
    """A KernelSet of target "cuda" over a FakeLib (no GPU, no kernels)."""
    _capi.load()  # the ABI table comes from the real library
    ks = object.__new__(kpool.KernelSet)
    ks.element_type = kpool.element_type(dtype)
    ks.dtype = kpool.DTYPES[ks.element_type]
    ks.head_dim, ks.kpool = D, K
    ks.openmp, ks.vector_size, ks.target = False, 0, "cuda"
    ks.cache, ks.rotate, ks.scale = cache, "none", "absmax"
    ks._lib, ks._handle = FakeLib(), None
    return ks


def addr(a):
    return a.ctypes.data


def compress_operands(etype_dtype=np.float32, rows=9, batch=2):
    k = np.zeros((rows, D), etype_dtype)
    gate = np.zeros((rows, D), etype_dtype)
    ape = np.zeros((K, D), np.float32)
    iro = np.array([0, 5, rows], np.uint32)
    pro = np.zeros(batch + 1, np.int32)
    cache = np.zeros(batch, np.uint32)
    out = np.zeros((rows // K + batch, D), etype_dtype)
    return k, gate, ape, iro, pro, cache, out


def test_cuda_array_interface_views():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    wide = np.zeros((9, 3 * D), np.float32)
    k = wide[:, ::3]                       # byte strides (3 * D * 4, 12)
    ape_t = np.zeros((D, K), np.float32).T  # column-major
    args = [CAI(a) for a in (k, gate, ape_t, iro, pro, cache)]
    result = CAI(out)
    got = ks.compress(*args, out=result, validate=False)
    assert got is result                   # the caller's object comes back
    ops = ks._lib.operands()
    assert ops["k"] == (addr(wide), (9, D), (3 * D, 3))
    assert ops["gate"] == (addr(gate), (9, D), (D, 1))
    assert ops["ape"] == (addr(ape_t), (K, D), (1, K))
    assert ops["pooled"] == (addr(out), out.shape, (D, 1))
    # int32 metadata is passed as it is (its values are never read).
    assert ops["pool_row_offsets"] == (addr(pro), (3,), (1,))
    assert ops["input_row_offsets"] == (addr(iro), (3,), (1,))
    assert ops["stream"] is None and ops["validation"] == "trust"


def test_strides_absent_and_row_major():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    ks.compress(CAI(k, strides=False), CAI(gate), CAI(ape), CAI(iro),
                CAI(pro), CAI(cache), out=CAI(out), validate=False)
    assert ks._lib.operands()["k"] == (addr(k), (9, D), (D, 1))


def test_read_only_inputs_pass_read_only_outputs_fail():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    ins = [CAI(a, readonly=True) for a in (k, gate, ape, iro, pro, cache)]
    ks.compress(*ins, out=CAI(out), validate=False)
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'pooled' is written but the array "
                             r"is read-only$"):
        ks.compress(*ins, out=CAI(out, readonly=True), validate=False)


@pytest.mark.parametrize("typestr,error,match", [
    ("<c8", kpool.KPoolError, r"typestr '<c8' is no integer or float type"),
    ("zz", kpool.KPoolError, r"typestr 'zz' is not an array-interface"),
    (">f4", TypeError, r"'k' must have dtype float32, got >f4"),
    ("<f2", TypeError, r"'k' must have dtype float32, got float16"),
])
def test_bad_typestr(typestr, error, match):
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    with pytest.raises(error, match=match):
        ks.compress(CAI(k, typestr=typestr), CAI(gate), CAI(ape), CAI(iro),
                    CAI(pro), CAI(cache), out=CAI(out), validate=False)
    assert not ks._lib.calls


def test_bad_rank_strides_and_interfaces():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    rest = [CAI(a) for a in (gate, ape, iro, pro, cache)]

    def call(k_arg):
        ks.compress(k_arg, *rest, out=CAI(out), validate=False)

    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'k' must have rank 2, got shape "
                             r"\[9, 8, 1\]$"):
        call(CAI(k.reshape(9, D, 1)))
    odd = CAI(k)
    odd.__cuda_array_interface__["strides"] = (4 * D + 2, 4)
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'k' has a stride of 34 bytes in "
                             r"dimension 0, not a whole number of 4-byte"):
        call(odd)
    short = CAI(k)
    short.__cuda_array_interface__["strides"] = (4,)
    with pytest.raises(kpool.KPoolError, match=r"has 1 strides for shape"):
        call(short)
    null = CAI(k)
    null.__cuda_array_interface__["data"] = (0, False)
    with pytest.raises(kpool.KPoolError, match=r"NULL data pointer"):
        call(null)
    masked = CAI(k)
    masked.__cuda_array_interface__["mask"] = object()
    with pytest.raises(kpool.KPoolError, match=r"has a mask"):
        call(masked)
    broken = CAI(k)
    del broken.__cuda_array_interface__["typestr"]
    with pytest.raises(kpool.KPoolError, match=r"lacks a valid shape"):
        call(broken)
    misaligned = CAI(k)
    misaligned.__cuda_array_interface__["data"] = (addr(k) + 2, False)
    with pytest.raises(kpool.KPoolError, match=r"not aligned"):
        call(misaligned)
    # Device metadata must be 32-bit integers (converting would read it).
    with pytest.raises(TypeError, match=r"'cache_lengths' must have dtype "
                                        r"uint32 or int32, got int64"):
        ks.compress(CAI(k), CAI(gate), CAI(ape), CAI(iro), CAI(pro),
                    CAI(cache.astype(np.int64)), out=CAI(out),
                    validate=False)
    assert not ks._lib.calls


def test_stream_rule():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()

    def run(stream=None, **streams):
        arrays = dict(k=k, gate=gate, ape=ape, input_row_offsets=iro,
                      pool_row_offsets=pro, cache_lengths=cache)
        wrapped = {n: CAI(a, stream=streams.get(n))
                   for n, a in arrays.items()}
        kw = {} if stream is None else {"stream": stream}
        ks.compress(**wrapped, out=CAI(out, stream=streams.get("out")),
                    validate=False, **kw)
        return ks._lib.operands()["stream"]

    assert run() is None                       # the legacy default stream
    assert run(k=0x5000, out=0x5000) == 0x5000  # the producer's stream
    assert run(k=1) is None                    # 1: the legacy default stream
    assert run(k=2) == 2                       # the per-thread one
    assert run(stream=0x7000, k=0x5000) == 0x7000   # explicit wins

    class TorchStream:
        cuda_stream = 0x8000
    assert run(stream=TorchStream(), gate=0x5000) == 0x8000
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'k' and 'pooled' come from different "
                             r"streams \(0x5000 and 0x6000"):
        run(k=0x5000, out=0x6000)
    with pytest.raises(kpool.KPoolError, match=r"stream 0 is not a stream"):
        run(gate=0)
    assert interop.call_stream("op", None, [("a", None), ("b", 0x10)]) == 0x10


def test_dlpack_cuda_arrays_and_their_stream():
    ks = cuda_set("bf16")
    k, gate, ape, iro, pro, cache, out = compress_operands(np.uint16)
    wide = np.zeros((9, 2 * D), np.uint16)
    k_view = wide[:, 1::2]
    dl = {n: DLPackCUDA(a, bf16=n in ("k", "gate", "out"))
          for n, a in dict(k=k_view, gate=gate, ape=ape, iro=iro,
                           pro=pro.view(np.uint32), cache=cache,
                           out=out).items()}
    got = ks.compress(dl["k"], dl["gate"], dl["ape"], dl["iro"], dl["pro"],
                      dl["cache"], out=dl["out"], validate=False)
    assert got is dl["out"]
    ops = ks._lib.operands()
    # bfloat16 arrives as its uint16 bit patterns; DLPack strides count
    # elements already.
    assert ops["k"] == (addr(wide) + 2, (9, D), (2 * D, 2))
    assert ops["pooled"] == (addr(out), out.shape, (D, 1))
    assert ops["stream"] is None
    # Exported for the call's stream: 1 (the legacy default stream) ...
    assert {s for d in dl.values() for s in d.streams} == {1}
    # ... or the one given, or the one a __cuda_array_interface__ names.
    ks.compress(dl["k"], dl["gate"], dl["ape"], dl["iro"], dl["pro"],
                dl["cache"], out=dl["out"], validate=False, stream=0x9000)
    assert dl["k"].streams[-1] == 0x9000
    ks.compress(dl["k"], dl["gate"], CAI(ape, stream=0xA000), dl["iro"],
                dl["pro"], dl["cache"], out=dl["out"], validate=False)
    assert dl["k"].streams[-1] == 0xA000
    assert ks._lib.operands()["stream"] == 0xA000
    # bf16 DLPack on an f32 set is a dtype error.
    with pytest.raises(TypeError, match=r"'pooled' must have dtype float32, "
                                        r"got uint16"):
        cuda_set("f32").compress(dl["k"], dl["gate"], dl["ape"], dl["iro"],
                                 dl["pro"], dl["cache"], out=dl["out"],
                                 validate=False)


def test_dlpack_devices_that_are_not_cuda():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    rest = [DLPackCUDA(a) for a in (gate, ape, iro, pro, cache)]
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'k' \(DLPackCUDA\) lives on the CPU "
                             r"\(1, 0\); a CUDA kernel set takes CUDA "
                             r"device arrays"):
        ks.compress(DLPackCUDA(k, device_type=1), *rest,
                    out=DLPackCUDA(out), validate=False)
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'k' is on CUDA device 0 and 'pooled' "
                             r"on device 1"):
        ks.compress(DLPackCUDA(k), *rest, out=DLPackCUDA(out, device_id=1),
                    validate=False)
    # Managed memory (kDLCUDAManaged) is device memory too.
    ks.compress(DLPackCUDA(k, device_type=13), *rest, out=DLPackCUDA(out),
                validate=False)
    assert len(ks._lib.calls) == 1


def test_host_arrays_on_a_cuda_set():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    rest = [CAI(a) for a in (gate, ape, iro, pro, cache)]
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'k' is a host array "
                             r"\(numpy.ndarray\); a CUDA kernel set takes "
                             r"device arrays"):
        ks.compress(k, *rest, out=CAI(out), validate=False)
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: 'cache_lengths' is a host array"):
        ks.compress(CAI(k), *rest[:4], [0, 0], out=CAI(out), validate=False)
    assert not ks._lib.calls


def test_outputs_are_the_callers():
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    dev = {n: CAI(a) for n, a in dict(k=k, gate=gate, ape=ape, iro=iro,
                                      pro=pro, cache=cache).items()}

    def fails(pattern, fn, *args, **kwargs):
        with pytest.raises(kpool.KPoolError, match=pattern):
            fn(*args, validate=False, **kwargs)

    fails(r"^compress: on a CUDA kernel set the caller gives the outputs: "
          r"pass 'pooled' \(\[rows, head_dim\]", ks.compress, dev["k"],
          dev["gate"], dev["ape"], dev["iro"], dev["pro"], dev["cache"])
    fails(r"^compress: .* pass 'pool_row_offsets'", ks.compress, dev["k"],
          dev["gate"], dev["ape"], dev["iro"], None, dev["cache"],
          out=CAI(out))
    fails(r"^pool_offsets: .* pass 'pool_row_offsets'", ks.pool_offsets,
          dev["iro"],
          dev["cache"])
    tail = CAI(np.zeros((4, 2, K, D), np.float32))
    slots = CAI(np.array([1, 3], np.uint32))
    ring = (tail, dev["k"], dev["gate"], dev["ape"], dev["iro"],
            dev["cache"], slots)
    pooled = CAI(np.zeros((2, D), np.float32))
    closed_pool = CAI(np.zeros(2, np.int32))
    fails(r"^ring_close: .* pass 'pooled' \(\[B, head_dim\]", ks.ring_close,
          *ring, closed_pool=closed_pool)
    fails(r"^ring_close: .* pass 'closed_pool' \(\[B\] int32",
          ks.ring_close, *ring, pooled=pooled)
    capacity = CAI(out)
    outs = dict(pooled=capacity, closed=pooled, closed_pool=closed_pool,
                pool_row_offsets=dev["pro"])
    for missing in outs:
        given = {n: v for n, v in outs.items() if n != missing}
        fails(rf"^step: .* pass '{missing}'", ks.step, *ring, **given)
    assert not ks._lib.calls
    got = ks.step(*ring, **outs, validate=False, stream=0x42)
    assert got == (pooled, closed_pool, dev["pro"], capacity)
    ops = ks._lib.operands()
    assert ops["tail"][1:] == ((4, 2, K, D), (2 * K * D, K * D, D, 1))
    assert ops["num_requests"] == 2 and ops["stream"] == 0x42
    assert ks.ring_close(*ring, pooled=pooled, closed_pool=closed_pool,
                         validate=False) == (pooled, closed_pool)
    assert ks.seed_tail(*ring[:3], *ring[4:], 1, validate=False) is tail
    assert ks._lib.operands()["num_requests"] == 1
    assert ks.pool_offsets(dev["iro"], dev["cache"], out=dev["pro"],
                           validate=False) is dev["pro"]
    # The default is the library's Auto (on a CUDA set: no metadata
    # checks, the metadata is device memory); validate=True is passed on as
    # Check, and the library refuses it.
    ks.pool_offsets(dev["iro"], dev["cache"], out=dev["pro"])
    assert ks._lib.operands()["validation"] == "auto"
    ks.pool_offsets(dev["iro"], dev["cache"], out=dev["pro"], validate=True)
    assert ks._lib.operands()["validation"] == "check"


def test_pool_cache_operands_on_the_device():
    ks = cuda_set("bf16", cache="fp8")
    k, gate, ape, iro, pro, cache, out = compress_operands(np.uint16)
    table = np.full((2, 3), -1, np.int32)
    keys = np.zeros((5, 4, D), np.uint8)
    scales = np.zeros((5, 4), np.float32)
    dev = [CAI(a) for a in (k, gate, ape, iro, pro, cache)]
    ks.compress(*dev, out=CAI(out), block_table=CAI(table),
                cache_keys=CAI(keys), cache_scales=CAI(scales),
                validate=False)
    name, _ = ks._lib.calls[-1]
    assert name == "kpoolCompressCache"
    ops = ks._lib.operands()
    assert ops["block_table"] == (addr(table), (2, 3), (3, 1))
    assert ops["cache_keys"][0] == addr(keys)
    with pytest.raises(kpool.KPoolError, match=r"'block_table' must have "
                                               r"rank 2, got shape \[6\]"):
        ks.compress(*dev, out=CAI(out), block_table=CAI(table.reshape(6)),
                    cache_keys=CAI(keys), cache_scales=CAI(scales),
                    validate=False)


def test_a_cpu_set_refuses_device_arrays(rng):
    k, gate, ape, iro, pro, cache, out = compress_operands()
    for device in (CAI(k), DLPackCUDA(k)):
        with pytest.raises(kpool.KPoolError,
                           match=r"^compress: an operand of type \w+ lives on "
                                 r"(device memory|DLPack device \(2, 0\))"
                                 r".*KernelSet\(target='cuda'\)"):
            kpool.compress(device, gate, ape, iro, None, cache)
    # A CAI object that is host memory on the CPU is still refused: the
    # interface says device memory.
    ks = kpool.kernel_set("f32", D, K)
    with pytest.raises(kpool.KPoolError, match=r"__cuda_array_interface__"):
        ks.compress(k, gate, ape, iro, None, cache, out=CAI(out))


def test_dlpack_stream_argument_is_never_zero():
    """DLPack disallows stream 0: the legacy default stream is 1."""
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    dl = [DLPackCUDA(a) for a in (k, gate, ape, iro, pro, cache, out)]
    ks.compress(*dl[:6], out=dl[6], validate=False, stream=0)
    assert {s for d in dl for s in d.streams} == {1}


def test_dlpack_when_the_cuda_interface_refuses():
    """PyTorch has no __cuda_array_interface__ typestr for bfloat16 (its
    property raises KeyError): such an array goes through DLPack."""
    class TorchLikeBF16(DLPackCUDA):
        @property
        def __cuda_array_interface__(self):
            raise KeyError("torch.bfloat16")

    ks = cuda_set("bf16")
    k, gate, ape, iro, pro, cache, out = compress_operands(np.uint16)
    k_dev = TorchLikeBF16(k, bf16=True)
    ks.compress(k_dev, *[CAI(a) for a in (gate, ape, iro, pro, cache)],
                out=CAI(out), validate=False, stream=0x77)
    assert k_dev.streams == [0x77]
    assert ks._lib.operands()["k"] == (addr(k), (9, D), (D, 1))


def test_converted_arrays_describe_themselves():
    """What a CUDA method receives for a device array (a DLPack one too)
    still reads as a __cuda_array_interface__ (e.g. for a status word)."""
    a = np.zeros((3, 2 * D), np.uint16)[:, ::2]
    s = interop.dlpack_tensor("op", "x", a, DLPackCUDA(a).__dlpack__())
    assert s.__cuda_array_interface__ == {
        "shape": (3, D), "typestr": "<u2", "data": (addr(a), False),
        "version": 3, "strides": (4 * D, 4), "stream": None}
    assert s.device == (2, 0)


def test_status_word_on_the_device():
    # The status word is passed as its address (uint64_t * in the C API):
    # a device array of one 64-bit integer, 8-byte aligned and writable.
    ks = cuda_set()
    k, gate, ape, iro, pro, cache, out = compress_operands()
    args = [CAI(a) for a in (k, gate, ape, iro, pro, cache)]
    word = np.zeros(2, np.uint64)
    ks.compress(*args, out=CAI(out), validate=False, status=CAI(word))
    assert ks._lib.operands()["status"] == addr(word)
    ks.compress(*args, out=CAI(out), validate=False)
    assert ks._lib.operands()["status"] is None
    ks.compress(*args, out=CAI(out), validate=False, status=addr(word))
    assert ks._lib.operands()["status"] == addr(word)
    # (A misaligned word is the library's to refuse: test_status_word.py.)
    for bad, match in ((CAI(np.zeros(1, np.uint32)), "at least one uint64"),
                       (CAI(np.zeros(0, np.uint64)), "at least one uint64"),
                       (CAI(word, readonly=True), "writable"),
                       (np.zeros(1, np.uint64), "must be a device array"),
                       (True, "positive address"),
                       (-8, "positive address")):
        with pytest.raises(kpool.KPoolError, match=match):
            ks.compress(*args, out=CAI(out), validate=False, status=bad)
