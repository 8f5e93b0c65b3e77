"""The kpool kernels on numpy arrays, through libKPoolCAPI.so.

Every array operand may be any strided numpy view (slices, transposes, a
ring aliased into a larger page) as long as its strides are whole elements:
the view's strides are passed to the kernels in elements, nothing is copied.
Outputs are written in place (``out=``, ``tail``) or allocated and returned.
Metadata (offsets, cache lengths, slots) may be any integer arrays or lists;
uint32/int32 arrays are passed as they are, others are converted.

Errors: :class:`kpool.KPoolError` (a ``ValueError``) for bad shapes, strides
and metadata, with the runtime's message naming the op, the request and the
field; ``TypeError`` for arrays of the wrong dtype. A call that raises has
written nothing.
"""

import collections
import ctypes
import operator
import threading

import numpy as np

from . import _capi
from ._capi import KPoolError
from .types import DTYPES, element_type

__all__ = [
    "KernelSet",
    "PagedPoolStore",
    "PoolStore",
    "ProducedPool",
    "kernel_set",
    "compress",
    "seed_tail",
    "ring_close",
    "pool_offsets",
    "ring_holds_pending",
]

_ETYPE_CODES = {"bf16": _capi.BF16, "f16": _capi.F16, "f32": _capi.F32}
_TARGET_CODES = {"cpu": _capi.TARGET_CPU, "cuda": _capi.TARGET_CUDA}
_CACHE_CODES = {None: _capi.CACHE_NONE, "element": _capi.CACHE_ELEMENT,
                "fp8": _capi.CACHE_FP8}
_ROTATE_CODES = {"none": _capi.ROTATE_NONE,
                 "hadamard": _capi.ROTATE_HADAMARD}
_SCALE_CODES = {"absmax": _capi.SCALE_ABSMAX, "pow2": _capi.SCALE_POW2}


def _choice(op, name, value, codes):
    if value not in codes:
        raise KPoolError(f"{op}: {name} must be one of "
                         + ", ".join(repr(c) for c in codes)
                         + f", got {value!r}")
    return value

#: One pool a :meth:`PoolStore.step` produced: its request's ring ``slot``,
#: its ``pool`` id (absolute positions ``[pool*K, (pool+1)*K)``) and whether
#: ``ring_close`` closed it (``from_ring``) or ``compress`` built it.
ProducedPool = collections.namedtuple("ProducedPool", "slot pool from_ring")


_DLPACK_CPU = 1  # kDLCPU


def _host_array(op, x):
    """`x` as a numpy array without a copy when it is a host array of
    another library: anything with ``__dlpack__`` on the DLPack CPU device
    (numpy, PyTorch CPU tensors, ...). The alias is writable, as the
    producer's own array is (numpy's ``from_dlpack`` marks it read-only).
    Device arrays are refused with an error: the Python ops run on host
    memory. Anything else is returned as it is."""
    if isinstance(x, np.ndarray) or not (
            hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")):
        return x
    device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else None
    if hasattr(x, "__cuda_array_interface__") or (
            device is not None and int(device[0]) != _DLPACK_CPU):
        where = (f"DLPack device {tuple(int(d) for d in device)}"
                 if device is not None else "device memory "
                 "(__cuda_array_interface__)")
        raise KPoolError(f"{op}: an operand of type {type(x).__name__} lives "
                         f"on {where}; the Python ops take host arrays "
                         "(numpy or anything exposing __dlpack__ on the CPU)")
    a = np.from_dlpack(x)
    if a.flags.writeable or a.size == 0:
        return a
    # A writable alias of the same memory, keeping the producer alive.
    lo = hi = 0
    for n, st in zip(a.shape, a.strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    start = a.__array_interface__["data"][0] + lo
    buf = (ctypes.c_char * (hi - lo + a.itemsize)).from_address(start)
    buf._kpool_owner = x
    return np.ndarray(a.shape, a.dtype, buffer=buf, offset=-lo,
                      strides=a.strides)


def _host_arrays(fn):
    """Lets `fn` take host arrays of other libraries (see _host_array)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        op = fn.__name__
        args = [_host_array(op, a) for a in args]
        kwargs = {k: _host_array(op, v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)
    return wrapper


def _array(op, name, array, rank, dtype=None):
    """Checks that `array` is a numpy array (of `dtype`, when given) with
    `rank` dimensions."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{op}: '{name}' must be a numpy array, got "
                        f"{type(array).__name__}")
    if dtype is not None and array.dtype != dtype:
        raise TypeError(f"{op}: '{name}' must have dtype {dtype}, got "
                        f"{array.dtype}")
    if array.ndim != rank:
        raise KPoolError(f"{op}: '{name}' must have rank {rank}, got shape "
                         f"{list(array.shape)}")


def _view(op, name, array, dtype, rank, writable=False):
    """A KPoolView of `array` (no copy); checks dtype, rank and strides."""
    _array(op, name, array, rank, dtype)
    if writable and not array.flags.writeable:
        raise KPoolError(f"{op}: '{name}' is written but the array is "
                         "read-only")
    size = array.itemsize
    strides = []
    for d, stride in enumerate(array.strides):
        if stride % size:
            raise KPoolError(
                f"{op}: '{name}' has a stride of {stride} bytes in dimension "
                f"{d}, not a whole number of {size}-byte elements; kpool "
                "views count strides in elements (copy the array, e.g. with "
                "numpy.ascontiguousarray)")
        strides.append(stride // size)
    address = array.__array_interface__["data"][0]
    if array.size and address % size:
        raise KPoolError(f"{op}: '{name}' starts at an address that is not "
                         f"aligned to its {size}-byte elements")
    view = _capi.View()
    view.data = address if array.size else None
    view.rank = rank
    for d in range(rank):
        view.sizes[d] = array.shape[d]
        view.strides[d] = strides[d]
    return view


def _meta(op, name, values, length=None):
    """Metadata as a uint32 array (a view when already 32-bit)."""
    array = values if isinstance(values, np.ndarray) else np.asarray(values)
    if array.size == 0 and array.dtype.kind == "f":
        array = array.astype(np.uint32)  # np.asarray([]) is float64
    if array.ndim != 1:
        raise KPoolError(f"{op}: '{name}' must be one-dimensional, got shape "
                         f"{list(array.shape)}")
    if array.dtype == object:
        # numpy keeps Python ints beyond 64 bits as objects.
        items = array.tolist()
        if all(isinstance(v, int) and not isinstance(v, bool)
               for v in items):
            b = next((i for i, v in enumerate(items)
                      if not 0 <= v <= 0xFFFFFFFF), None)
            if b is not None:
                raise KPoolError(f"{op}: {name}[{b}] = {items[b]} is not an "
                                 "unsigned 32-bit value")
            array = np.array(items, dtype=np.uint32)
    if array.dtype == np.uint32:
        pass
    elif array.dtype == np.int32:
        if (array < 0).any():
            b = int(np.flatnonzero(array < 0)[0])
            raise KPoolError(f"{op}: {name}[{b}] = {int(array[b])} is "
                             "negative; offsets, cache lengths and slots are "
                             "unsigned")
        array = array.view(np.uint32)
    elif np.issubdtype(array.dtype, np.integer):
        bad = (array < 0) | (array > 0xFFFFFFFF)
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            raise KPoolError(f"{op}: {name}[{b}] = {int(array[b])} is not an "
                             "unsigned 32-bit value")
        array = array.astype(np.uint32)
    else:
        raise TypeError(f"{op}: '{name}' must hold integers, got dtype "
                        f"{array.dtype}")
    if length is not None and array.shape[0] != length:
        raise KPoolError(f"{op}: '{name}' must have {length} entries, got "
                         f"{array.shape[0]}")
    return array


def _out_meta(op, name, array, length, dtypes):
    if not isinstance(array, np.ndarray) or array.dtype not in dtypes:
        raise TypeError(f"{op}: '{name}' must be a numpy array of "
                        + " or ".join(str(np.dtype(d)) for d in dtypes))
    if array.dtype == np.int32 and np.dtype(np.uint32) in dtypes:
        array = array.view(np.uint32)
    if array.ndim != 1 or array.shape[0] != length:
        raise KPoolError(f"{op}: '{name}' must have shape [{length}], got "
                         f"{list(array.shape)}")
    return array


def _int(op, name, value, low, high=None):
    """`value` as a Python int in ``[low, high]`` (``high`` None: 2^63 - 1).

    Accepts ints and numpy integers (anything with ``__index__``); rejects
    bools, floats, strings and the rest with TypeError, and values out of
    range with KPoolError (a ValueError), naming `name`: nothing is
    truncated, rounded or wrapped.
    """
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(f"{op}: '{name}' must be an integer, got "
                        f"{type(value).__name__} {value!r}")
    value = operator.index(value)
    high = 2**63 - 1 if high is None else high
    if not low <= value <= high:
        raise KPoolError(f"{op}: '{name}' = {value} is not in [{low}, "
                         f"{high}]")
    return value


def _bool(op, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: '{name}' must be True or False, got "
                        f"{type(value).__name__} {value!r}")
    return bool(value)


def _target(op, target):
    if not isinstance(target, str) or target not in _TARGET_CODES:
        raise KPoolError(f"{op}: target must be one of "
                         + ", ".join(repr(t) for t in _TARGET_CODES)
                         + f", got {target!r}")
    return target


def _config(op, dtype, head_dim, kpool, openmp, vector_size, target="cpu"):
    """The checked (element type, head_dim, kpool, openmp, vector_size,
    target)."""
    return (element_type(dtype), _int(op, "head_dim", head_dim, 1),
            _int(op, "kpool", kpool, 1), _bool(op, "openmp", openmp),
            _int(op, "vector_size", vector_size, 0), _target(op, target))


class KernelSet:
    """The kernels compiled for one (element type, head_dim, kpool, target).

    ``dtype`` is "bf16", "f16", "f32" or the numpy dtype that holds it
    (uint16 for bf16 bit patterns, float16, float32). ``target`` is "cpu"
    (JIT-compiled once per process and configuration; later sets share it)
    or "cuda" (precompiled kernels registered in the process by kpool-aot's
    registration function; KPoolError names the configuration when there
    are none). The ops take numpy arrays, which are host memory: they run
    on CPU kernel sets.
    """

    def __init__(self, dtype, head_dim, kpool, *, openmp=False,
                 vector_size=16, target="cpu", cache=None, rotate="none",
                 scale="absmax"):
        (self.element_type, self.head_dim, self.kpool, self.openmp,
         self.vector_size, self.target) = _config(
             "kernel set", dtype, head_dim, kpool, openmp, vector_size,
             target)
        self.dtype = DTYPES[self.element_type]
        #: The pool-cache format (docs/pool-cache.md): ``cache`` None (no
        #: cache kernels), "element" or "fp8"; ``rotate`` "none" or
        #: "hadamard"; ``scale`` "absmax" or "pow2" (FP8 only).
        self.cache = _choice("kernel set", "cache", cache, _CACHE_CODES)
        self.rotate = _choice("kernel set", "rotate", rotate, _ROTATE_CODES)
        self.scale = _choice("kernel set", "scale", scale, _SCALE_CODES)
        lib = _capi.load()
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolKernelSetCreateWithCache(
            _TARGET_CODES[self.target], _ETYPE_CODES[self.element_type],
            self.head_dim, self.kpool, self.openmp, self.vector_size,
            _CACHE_CODES[self.cache], _ROTATE_CODES[self.rotate],
            _SCALE_CODES[self.scale], ctypes.byref(handle)))
        self._lib = lib
        self._handle = handle

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.kpoolKernelSetDestroy(handle)
            self._handle = None

    def __repr__(self):
        return (f"KernelSet({self.element_type!r}, head_dim={self.head_dim}, "
                f"kpool={self.kpool})")

    def _call(self, op, validate, **operands):
        """Runs kernel `op` on `operands` (one per operand of the kernel
        ABI, by name): each view's dtype, rank and writability come from
        the ABI's description of the operand."""
        kernel = _capi.kernels()[op]
        dtypes = {_capi.KIND_ELEMENT: self.dtype,
                  _capi.KIND_CACHE_ENTRY: (np.dtype(np.uint8)
                                           if self.cache == "fp8"
                                           else self.dtype),
                  _capi.KIND_U32: np.dtype(np.uint32),
                  _capi.KIND_I32: np.dtype(np.int32),
                  _capi.KIND_F32: np.dtype(np.float32)}
        operands.setdefault("stream", None)
        args = [
            _stream_handle(operands[o.name]) if o.role == _capi.CONTEXT else
            operands[o.name] if o.role == _capi.SCALAR else
            _view(op, o.name, operands[o.name], dtypes[o.kind], o.rank,
                  o.role == _capi.OUTPUT)
            for o in kernel.operands]
        _capi.check(getattr(self._lib, kernel.capi_function)(
            self._handle, *args, validate))

    def _cache_operands(self, op, batch, block_table, cache_keys,
                        cache_scales):
        """The pool-cache operands of a call (empty without a table): the
        table as uint32 ``[batch, W]`` (int32 -1 padding kept as its bits),
        the keys, and the scales (a dummy for element entries)."""
        if block_table is None:
            if cache_keys is not None or cache_scales is not None:
                raise KPoolError(f"{op}: 'cache_keys' and 'cache_scales' "
                                 "need a 'block_table'")
            return {}
        if self.cache is None:
            raise KPoolError(f"{op}: this kernel set has no pool-cache "
                             "kernels: create it with cache='fp8' or "
                             "cache='element'")
        table = (block_table if isinstance(block_table, np.ndarray)
                 else np.asarray(block_table, dtype=np.int64))
        if table.ndim != 2:
            raise KPoolError(f"{op}: 'block_table' must be [batch, pages], "
                             f"got shape {list(table.shape)}")
        if table.dtype == np.int32:
            table = table.view(np.uint32)
        elif table.dtype != np.uint32:
            if not np.issubdtype(table.dtype, np.integer):
                raise TypeError(f"{op}: 'block_table' must hold integers, "
                                f"got dtype {table.dtype}")
            bad = (table < -1) | (table > 0xFFFFFFFF)
            if bad.any():
                i, j = (int(x) for x in np.argwhere(bad)[0])
                raise KPoolError(f"{op}: block_table[{i}, {j}] = "
                                 f"{int(table[i, j])} is not a page id "
                                 "(uint32, or -1 padding)")
            table = table.astype(np.int64).astype(np.uint32)
        if cache_keys is None:
            raise KPoolError(f"{op}: a 'block_table' needs 'cache_keys'")
        if self.cache == "fp8":
            if cache_scales is None:
                raise KPoolError(f"{op}: FP8 entries need 'cache_scales' "
                                 "[pages, page_size] float32")
        elif cache_scales is not None:
            raise KPoolError(f"{op}: entries of the element type have no "
                             "'cache_scales'")
        else:
            cache_scales = np.zeros((0, 0), dtype=np.float32)
        return {"block_table": table, "cache_keys": cache_keys,
                "cache_scales": cache_scales}

    def prepare(self, stream=None):
        """Loads what the kernels need (GPU modules) in the context of
        ``stream`` before capturing calls into a CUDA graph; nothing to do
        on the CPU. Every op takes ``stream=``: a CUstream as an int, an
        object with ``cuda_stream``/``handle``/``ptr`` (PyTorch, CuPy), or
        None for the NULL stream; GPU calls only enqueue there."""
        _capi.check(self._lib.kpoolKernelSetPrepare(
            self._handle, _stream_handle(stream)))

    @_host_arrays
    def pool_offsets(self, input_row_offsets, cache_lengths, *, out=None,
                     validate=True, stream=None):
        """kpool.pool_offsets: returns ``pool_row_offsets`` ``[B+1]``
        (uint32; ``out`` if given, uint32 or int32)."""
        op = "pool_offsets"
        cache = _meta(op, "cache_lengths", cache_lengths)
        iro = _meta(op, "input_row_offsets", input_row_offsets)
        batch = cache.shape[0]
        if out is None:
            out = np.zeros(batch + 1, dtype=np.uint32)
        target = _out_meta(op, "pool_row_offsets", out, batch + 1,
                           (np.dtype(np.uint32), np.dtype(np.int32)))
        self._call(op, validate, stream=stream, pool_row_offsets=target,
                   input_row_offsets=iro, cache_lengths=cache)
        return out

    @_host_arrays
    def compress(self, k, gate, ape, input_row_offsets, pool_row_offsets,
                 cache_lengths, *, out=None, validate=True, stream=None,
                 block_table=None, cache_keys=None, cache_scales=None):
        """kpool.compress: returns ``pooled`` (``out``, or a new zero-filled
        ``[pool_row_offsets[B], head_dim]`` array). ``pool_row_offsets`` may
        be None: it is computed with :meth:`pool_offsets` first.

        With ``block_table`` ``[B, W]`` (a set with a cache format), every
        pool is also stored in the same kernel into entry
        ``(block_table[b, p // page_size], p % page_size)`` of
        ``cache_keys`` ``[N, page_size, head_dim]`` (uint8 FP8 codes, or
        the element type) and, for FP8, ``cache_scales`` ``[N, page_size]``
        float32, both written in place (docs/pool-cache.md)."""
        op = "compress"
        cache = _meta(op, "cache_lengths", cache_lengths)
        iro = _meta(op, "input_row_offsets", input_row_offsets)
        if pool_row_offsets is None:
            # Unvalidated: compress's own checks below report bad rows
            # under its name.
            pro = self.pool_offsets(iro, cache, validate=False)
        else:
            pro = _meta(op, "pool_row_offsets", pool_row_offsets)
        if out is None:
            rows = int(pro[-1]) if cache.shape[0] and pro.shape[0] else 0
            out = np.zeros((rows, self.head_dim), dtype=self.dtype)
        extra = self._cache_operands(op, cache.shape[0], block_table,
                                     cache_keys, cache_scales)
        self._call(op + ("_cache" if extra else ""), validate, stream=stream,
                   pooled=out, k=k, gate=gate, ape=ape,
                   input_row_offsets=iro, pool_row_offsets=pro,
                   cache_lengths=cache, **extra)
        return out

    @_host_arrays
    def seed_tail(self, tail, k, gate, input_row_offsets, cache_lengths,
                  slot_idx, num_requests=None, *, validate=True, stream=None):
        """kpool.seed_tail: updates ``tail`` ``[max_slots, 2, R, head_dim]``
        (``R >= kpool`` the ring window) in place and returns it: each
        request's last ``R`` positions that the call brings, in ring rows
        ``position mod R``. ``num_requests`` defaults to the batch size."""
        op = "seed_tail"
        iro, cache, slots, n = _ring_metadata(
            op, input_row_offsets, cache_lengths, slot_idx, num_requests)
        self._call(op, validate, stream=stream, tail=tail, k=k, gate=gate,
                   input_row_offsets=iro, cache_lengths=cache,
                   slot_idx=slots, num_requests=n)
        return tail

    @_host_arrays
    def ring_close(self, tail, k, gate, ape, input_row_offsets, cache_lengths,
                   slot_idx, num_requests=None, *, pooled=None,
                   closed_pool=None, validate=True, stream=None,
                   block_table=None, cache_keys=None, cache_scales=None):
        """kpool.ring_close: returns ``(pooled [B, head_dim], closed_pool
        [B] int32)``, into the given arrays or new ones. ``tail`` is only
        read. ``block_table``, ``cache_keys``, ``cache_scales``: the pool
        cache, as in :meth:`compress`."""
        op = "ring_close"
        iro, cache, slots, n = _ring_metadata(
            op, input_row_offsets, cache_lengths, slot_idx, num_requests)
        batch = cache.shape[0]
        if pooled is None:
            pooled = np.zeros((batch, self.head_dim), dtype=self.dtype)
        if closed_pool is None:
            closed_pool = np.zeros(batch, dtype=np.int32)
        closed = _out_meta(op, "closed_pool", closed_pool, batch,
                           (np.dtype(np.int32),))
        extra = self._cache_operands(op, batch, block_table, cache_keys,
                                     cache_scales)
        self._call(op + ("_cache" if extra else ""), validate, stream=stream,
                   pooled=pooled, closed_pool=closed, tail=tail,
                   k=k, gate=gate, ape=ape, input_row_offsets=iro,
                   cache_lengths=cache, slot_idx=slots,
                   num_requests=n, **extra)
        return pooled, closed_pool

    @_host_arrays
    def step(self, tail, k, gate, ape, input_row_offsets, cache_lengths,
             slot_idx, num_requests=None, *, pooled=None, validate=True,
             stream=None, block_table=None, cache_keys=None,
             cache_scales=None):
        """kpool.step, the fused serving step: ring_close, pool_offsets,
        compress and seed_tail in one kernel. Updates ``tail`` in place and
        returns ``(closed [B, head_dim], closed_pool [B] int32,
        pool_row_offsets [B+1] uint32, pooled)``: ``pooled`` is the given
        array (its rows a capacity) or a new zero-filled one of
        ``floor(T / kpool) + B`` rows, the most a call of ``T`` tokens can
        complete; its first ``pool_row_offsets[B]`` rows are the pools.
        ``block_table``, ``cache_keys``, ``cache_scales``: the pool cache,
        as in :meth:`compress` (every pool the step produces)."""
        op = "step"
        iro, cache, slots, n = _ring_metadata(
            op, input_row_offsets, cache_lengths, slot_idx, num_requests)
        batch = cache.shape[0]
        if pooled is None:
            tokens = np.asarray(k).shape[0] if np.ndim(k) >= 1 else 0
            pooled = np.zeros((tokens // self.kpool + batch, self.head_dim),
                              dtype=self.dtype)
        closed = np.zeros((batch, self.head_dim), dtype=self.dtype)
        closed_pool = np.zeros(batch, dtype=np.int32)
        pro = np.zeros(batch + 1, dtype=np.uint32)
        extra = self._cache_operands(op, batch, block_table, cache_keys,
                                     cache_scales)
        self._call(op + ("_cache" if extra else ""), validate, stream=stream,
                   closed=closed, closed_pool=closed_pool,
                   pool_row_offsets=pro, pooled=pooled, tail=tail, k=k,
                   gate=gate, ape=ape, input_row_offsets=iro,
                   cache_lengths=cache, slot_idx=slots,
                   num_requests=n, **extra)
        return closed, closed_pool, pro, pooled


def _i32(op, n):
    return _int(op, "num_requests", n, -2**31, 2**31 - 1)


def _ring_metadata(op, input_row_offsets, cache_lengths, slot_idx,
                   num_requests):
    """The metadata of an op with a ring: ``(iro, cache, slots, n)`` as
    uint32 arrays and the int32 ``num_requests`` (default: the batch)."""
    cache = _meta(op, "cache_lengths", cache_lengths)
    iro = _meta(op, "input_row_offsets", input_row_offsets)
    slots = _meta(op, "slot_idx", slot_idx)
    n = cache.shape[0] if num_requests is None else num_requests
    return iro, cache, slots, _i32(op, n)


_sets = {}
_sets_lock = threading.Lock()   # guards _sets and _compiling only
_compiling = {}                 # key -> the lock held while it compiles


def _shared(key, create):
    """The set cached under `key`, made by `create()` on first use. Only
    the callers of one key wait while it compiles (the C call releases the
    GIL); every other configuration stays usable meanwhile."""
    with _sets_lock:
        kernels = _sets.get(key)
        if kernels is not None:
            return kernels
        lock = _compiling.setdefault(key, threading.Lock())
    with lock:
        with _sets_lock:
            kernels = _sets.get(key)
        if kernels is None:
            kernels = create()
            with _sets_lock:
                _sets[key] = kernels
        return kernels


def kernel_set(dtype, head_dim, kpool, *, openmp=False, vector_size=16,
               target="cpu", cache=None, rotate="none", scale="absmax"):
    """The shared :class:`KernelSet` of a configuration (created once)."""
    key = _config("kernel set", dtype, head_dim, kpool, openmp, vector_size,
                  target) + (
        _choice("kernel set", "cache", cache, _CACHE_CODES),
        _choice("kernel set", "rotate", rotate, _ROTATE_CODES),
        _choice("kernel set", "scale", scale, _SCALE_CODES))
    return _shared(key, lambda: KernelSet(key[0], key[1], key[2],
                                          openmp=key[3], vector_size=key[4],
                                          target=key[5], cache=key[6],
                                          rotate=key[7], scale=key[8]))


class _OffsetsKernel(KernelSet):
    """Only the pool_offsets kernel of one kpool (one small kernel to
    compile; the scan depends on nothing else)."""

    def __init__(self, kpool):
        self.element_type, self.dtype = "f32", DTYPES["f32"]
        self.head_dim, self.kpool = 1, _int("pool_offsets", "kpool", kpool, 1)
        self.openmp, self.vector_size, self.target = False, 0, "cpu"
        self.cache, self.rotate, self.scale = None, "none", "absmax"
        lib = _capi.load()
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolPoolOffsetsKernelCreate(self.kpool,
                                                     ctypes.byref(handle)))
        self._lib = lib
        self._handle = handle


def _geometry(op, name, array, rank, dim):
    _array(op, name, array, rank)
    return array.shape[dim]


@_host_arrays
def pool_offsets(input_row_offsets, cache_lengths, kpool, *, out=None,
                 validate=True, **options):
    """kpool.pool_offsets for ``kpool`` tokens per pool; see
    :meth:`KernelSet.pool_offsets`. Uses a kernel set of this ``kpool`` if
    one exists, else compiles the scan kernel alone (not a whole set)."""
    kpool = _int("pool_offsets", "kpool", kpool, 1)
    unknown = sorted(set(options) - {"openmp", "vector_size"})
    if unknown:
        raise TypeError("pool_offsets: unexpected keyword argument(s) "
                        + ", ".join(unknown))
    # openmp and vector_size do not change the scan: accepted and ignored.
    # Any kernel set of this kpool has the scan; else compile it alone.
    with _sets_lock:
        kernels = next((s for key, s in _sets.items()
                        if key[2] == kpool and key[0] != "offsets"
                        and key[5] == "cpu"), None)
    if kernels is None:
        kernels = _shared(("offsets", 0, kpool, False, 0, "cpu"),
                          lambda: _OffsetsKernel(kpool))
    return kernels.pool_offsets(input_row_offsets, cache_lengths, out=out,
                                validate=validate)


@_host_arrays
def compress(k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths,
             *, out=None, validate=True, **options):
    """kpool.compress; the configuration comes from the operands (element
    type of ``k``, ``head_dim`` and ``kpool`` from ``ape``'s shape). See
    :meth:`KernelSet.compress`."""
    kpool = _geometry("compress", "ape", ape, 2, 0)
    dim = _geometry("compress", "ape", ape, 2, 1)
    kernels = kernel_set(_dtype("compress", "k", k), dim, kpool, **options)
    return kernels.compress(k, gate, ape, input_row_offsets, pool_row_offsets,
                            cache_lengths, out=out, validate=validate)


@_host_arrays
def seed_tail(tail, k, gate, input_row_offsets, cache_lengths, slot_idx,
              num_requests=None, *, kpool=None, validate=True, **options):
    """kpool.seed_tail; configuration from ``tail`` ``[S, 2, R, D]``. See
    :meth:`KernelSet.seed_tail`. What seed_tail stores depends only on the
    ring window ``R``, so ``kpool`` (at most ``R``) defaults to ``R``; pass
    the model's ``kpool`` to reuse its kernel set (each configuration
    compiles all four kernels once)."""
    if kpool is None:
        kpool = _geometry("seed_tail", "tail", tail, 4, 2)
    dim = _geometry("seed_tail", "tail", tail, 4, 3)
    kernels = kernel_set(_dtype("seed_tail", "tail", tail), dim, kpool,
                         **options)
    return kernels.seed_tail(tail, k, gate, input_row_offsets, cache_lengths,
                             slot_idx, num_requests, validate=validate)


@_host_arrays
def ring_close(tail, k, gate, ape, input_row_offsets, cache_lengths, slot_idx,
               num_requests=None, *, pooled=None, closed_pool=None,
               validate=True, **options):
    """kpool.ring_close; configuration from ``k`` and ``ape``. See
    :meth:`KernelSet.ring_close`."""
    kpool = _geometry("ring_close", "ape", ape, 2, 0)
    dim = _geometry("ring_close", "ape", ape, 2, 1)
    kernels = kernel_set(_dtype("ring_close", "k", k), dim, kpool, **options)
    return kernels.ring_close(tail, k, gate, ape, input_row_offsets,
                              cache_lengths, slot_idx, num_requests,
                              pooled=pooled, closed_pool=closed_pool,
                              validate=validate)


def ring_holds_pending(kpool, window, accepted, end):
    """The contract's rollback condition, for engines that track lengths
    themselves: after a call that brought positions ``[c, end)`` of a
    request, continuing it at length ``accepted`` (``c <= accepted <= end``)
    with a ring of ``window`` rows is valid iff ``accepted % kpool == 0`` or
    ``end - (accepted // kpool) * kpool <= window``. :meth:`PoolStore.accept`
    checks the same."""
    args = [operator.index(v) for v in (kpool, window, accepted, end)]
    return bool(_capi.load().kpoolRingHoldsPending(*args))


def _dtype(op, name, array):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{op}: '{name}' must be a numpy array, got "
                        f"{type(array).__name__}")
    try:
        return element_type(array.dtype)
    except TypeError:
        raise TypeError(f"{op}: '{name}' has dtype {array.dtype}; use uint16 "
                        "(bf16 bit patterns), float16 or float32") from None


class PoolStore:
    """A tail ring and the pooled keys of every slot, over the C PoolStore.

    Each :meth:`step` takes one call of any shape (prefill, chunked prefill,
    decode, mixed ragged batches): request ``b`` brings rows
    ``[input_row_offsets[b], input_row_offsets[b+1])`` of ``k`` and ``gate``
    for ring ``slots[b]``, continuing where that slot's earlier calls
    stopped. The store runs ring_close, compress and seed_tail in order and
    returns the pools that became complete. A slot's pools are
    bit-identical whatever the chunking.

    ``ape`` is ``[kpool, head_dim]`` float32 (copied); ``dtype`` the element
    type of keys and gates ("bf16"/uint16, "f16"/float16, "f32"/float32).
    ``ring_window`` (default ``kpool``) is the ring's rows per slot, at
    least ``kpool``: with ``kpool + d - 1`` rows, :meth:`accept` can roll
    back any rejected suffix of a verify step of ``1 + d`` tokens.
    """

    def __init__(self, ape, max_slots, dtype, *, ring_window=None,
                 openmp=False, vector_size=16):
        op = "pool store"
        if isinstance(ape, np.ndarray):
            if ape.dtype != np.float32:
                raise TypeError(f"pool store: 'ape' must have dtype float32, "
                                f"got {ape.dtype}")
        else:
            # Nested lists of numbers are converted (to float32).
            try:
                ape = np.array(ape, dtype=np.float32)
            except (TypeError, ValueError) as e:
                raise TypeError("pool store: 'ape' must be a float32 array "
                                "or nested lists of numbers "
                                f"[kpool][head_dim] ({e})") from None
        max_slots = _int(op, "max_slots", max_slots, 1, 2**31)
        ring_window = (0 if ring_window is None
                       else _int(op, "ring_window", ring_window, 1, 2**31))
        if ape.ndim != 2:
            raise KPoolError("pool store: 'ape' must be [kpool, head_dim], "
                             f"got shape {list(ape.shape)}")
        self.kernels = kernel_set(dtype, ape.shape[1], ape.shape[0],
                                  openmp=openmp, vector_size=vector_size)
        self.dtype = self.kernels.dtype
        self.head_dim = self.kernels.head_dim
        self.kpool = self.kernels.kpool
        self._ape = np.ascontiguousarray(ape)
        lib = _capi.load()
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolPoolStoreCreateWithWindow(
            self.kernels._handle, max_slots, ring_window,
            self._ape.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            ctypes.byref(handle)))
        self._lib = lib
        self._handle = handle
        self.max_slots = max_slots
        #: Ring rows per slot (``R >= kpool``).
        self.ring_window = lib.kpoolPoolStoreGetRingWindow(handle)

    def close(self):
        """Frees the store (also done when it is garbage-collected)."""
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.kpoolPoolStoreDestroy(handle)
            self._handle = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        if not self._handle:
            raise KPoolError("pool store: the store is closed")
        return self._handle

    def step(self, k, gate, input_row_offsets, slots):
        """Runs one call; returns the :class:`ProducedPool` list (per
        request: the ring's pool first, then compress's, in id order). On
        error raises :class:`KPoolError` and nothing changes."""
        op = "step"
        handle = self._live()
        slots = np.ascontiguousarray(_meta(op, "slot_idx", slots))
        iro = np.ascontiguousarray(_meta(op, "input_row_offsets",
                                         input_row_offsets,
                                         slots.shape[0] + 1))
        u32p = ctypes.POINTER(ctypes.c_uint32)
        produced = ctypes.c_int64()
        _capi.check(self._lib.kpoolPoolStoreStep(
            handle, _view(op, "k", k, self.dtype, 2),
            _view(op, "gate", gate, self.dtype, 2), slots.shape[0],
            iro.ctypes.data_as(u32p), slots.ctypes.data_as(u32p),
            ctypes.byref(produced)))
        count = ctypes.c_int64()
        entries = self._lib.kpoolPoolStoreGetProduced(handle,
                                                      ctypes.byref(count))
        return [ProducedPool(int(entries[i].slot), int(entries[i].pool),
                             bool(entries[i].fromRing))
                for i in range(count.value)]

    def step_requests(self, requests):
        """:meth:`step` over ``[(slot, k_rows, gate_rows), ...]``: the rows
        of each request as separate arrays (concatenated here)."""
        requests = list(requests)
        empty = np.zeros((0, self.head_dim), dtype=self.dtype)
        ks = [np.asarray(r[1]) for r in requests] or [empty]
        gates = [np.asarray(r[2]) for r in requests] or [empty]
        for b, r in enumerate(requests):
            for name, rows in (("k", ks[b]), ("gate", gates[b])):
                if rows.ndim != 2:
                    raise KPoolError(
                        f"step: request {b}: '{name}' rows must be "
                        f"[tokens, head_dim = {self.head_dim}], got shape "
                        f"{list(rows.shape)}")
        counts = [k.shape[0] for k in ks[:len(requests)]]
        iro = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        return self.step(np.concatenate(ks), np.concatenate(gates), iro,
                         [r[0] for r in requests])

    def _slot(self, op, slot):
        slot = _int(op, "slot", slot, -2**63)
        if not 0 <= slot < self.max_slots:
            raise KPoolError(f"{op}: slot {slot} is not in [0, max_slots = "
                             f"{self.max_slots})")
        return slot

    def accept(self, slot, accepted):
        """Speculative decoding: keeps the first ``accepted`` of the tokens
        the slot's last :meth:`step` brought, forgets its pools at and after
        the first rejected position (the next steps re-produce them) and
        sets its length to the step's start plus ``accepted``. Raises
        :class:`KPoolError`, changing nothing, when ``accepted`` is out of
        range or the ring window is too small to still hold the pending
        pool's members (the message names the slot and the window
        needed)."""
        _capi.check(self._lib.kpoolPoolStoreAccept(
            self._live(), self._slot("accept", slot),
            _int("accept", "accepted", accepted, -2**63)))

    def tokens(self, slot):
        """Tokens the slot has seen (its next cache length)."""
        return self._lib.kpoolPoolStoreGetTokens(
            self._live(), self._slot("tokens", slot))

    def num_pools(self, slot):
        """Complete pools of the slot (ids ``0 .. num_pools - 1``)."""
        return self._lib.kpoolPoolStoreGetNumPools(
            self._live(), self._slot("num_pools", slot))

    def pools(self, slot, first=0, count=None):
        """A copy of pools ``[first, first + count)`` of the slot (all by
        default), ``[count, head_dim]``."""
        slot = self._slot("pools", slot)
        first = _int("pools", "first", first, -2**63)
        if count is None:
            count = self.num_pools(slot) - first
        count = _int("pools", "count", count, -2**63)
        out = np.zeros((max(count, 0), self.head_dim), dtype=self.dtype)
        _capi.check(self._lib.kpoolPoolStoreCopyPools(
            self._live(), slot, first, count,
            _view("pools", "dst", out, self.dtype, 2, True)))
        return out

    def pool(self, slot, pool):
        """A copy of one pool, ``[head_dim]``."""
        return self.pools(slot, pool, 1)[0]

    def reset(self, slot):
        """Forgets the slot's tokens and pools (for a new request)."""
        _capi.check(self._lib.kpoolPoolStoreReset(
            self._live(), self._slot("reset", slot)))


def _stream_handle(stream):
    """The CUstream of ``stream`` as an int (None: the NULL stream): an int,
    or a framework stream exposing ``cuda_stream`` (torch.cuda.Stream),
    ``ptr`` (cupy) or ``handle``."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream or None
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value or None
    raise TypeError(f"stream: expected a CUstream (int) or a stream object "
                    f"with cuda_stream, ptr or handle, got {type(stream).__name__}")


class PagedPoolStore:
    """The pooled keys of every slot in the production pool cache.

    A tail ring per slot, as in :class:`PoolStore`, but every pool goes
    straight into a paged cache (docs/pool-cache.md), optionally rotated by
    the Walsh-Hadamard transform and quantized to FP8 (e4m3fn) with one
    float32 scale per pool: each :meth:`step` is one fused kernel
    (``kpool.step`` with ``to_cache``) that pools, rounds, rotates,
    quantizes and stores.

    The cache is one uint8 allocation (:attr:`buffer`) of ``num_pages``
    pages of ``page_stride`` bytes: ``page_size * head_dim`` entry elements
    (uint8 codes for ``entry="fp8"``, the element type for
    ``entry="element"``) then, for FP8, ``page_size`` float32 scales, the
    DeepSeek/vLLM indexer page. :attr:`cache_keys` and :attr:`cache_scales`
    are strided views of it. ``page_stride`` defaults to the page's size; a
    larger one pads the pages. A slot's pools get pages from a free list as
    they need them (:meth:`pages`), in the order the list gives them;
    ``page_order`` (a permutation of the page ids) sets that order, e.g. to
    test pages out of order. :meth:`release` returns a slot's pages.
    """

    def __init__(self, ape, max_slots, dtype, *, page_size, num_pages,
                 entry="fp8", rotate="hadamard", scale="absmax",
                 page_stride=None, page_order=None, ring_window=None,
                 openmp=False, vector_size=16):
        op = "paged pool store"
        ape = np.ascontiguousarray(np.asarray(ape, dtype=np.float32))
        if ape.ndim != 2:
            raise KPoolError(f"{op}: 'ape' must be [kpool, head_dim], got "
                             f"shape {list(ape.shape)}")
        _choice(op, "entry", entry, ("element", "fp8"))
        self.kernels = kernel_set(dtype, ape.shape[1], ape.shape[0],
                                  openmp=openmp, vector_size=vector_size,
                                  cache=entry, rotate=rotate, scale=scale)
        self.dtype, self.head_dim = self.kernels.dtype, self.kernels.head_dim
        self.kpool = self.kernels.kpool
        #: ``(entry, rotate, scale)``.
        self.format = (entry, rotate, scale)
        self.max_slots = _int(op, "max_slots", max_slots, 1, 2**31)
        self.page_size = _int(op, "page_size", page_size, 1, 2**31)
        self.num_pages = _int(op, "num_pages", num_pages, 1, 2**31 - 1)
        window = self.kpool if ring_window is None else _int(
            op, "ring_window", ring_window, self.kpool, 2**31)
        self.ring_window = window
        esize = 1 if entry == "fp8" else self.dtype.itemsize
        keys_bytes = self.page_size * self.head_dim * esize
        page_bytes = keys_bytes + (4 * self.page_size if entry == "fp8" else 0)
        self.page_stride = page_bytes if page_stride is None else _int(
            op, "page_stride", page_stride, page_bytes)
        align = 4 if entry == "fp8" else esize
        if self.page_stride % align or keys_bytes % align:
            raise KPoolError(f"{op}: page_stride {self.page_stride} and the "
                             f"page's {keys_bytes} entry bytes must be "
                             f"multiples of {align} (the scales' alignment)")
        self._ape = ape
        #: The whole cache, ``[num_pages, page_stride]`` uint8.
        self.buffer = np.zeros((self.num_pages, self.page_stride),
                               dtype=np.uint8)
        flat = self.buffer.reshape(-1)
        keys_dtype = np.dtype(np.uint8) if entry == "fp8" else self.dtype
        #: ``[num_pages, page_size, head_dim]`` entries (a view of buffer).
        self.cache_keys = np.lib.stride_tricks.as_strided(
            flat.view(keys_dtype), (self.num_pages, self.page_size,
                                    self.head_dim),
            (self.page_stride, self.head_dim * esize, esize))
        #: ``[num_pages, page_size]`` float32 scales (FP8), or None.
        self.cache_scales = None
        if entry == "fp8":
            self.cache_scales = np.lib.stride_tricks.as_strided(
                flat[keys_bytes:].view(np.float32),
                (self.num_pages, self.page_size), (self.page_stride, 4))
        self.tail = np.zeros((self.max_slots, 2, window, self.head_dim),
                             dtype=self.dtype)
        order = (range(self.num_pages) if page_order is None
                 else [_int(op, "page_order", p, 0, self.num_pages - 1)
                       for p in page_order])
        if sorted(order) != list(range(self.num_pages)):
            raise KPoolError(f"{op}: page_order must be a permutation of the "
                             f"{self.num_pages} page ids")
        self._free = list(order)[::-1]     # pop() gives them in order
        self._pages = [[] for _ in range(self.max_slots)]
        self._tokens = [0] * self.max_slots
        # Per slot, the positions [start, end) its last step brought.
        self._last = [(0, 0)] * self.max_slots

    def _slot(self, op, slot):
        slot = _int(op, "slot", slot, -2**63)
        if not 0 <= slot < self.max_slots:
            raise KPoolError(f"{op}: slot {slot} is not in [0, max_slots = "
                             f"{self.max_slots})")
        return slot

    def step(self, k, gate, input_row_offsets, slots):
        """Runs one call (request ``b`` brings rows ``[iro[b], iro[b+1])``
        for slot ``slots[b]``); returns ``[(slot, pool), ...]``, the pools
        it stored, per request in id order. Pages for the new pools come
        from the free list first; on an error (bad metadata, no free page)
        nothing changes."""
        op = "step"
        slot_list = [self._slot(op, s) for s in
                     _meta(op, "slot_idx", slots).tolist()]
        iro = _meta(op, "input_row_offsets", input_row_offsets,
                    len(slot_list) + 1)
        if len(set(slot_list)) != len(slot_list):
            raise KPoolError(f"{op}: a slot appears twice in one call")
        counts = [int(iro[b + 1]) - int(iro[b]) for b in range(len(slot_list))]
        if any(n < 0 for n in counts):
            b = next(b for b, n in enumerate(counts) if n < 0)
            raise KPoolError(f"{op}: request {b}: input_row_offsets are "
                             "reversed")
        needed = []
        for slot, n in zip(slot_list, counts):
            pools = (self._tokens[slot] + n) // self.kpool
            needed.append(max(0, -(-pools // self.page_size)
                              - len(self._pages[slot])))
        cache = np.array([self._tokens[s] for s in slot_list], dtype=np.uint32)
        if sum(needed) > len(self._free):
            raise KPoolError(f"{op}: the call needs {sum(needed)} new pages, "
                             f"{len(self._free)} are free")
        taken = []
        for slot, extra in zip(slot_list, needed):
            for _ in range(extra):
                page = self._free.pop()
                self._pages[slot].append(page)
                taken.append((slot, page))
        width = max([len(self._pages[s]) for s in slot_list] + [1])
        table = np.full((len(slot_list), width), -1, dtype=np.int64)
        for b, slot in enumerate(slot_list):
            table[b, :len(self._pages[slot])] = self._pages[slot]
        try:
            self.kernels.step(self.tail, k, gate, self._ape, iro, cache,
                              np.array(slot_list, dtype=np.uint32),
                              block_table=table, cache_keys=self.cache_keys,
                              cache_scales=self.cache_scales)
        except Exception:
            for slot, page in reversed(taken):
                self._pages[slot].pop()
                self._free.append(page)
            raise
        stored = []
        for slot, n in zip(slot_list, counts):
            c = self._tokens[slot]
            stored += [(slot, p) for p in range(c // self.kpool,
                                                (c + n) // self.kpool)]
            self._tokens[slot] = c + n
            self._last[slot] = (c, c + n)
        return stored

    def accept(self, slot, accepted):
        """Speculative decoding: keeps the first ``accepted`` of the tokens
        the slot's last :meth:`step` brought and continues the slot at that
        length. Its entries at and after the first rejected position are
        re-produced, into the same entries, by the next steps (the contract:
        no rollback operation; the pages stay). Raises
        :class:`KPoolError`, changing nothing, when ``accepted`` is out of
        range or the ring window cannot hold the pending pool's members
        (see :func:`ring_holds_pending`)."""
        slot = self._slot("accept", slot)
        start, end = self._last[slot]
        accepted = _int("accept", "accepted", accepted, 0, end - start)
        length = start + accepted
        if not ring_holds_pending(self.kpool, self.ring_window, length, end):
            raise KPoolError(
                f"accept: slot {slot}: continuing at length {length} after "
                f"a step that brought positions [{start}, {end}) needs a "
                f"ring window of at least {end - (length // self.kpool) * self.kpool}"
                f" rows, the store has {self.ring_window}")
        self._tokens[slot] = length
        self._last[slot] = (start, length)

    def tokens(self, slot):
        """Tokens the slot has seen (its next cache length)."""
        return self._tokens[self._slot("tokens", slot)]

    def num_pools(self, slot):
        """Complete pools of the slot (ids ``0 .. num_pools - 1``)."""
        return self.tokens(slot) // self.kpool

    def pages(self, slot):
        """The slot's pages, in block-table order."""
        return list(self._pages[self._slot("pages", slot)])

    def entry(self, slot, pool):
        """Pool ``pool`` of the slot as stored: ``(codes uint8 [head_dim],
        scale float32)`` for FP8, ``(values [head_dim], None)`` otherwise
        (copies)."""
        slot = self._slot("entry", slot)
        pool = _int("entry", "pool", pool, 0, self.num_pools(slot) - 1)
        page = self._pages[slot][pool // self.page_size]
        row = pool % self.page_size
        scale = (None if self.cache_scales is None
                 else np.float32(self.cache_scales[page, row]))
        return self.cache_keys[page, row].copy(), scale

    def release(self, slot):
        """Forgets the slot's tokens and returns its pages to the free
        list (for a new request)."""
        slot = self._slot("release", slot)
        self._free.extend(reversed(self._pages[slot]))
        self._pages[slot] = []
        self._tokens[slot] = 0
        self._last[slot] = (0, 0)
        self.tail[slot] = 0
