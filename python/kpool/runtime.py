"""The kpool kernels on numpy arrays, through libKPoolCAPI.so.

Every array operand may be any strided numpy view (slices, transposes, a
ring aliased into a larger page) as long as its strides are whole elements:
the view's strides are passed to the kernels in elements, nothing is copied.
Outputs are written in place (``out=``, ``tail``) or allocated and returned.
Metadata (offsets, cache lengths, slots) may be any integer arrays or lists;
uint32/int32 arrays are passed as they are, others are converted.

Arrays of other libraries are taken without a copy too: host arrays
exposing ``__dlpack__`` (PyTorch CPU tensors; bfloat16 as its uint16 bit
patterns) everywhere, and device arrays (``__cuda_array_interface__``, or
``__dlpack__`` on a CUDA device) by the ops of a CUDA :class:`KernelSet`,
on the call's stream (see there).

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


# --- Arrays of other libraries: DLPack and the CUDA array interface --------

_DLPACK_CPU = 1           # kDLCPU
_DLPACK_CUDA = 2          # kDLCUDA
_DLPACK_CUDA_MANAGED = 13  # kDLCUDAManaged
_DLPACK_DEVICE_NAMES = {_DLPACK_CPU: "the CPU", _DLPACK_CUDA: "CUDA",
                        _DLPACK_CUDA_MANAGED: "CUDA managed memory"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """DLTensor of dlpack.h (the legacy, unversioned capsule's layout,
    stable since DLPack 0.2): strides count elements; NULL is row-major."""
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# DLPack type codes: kDLInt, kDLUInt, kDLFloat, kDLBfloat (as its uint16
# bit patterns, kpool's bf16), kDLBool.
_DLPACK_KINDS = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}


def _dlpack_dtype(op, name, dt):
    kind = _DLPACK_KINDS.get(dt.code)
    if dt.lanes == 1 and kind == "bf" and dt.bits == 16:
        return np.dtype(np.uint16)
    if (dt.lanes == 1 and kind not in (None, "bf") and dt.bits % 8 == 0
            and dt.bits):
        try:
            return np.dtype(f"{kind}{dt.bits // 8}")
        except TypeError:
            pass
    raise TypeError(f"{op}: '{name}' has DLPack dtype (code {dt.code}, "
                    f"{dt.bits} bits, {dt.lanes} lanes), which kpool does not "
                    "take")


class _Strided:
    """An array described by address, shape, strides in elements and
    dtype, outside numpy: a device array (what `_view` passes to a CUDA
    kernel set) or a DLPack tensor before it becomes a numpy alias.
    ``source`` is the caller's object (returned in its place), ``owner``
    what keeps the memory alive (a DLPack capsule), ``stream`` the stream
    its __cuda_array_interface__ names."""

    __slots__ = ("address", "shape", "strides", "dtype", "readonly",
                 "device", "source", "owner", "stream")

    def __init__(self, address, shape, strides, dtype, *, readonly=False,
                 device=None, source=None, owner=None, stream=None):
        self.address, self.shape = address, tuple(shape)
        self.strides, self.dtype = tuple(strides), np.dtype(dtype)
        self.readonly, self.device = readonly, device
        self.source, self.owner, self.stream = source, owner, stream

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    itemsize = property(lambda self: self.dtype.itemsize)

    def retyped(self, dtype):
        """The same memory as `dtype` of the same size (int32 as uint32)."""
        return _Strided(self.address, self.shape, self.strides, dtype,
                        readonly=self.readonly, device=self.device,
                        source=self.source, owner=self.owner,
                        stream=self.stream)

    @property
    def __cuda_array_interface__(self):
        """The array described by the CUDA array interface (v3), for code
        that reads device arrays that way."""
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.address, self.readonly), "version": 3,
                "strides": tuple(st * self.itemsize for st in self.strides),
                "stream": self.stream}

    def __repr__(self):
        return (f"<{self.dtype} {list(self.shape)} at {self.address:#x}, "
                f"strides {list(self.strides)}>")


def _dlpack_tensor(op, name, x, capsule):
    """The _Strided of a legacy DLPack capsule of `x`. The capsule stays
    unconsumed (its destructor frees the tensor) and owns the memory."""
    if not _capsule_valid(capsule, b"dltensor"):
        raise KPoolError(f"{op}: '{name}': __dlpack__ of "
                         f"{type(x).__name__} did not return a DLPack "
                         "capsule named 'dltensor'")
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    shape = [t.shape[d] for d in range(t.ndim)]
    if t.strides:
        strides = [t.strides[d] for d in range(t.ndim)]
    else:
        strides, run = [0] * t.ndim, 1
        for d in reversed(range(t.ndim)):
            strides[d], run = run, run * shape[d]
    dtype = _dlpack_dtype(op, name, t.dtype)
    return _Strided((t.data or 0) + t.byte_offset, shape, strides, dtype,
                    device=(t.device.device_type, t.device.device_id),
                    source=x, owner=capsule)


def _numpy_alias(a):
    """A writable numpy array over the memory of the host _Strided `a`,
    keeping its owner (and the producer) alive."""
    if a.size == 0 or not a.address:
        return np.zeros(a.shape, a.dtype)
    size = a.itemsize
    lo = sum((n - 1) * st for n, st in zip(a.shape, a.strides) if st < 0)
    hi = sum((n - 1) * st for n, st in zip(a.shape, a.strides) if st > 0)
    buf = (ctypes.c_char * ((hi - lo + 1) * size)).from_address(
        a.address + lo * size)
    buf._kpool_owner = (a.owner, a.source)
    return np.ndarray(a.shape, a.dtype, buffer=buf, offset=-lo * size,
                      strides=[st * size for st in a.strides])


def _cuda_interface(x):
    """`x.__cuda_array_interface__`, or None when `x` has none (or cannot
    describe itself by it, as PyTorch's bfloat16 tensors, but has DLPack)."""
    try:
        return x.__cuda_array_interface__
    except AttributeError:
        return None
    except Exception:
        if hasattr(x, "__dlpack__"):
            return None
        raise


def _dlpack_device(x):
    if not hasattr(x, "__dlpack__"):
        return None
    if not hasattr(x, "__dlpack_device__"):
        return (_DLPACK_CPU, 0)
    return tuple(int(d) for d in x.__dlpack_device__())


def _host_array(op, x):
    """`x` as a numpy array without a copy when it is a host array of
    another library: anything with ``__dlpack__`` on the DLPack CPU device
    (numpy, PyTorch CPU tensors, ...); bfloat16 becomes its uint16 bit
    patterns. The alias is writable, as the producer's own array is.
    Device arrays are refused with an error: these ops run on host memory.
    Anything else is returned as it is."""
    if isinstance(x, (np.ndarray, _Strided, int, float, str, type(None))):
        return x
    interface = _cuda_interface(x)
    if interface is None and not hasattr(x, "__dlpack__"):
        return x
    device = _dlpack_device(x)
    if interface is not None or (device is not None
                                 and device[0] != _DLPACK_CPU):
        where = (f"DLPack device {device}" if interface is None
                 else "device memory (__cuda_array_interface__)")
        raise KPoolError(f"{op}: an operand of type {type(x).__name__} lives "
                         f"on {where}; the Python ops take host arrays "
                         "(numpy or anything exposing __dlpack__ on the CPU) "
                         "unless they run on a KernelSet(target='cuda')")
    return _numpy_alias(_dlpack_tensor(op, "operand", x, x.__dlpack__()))


def _from_cuda_interface(op, name, x, interface):
    """The _Strided of a __cuda_array_interface__ (v0 to v3) dict."""
    def bad(what):
        return KPoolError(f"{op}: '{name}' ({type(x).__name__}): its "
                          f"__cuda_array_interface__ {what}")
    if not isinstance(interface, dict):
        raise bad(f"is a {type(interface).__name__}, not a dict")
    try:
        shape = tuple(operator.index(n) for n in interface["shape"])
        typestr = interface["typestr"]
        address, readonly = interface["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"lacks a valid shape, typestr or data ({e!r})") from None
    if interface.get("mask") is not None:
        raise bad("has a mask; kpool takes unmasked arrays")
    try:
        dtype = np.dtype(typestr)
    except TypeError:
        raise bad(f"typestr {typestr!r} is not an array-interface type "
                  "string") from None
    if dtype.kind not in "iufb" or dtype.fields or dtype.subdtype:
        raise bad(f"typestr {typestr!r} is no integer or float type")
    size = dtype.itemsize
    if any(n < 0 for n in shape):
        raise bad(f"shape {list(shape)} has a negative extent")
    if interface.get("strides") is None:  # row-major
        strides, run = [0] * len(shape), 1
        for d in reversed(range(len(shape))):
            strides[d], run = run, run * shape[d]
    else:
        byte_strides = [operator.index(s) for s in interface["strides"]]
        if len(byte_strides) != len(shape):
            raise bad(f"has {len(byte_strides)} strides for shape "
                      f"{list(shape)}")
        for d, st in enumerate(byte_strides):
            if st % size:
                raise KPoolError(
                    f"{op}: '{name}' has a stride of {st} bytes in dimension "
                    f"{d}, not a whole number of {size}-byte elements; kpool "
                    "views count strides in elements")
        strides = [st // size for st in byte_strides]
    address = operator.index(address or 0)
    if address == 0 and int(np.prod(shape, dtype=np.int64)):
        raise bad("has a NULL data pointer for a non-empty array")
    return _Strided(address, shape, strides, dtype, readonly=bool(readonly),
                    source=x, stream=interface.get("stream"))


def _from_dlpack_device(op, name, x, device, stream):
    """The _Strided of a DLPack array on a CUDA device, exported for
    `stream` (a CUstream, None: the legacy default stream) as the DLPack
    protocol asks: the producer orders its pending work before it."""
    if device[0] not in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
        where = _DLPACK_DEVICE_NAMES.get(device[0], "DLPack device")
        raise KPoolError(f"{op}: '{name}' ({type(x).__name__}) lives on "
                         f"{where} {device}; a CUDA kernel set takes CUDA "
                         "device arrays (DLPack device type 2 or 13, or "
                         "__cuda_array_interface__)")
    # DLPack's stream argument: 1 is the legacy default stream (never 0).
    capsule = x.__dlpack__(stream=1 if stream is None else stream)
    return _dlpack_tensor(op, name, x, capsule)


def _call_stream(op, stream, producers):
    """The stream a CUDA call runs on, as a CUstream int or None (NULL: the
    legacy default stream): `stream` when given (not None); else the one
    stream that the __cuda_array_interface__ operands name (`producers`:
    (name, stream) pairs, stream None or absent: nothing to order; 1 the
    legacy default stream, 2 the per-thread one, else a CUstream); else
    None. Never a stream of its own."""
    if stream is not None:
        return _stream_handle(stream)
    chosen = None
    for name, s in producers:
        if s is None:
            continue
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise KPoolError(f"{op}: '{name}': __cuda_array_interface__ "
                             f"stream {s!r} is not a stream (1: the legacy "
                             "default stream, 2: the per-thread default "
                             "stream, else a CUstream; 0 is disallowed)")
        if chosen is not None and chosen[1] != s:
            raise KPoolError(
                f"{op}: '{chosen[0]}' and '{name}' come from different "
                f"streams ({chosen[1]:#x} and {s:#x}, their "
                "__cuda_array_interface__); pass stream= (after ordering "
                "both producers' work before it)")
        chosen = (name, s)
    return None if chosen is None or chosen[1] == 1 else chosen[1]


def _device_operands(op, arguments):
    """Replaces, in `arguments` (an op's arguments by name, ``stream``
    among them), every device array by its _Strided, without a copy, and
    sets ``stream`` to the call's stream (see _call_stream): first the
    __cuda_array_interface__ operands, whose streams choose it, then the
    DLPack ones, exported for that stream. Others stay as they are (host
    arrays are refused later, by _view)."""
    interfaces, dlpack = [], []
    for name, value in arguments.items():
        if name in ("self", "stream") or isinstance(
                value, (np.ndarray, _Strided, int, float, str, type(None))):
            continue
        interface = _cuda_interface(value)
        if interface is not None:
            arguments[name] = _from_cuda_interface(op, name, value, interface)
            interfaces.append((name, arguments[name].stream))
        elif hasattr(value, "__dlpack__"):
            dlpack.append(name)
    stream = _call_stream(op, arguments.get("stream"), interfaces)
    devices = {}
    for name in dlpack:
        device = _dlpack_device(arguments[name])
        arguments[name] = _from_dlpack_device(op, name, arguments[name],
                                              device, stream)
        devices.setdefault(device[1], name)
    if len(devices) > 1:
        (d0, n0), (d1, n1) = list(devices.items())[:2]
        raise KPoolError(f"{op}: '{n0}' is on CUDA device {d0} and '{n1}' "
                         f"on device {d1}; one call runs on one device")
    arguments["stream"] = stream


def _sources(result):
    """The caller's objects in place of the _Strided a method returns."""
    if isinstance(result, tuple):
        return tuple(_sources(r) for r in result)
    return result.source if isinstance(result, _Strided) else result


def _host_arrays(fn):
    """Lets `fn` take arrays of other libraries: host arrays (see
    _host_array) or, when `fn` is a method of a CUDA kernel set, device
    arrays (see _device_operands), for which it returns the caller's
    objects."""
    import functools
    import inspect
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        op = fn.__name__
        if args and getattr(args[0], "target", None) == "cuda" and isinstance(
                args[0], KernelSet):
            bound = signature.bind(*args, **kwargs)
            _device_operands(op, bound.arguments)
            return _sources(fn(*bound.args, **bound.kwargs))
        args = [_host_array(op, a) for a in args]
        kwargs = {k: _host_array(op, v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)
    return wrapper


def _array(op, name, array, rank, dtype=None):
    """Checks that `array` is a numpy array (or a device array's _Strided)
    of `dtype`, when given, with `rank` dimensions."""
    if not isinstance(array, (np.ndarray, _Strided)):
        raise TypeError(f"{op}: '{name}' must be a numpy array, got "
                        f"{type(array).__name__}")
    if dtype is not None and array.dtype != dtype:
        raise TypeError(f"{op}: '{name}' must have dtype {dtype}, got "
                        f"{array.dtype}")
    if array.ndim != rank:
        raise KPoolError(f"{op}: '{name}' must have rank {rank}, got shape "
                         f"{list(array.shape)}")


def _view(op, name, array, dtype, rank, writable=False, device=False):
    """A KPoolView of `array` (no copy); checks dtype, rank and strides.
    With `device` (a CUDA kernel set) the array must be device memory (a
    _Strided; an empty host array holds no memory and passes)."""
    if device and isinstance(array, np.ndarray) and array.size:
        raise KPoolError(f"{op}: '{name}' is a host array (numpy.ndarray); "
                         "a CUDA kernel set takes device arrays (anything "
                         "exposing __cuda_array_interface__, or __dlpack__ "
                         "on a CUDA device)")
    _array(op, name, array, rank, dtype)
    size = array.itemsize
    if isinstance(array, _Strided):
        if writable and array.readonly:
            raise KPoolError(f"{op}: '{name}' is written but the array is "
                             "read-only")
        strides, address = list(array.strides), array.address
    else:
        if writable and not array.flags.writeable:
            raise KPoolError(f"{op}: '{name}' is written but the array is "
                             "read-only")
        strides = []
        for d, stride in enumerate(array.strides):
            if stride % size:
                raise KPoolError(
                    f"{op}: '{name}' has a stride of {stride} bytes in "
                    f"dimension {d}, not a whole number of {size}-byte "
                    "elements; kpool views count strides in elements (copy "
                    "the array, e.g. with numpy.ascontiguousarray)")
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

def _device_meta(op, name, array, length, dtypes, rank=1):
    """A device array of metadata, as uint32 when it is int32 (its values
    are device memory: only its dtype and shape can be checked)."""
    if array.dtype not in dtypes:
        raise TypeError(f"{op}: '{name}' must have dtype "
                        + " or ".join(str(np.dtype(d)) for d in dtypes)
                        + f", got {array.dtype} (device metadata is passed "
                        "as it is)")
    if array.ndim != rank or (length is not None and array.shape[0] != length):
        want = (f"shape [{length}]" if length is not None else f"rank {rank}")
        raise KPoolError(f"{op}: '{name}' must have {want}, got shape "
                         f"{list(array.shape)}")
    return array.retyped(np.uint32) if np.dtype(np.uint32) in dtypes \
        else array


_META_DTYPES = (np.dtype(np.uint32), np.dtype(np.int32))


def _meta(op, name, values, length=None):
    """Metadata as a uint32 array (a view when already 32-bit)."""
    if isinstance(values, _Strided):
        return _device_meta(op, name, values, length, _META_DTYPES)
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
    if isinstance(array, _Strided):
        return _device_meta(op, name, array, length,
                            tuple(np.dtype(d) for d in dtypes))
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
    are none).

    A CPU set's ops take host arrays: numpy, or anything exposing
    ``__dlpack__`` on the CPU (PyTorch CPU tensors; bfloat16 as its bit
    patterns), without a copy. A CUDA set's ops take device arrays, also
    without a copy: anything exposing ``__cuda_array_interface__`` or
    ``__dlpack__`` on a CUDA device (PyTorch, CuPy, JAX), metadata
    included (uint32 or int32, never read back); they return the caller's
    objects. A call runs on ``stream=`` when given, else on the stream the
    operands' ``__cuda_array_interface__`` names, else on the legacy
    default stream (DLPack operands are exported for that stream, so their
    producers order their work before it). The Python layer allocates no
    device memory and cannot read the metadata that sizes outputs: on a
    CUDA set every output (capacity-shaped where the metadata sizes it) is
    the caller's, and a missing one is a KPoolError naming it. Metadata
    checks need host metadata: ``validate`` defaults to checking on a CPU
    set and not on a CUDA set (``validate=True`` there is an error); check
    host copies first (e.g. on a CPU set), or pass ``status=`` and read
    what the kernels found.
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
        config = lib.kpoolKernelConfigDefault()
        config.target = _TARGET_CODES[self.target]
        config.elementType = _ETYPE_CODES[self.element_type]
        config.headDim, config.kpool = self.head_dim, self.kpool
        config.openmp, config.vectorSize = self.openmp, self.vector_size
        config.cache.entry = _CACHE_CODES[self.cache]
        config.cache.rotate = _ROTATE_CODES[self.rotate]
        config.cache.scale = _SCALE_CODES[self.scale]
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolKernelSetCreate(ctypes.byref(config),
                                             ctypes.byref(handle)))
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
        the ABI's description of the operand. ``validate`` None (every
        op's default) checks the metadata where it is host memory (a CPU
        set) and not where it is device memory (a CUDA set), as the C++
        ``Validation::Auto``."""
        if validate is None:
            validate = self.target != "cuda"
        kernel = _capi.kernels()[op]
        dtypes = {_capi.KIND_ELEMENT: self.dtype,
                  _capi.KIND_CACHE_ENTRY: (np.dtype(np.uint8)
                                           if self.cache == "fp8"
                                           else self.dtype),
                  _capi.KIND_U32: np.dtype(np.uint32),
                  _capi.KIND_I32: np.dtype(np.int32),
                  _capi.KIND_F32: np.dtype(np.float32),
                  _capi.KIND_CACHE_SCALE: np.dtype(np.float32)}
        device = self.target == "cuda"
        options = _capi.CallOptions(
            _status_pointer(op, operands.get("status"), device),
            _stream_handle(operands.get("stream")),
            _capi.VALIDATION_CHECK if validate else _capi.VALIDATION_TRUST)
        args = (ctypes.c_char * kernel.args_size)()
        for o in kernel.operands:
            if o.role == _capi.CONTEXT:
                continue
            if o.role == _capi.SCALAR:
                ctypes.c_int32.from_buffer(args, o.offset).value = \
                    operands[o.name]
                continue
            view = _view(op, o.name, operands[o.name], dtypes[o.kind], o.rank,
                         o.role == _capi.OUTPUT, device)
            ctypes.memmove(ctypes.byref(args, o.offset), ctypes.byref(view),
                           ctypes.sizeof(view))
        _capi.check(self._lib.kpoolCall(self._handle, kernel.id, args,
                                        kernel.args_size,
                                        ctypes.byref(options)))

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
        table = (block_table if isinstance(block_table, (np.ndarray, _Strided))
                 else np.asarray(block_table, dtype=np.int64))
        if isinstance(table, _Strided):
            table = _device_meta(op, "block_table", table, None,
                                 _META_DTYPES, rank=2)
        elif table.ndim != 2:
            raise KPoolError(f"{op}: 'block_table' must be [batch, pages], "
                             f"got shape {list(table.shape)}")
        elif table.dtype == np.int32:
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

    def _given(self, op, name, value, what):
        """`value`; on a CUDA set, a KPoolError when it is None (an output
        the caller must give: nothing is allocated on the device here)."""
        if value is None and self.target == "cuda":
            raise KPoolError(
                f"{op}: on a CUDA kernel set the caller gives the outputs: "
                f"pass '{name}' ({what}, device memory); the Python layer "
                "allocates no device memory and cannot read device "
                "metadata")
        return value

    def prepare(self, stream=None):
        """Loads what the kernels need (GPU modules) in the context of
        ``stream`` before capturing calls into a CUDA graph; nothing to do
        on the CPU. Every op takes ``stream=``: a CUstream as an int, an
        object with ``cuda_stream``/``handle``/``ptr`` (PyTorch, CuPy), or
        None for the NULL stream; GPU calls only enqueue there.

        Every op also takes ``status=``, the call's status word: a writable
        array of at least one uint64 (host memory on a CPU set, device
        memory on a CUDA set) where the kernels record the first
        bad-metadata finding their guards meet (0: none; a word holding a
        code only changes to a smaller one). :func:`status_error` decodes
        it; see docs/semantics.md, "The status word"."""
        _capi.check(self._lib.kpoolKernelSetPrepare(
            self._handle, _stream_handle(stream)))

    @_host_arrays
    def pool_offsets(self, input_row_offsets, cache_lengths, *, out=None,
                     validate=None, stream=None, status=None):
        """kpool.pool_offsets: returns ``pool_row_offsets`` ``[B+1]``
        (uint32; ``out`` if given, uint32 or int32)."""
        op = "pool_offsets"
        cache = _meta(op, "cache_lengths", cache_lengths)
        iro = _meta(op, "input_row_offsets", input_row_offsets)
        batch = cache.shape[0]
        if self._given(op, "out", out, "pool_row_offsets [B+1] uint32 or "
                       "int32") is None:
            out = np.zeros(batch + 1, dtype=np.uint32)
        target = _out_meta(op, "pool_row_offsets", out, batch + 1,
                           (np.dtype(np.uint32), np.dtype(np.int32)))
        self._call(op, validate, stream=stream, status=status, pool_row_offsets=target,
                   input_row_offsets=iro, cache_lengths=cache)
        return out

    @_host_arrays
    def compress(self, k, gate, ape, input_row_offsets, pool_row_offsets,
                 cache_lengths, *, out=None, validate=None, stream=None,
                 block_table=None, cache_keys=None, cache_scales=None,
                 status=None):
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
        self._given(op, "pool_row_offsets", pool_row_offsets,
                    "[B+1], e.g. from pool_offsets(..., out=...)")
        self._given(op, "out", out, "pooled [rows, head_dim], rows at least "
                    "pool_row_offsets[B]")
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
        self._call(op + ("_cache" if extra else ""), validate, stream=stream, status=status,
                   pooled=out, k=k, gate=gate, ape=ape,
                   input_row_offsets=iro, pool_row_offsets=pro,
                   cache_lengths=cache, **extra)
        return out

    @_host_arrays
    def seed_tail(self, tail, k, gate, input_row_offsets, cache_lengths,
                  slot_idx, num_requests=None, *, validate=None, stream=None,
                  status=None):
        """kpool.seed_tail: updates ``tail`` ``[max_slots, 2, R, head_dim]``
        (``R >= kpool`` the ring window) in place and returns it: each
        request's last ``R`` positions that the call brings, in ring rows
        ``position mod R``. ``num_requests`` defaults to the batch size."""
        op = "seed_tail"
        iro, cache, slots, n = _ring_metadata(
            op, input_row_offsets, cache_lengths, slot_idx, num_requests)
        self._call(op, validate, stream=stream, status=status, tail=tail, k=k, gate=gate,
                   input_row_offsets=iro, cache_lengths=cache,
                   slot_idx=slots, num_requests=n)
        return tail

    @_host_arrays
    def ring_close(self, tail, k, gate, ape, input_row_offsets, cache_lengths,
                   slot_idx, num_requests=None, *, pooled=None,
                   closed_pool=None, validate=None, stream=None,
                   block_table=None, cache_keys=None, cache_scales=None,
                   status=None):
        """kpool.ring_close: returns ``(pooled [B, head_dim], closed_pool
        [B] int32)``, into the given arrays or new ones. ``tail`` is only
        read. ``block_table``, ``cache_keys``, ``cache_scales``: the pool
        cache, as in :meth:`compress`."""
        op = "ring_close"
        iro, cache, slots, n = _ring_metadata(
            op, input_row_offsets, cache_lengths, slot_idx, num_requests)
        batch = cache.shape[0]
        if self._given(op, "pooled", pooled, "[B, head_dim]") is None:
            pooled = np.zeros((batch, self.head_dim), dtype=self.dtype)
        if self._given(op, "closed_pool", closed_pool, "[B] int32") is None:
            closed_pool = np.zeros(batch, dtype=np.int32)
        closed = _out_meta(op, "closed_pool", closed_pool, batch,
                           (np.dtype(np.int32),))
        extra = self._cache_operands(op, batch, block_table, cache_keys,
                                     cache_scales)
        self._call(op + ("_cache" if extra else ""), validate, stream=stream, status=status,
                   pooled=pooled, closed_pool=closed, tail=tail,
                   k=k, gate=gate, ape=ape, input_row_offsets=iro,
                   cache_lengths=cache, slot_idx=slots,
                   num_requests=n, **extra)
        return pooled, closed_pool

    @_host_arrays
    def step(self, tail, k, gate, ape, input_row_offsets, cache_lengths,
             slot_idx, num_requests=None, *, pooled=None, closed=None,
             closed_pool=None, pool_row_offsets=None, validate=None,
             stream=None, block_table=None, cache_keys=None,
             cache_scales=None, status=None):
        """kpool.step, the fused serving step: ring_close, pool_offsets,
        compress and seed_tail in one kernel. Updates ``tail`` in place and
        returns ``(closed [B, head_dim], closed_pool [B] int32,
        pool_row_offsets [B+1] uint32, pooled)``: ``pooled`` is the given
        array (its rows a capacity) or a new zero-filled one of
        ``floor(T / kpool) + B`` rows, the most a call of ``T`` tokens can
        complete; its first ``pool_row_offsets[B]`` rows are the pools.
        ``closed``, ``closed_pool`` and ``pool_row_offsets`` (uint32 or
        int32) may be given too (all four on a CUDA set), written in place
        and returned. ``block_table``, ``cache_keys``, ``cache_scales``: the
        pool cache, as in :meth:`compress` (every pool the step
        produces)."""
        op = "step"
        iro, cache, slots, n = _ring_metadata(
            op, input_row_offsets, cache_lengths, slot_idx, num_requests)
        batch = cache.shape[0]
        if self._given(op, "pooled", pooled, "[capacity, head_dim], "
                       "capacity floor(T / kpool) + B") is None:
            tokens = np.asarray(k).shape[0] if np.ndim(k) >= 1 else 0
            pooled = np.zeros((tokens // self.kpool + batch, self.head_dim),
                              dtype=self.dtype)
        if self._given(op, "closed", closed, "[B, head_dim]") is None:
            closed = np.zeros((batch, self.head_dim), dtype=self.dtype)
        if self._given(op, "closed_pool", closed_pool, "[B] int32") is None:
            closed_pool = np.zeros(batch, dtype=np.int32)
        if self._given(op, "pool_row_offsets", pool_row_offsets,
                       "[B+1] uint32 or int32") is None:
            pool_row_offsets = np.zeros(batch + 1, dtype=np.uint32)
        pro = _out_meta(op, "pool_row_offsets", pool_row_offsets, batch + 1,
                        _META_DTYPES)
        closed_ids = _out_meta(op, "closed_pool", closed_pool, batch,
                               (np.dtype(np.int32),))
        extra = self._cache_operands(op, batch, block_table, cache_keys,
                                     cache_scales)
        self._call(op + ("_cache" if extra else ""), validate, stream=stream, status=status,
                   closed=closed, closed_pool=closed_ids,
                   pool_row_offsets=pro, pooled=pooled, tail=tail, k=k,
                   gate=gate, ape=ape, input_row_offsets=iro,
                   cache_lengths=cache, slot_idx=slots,
                   num_requests=n, **extra)
        return closed, closed_pool, pool_row_offsets, pooled


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
        config = lib.kpoolKernelConfigDefault()
        config.kpool, config.poolOffsetsOnly = self.kpool, True
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolKernelSetCreate(ctypes.byref(config),
                                             ctypes.byref(handle)))
        self._lib = lib
        self._handle = handle


def _geometry(op, name, array, rank, dim):
    _array(op, name, array, rank)
    return array.shape[dim]


@_host_arrays
def pool_offsets(input_row_offsets, cache_lengths, kpool, *, out=None,
                 validate=None, **options):
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
             *, out=None, validate=None, **options):
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
              num_requests=None, *, kpool=None, validate=None, **options):
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
               validate=None, **options):
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


def _store_slot(op, slot, max_slots):
    """`slot` as an int in ``[0, max_slots)``, else a KPoolError naming
    `op` (the stores' slot argument)."""
    slot = _int(op, "slot", slot, -2**63)
    if not 0 <= slot < max_slots:
        raise KPoolError(f"{op}: slot {slot} is not in [0, max_slots = "
                         f"{max_slots})")
    return slot


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

    @_host_arrays
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
        ks = [np.asarray(_host_array("step", r[1])) for r in requests] or [
            empty]
        gates = [np.asarray(_host_array("step", r[2]))
                 for r in requests] or [empty]
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
        return _store_slot(op, slot, self.max_slots)

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


def status_error(word):
    """The message the status word ``word`` (an int, or an array whose
    first element is the word) holds: None for 0, else the request and
    field the kernels found at fault, e.g. ``"request 1:
    input_row_offsets[2] is below input_row_offsets[1] (rows reversed)
    (found by the kernels; status word 0x101)"``."""
    if not isinstance(word, (int, np.integer)):
        word = int(np.asarray(word).reshape(-1)[0])
    lib = _capi.load()
    err = lib.kpoolStatusWordError(ctypes.c_uint64(int(word) & (2**64 - 1)))
    if not err:
        return None
    try:
        return lib.kpoolErrorMessage(err).decode()
    finally:
        lib.kpoolErrorDestroy(err)


def _status_pointer(op, status, device):
    """The address of the status word `status` (None: no status word): a
    writable, 8-byte aligned array of at least one 64-bit integer (numpy or
    any host array on a CPU set; a device array on a CUDA set), whose first
    element is the word, or such an address as a positive int."""
    if status is None:
        return None
    if isinstance(status, (bool, np.bool_)) or (
            isinstance(status, (int, np.integer)) and int(status) <= 0):
        raise KPoolError(f"{op}: 'status' must be an array of one uint64 or "
                         f"a positive address, got {status!r}")
    if isinstance(status, (int, np.integer)):
        address = int(status)
    else:
        a = status if device else _host_array(op, status)
        iface = getattr(a, "__cuda_array_interface__", None) if device \
            else None
        if device and iface is None:
            raise KPoolError(f"{op}: 'status' must be a device array "
                             "(__cuda_array_interface__) or an address on a "
                             "CUDA kernel set")
        if iface is not None:
            size = int(np.prod(iface["shape"])) if iface["shape"] else 1
            ok = (iface.get("typestr") in ("<u8", "<i8") and size >= 1
                  and not iface["data"][1])
            address = iface["data"][0]
        else:
            ok = (isinstance(a, np.ndarray)
                  and a.dtype in (np.uint64, np.int64) and a.size >= 1
                  and a.flags.writeable)
            address = a.ctypes.data if ok else 0
        if not ok:
            raise KPoolError(f"{op}: 'status' must be a writable array of at "
                             "least one uint64 (the status word)")
    if address % 8:
        raise KPoolError(f"{op}: the status word at {address:#x} is not "
                         "8-byte aligned (the kernels update it atomically)")
    return address


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
        return _store_slot(op, slot, self.max_slots)

    @_host_arrays
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
