"""Arrays of other libraries: DLPack, the CUDA array interface, PyTorch.

What the ops need of an array is its address, shape, strides (in elements)
and dtype. numpy arrays have them; other libraries' arrays are read without
a copy: host arrays exposing ``__dlpack__`` on the CPU (PyTorch CPU tensors,
bfloat16 as its uint16 bit patterns) become numpy aliases, device arrays
(``__cuda_array_interface__``, ``__dlpack__`` on a CUDA device) a
:class:`Strided` description. A framework's refusal to export an array (a
tensor that requires grad, a meta tensor, a broken capsule) becomes a
:class:`kpool.KPoolError` naming the operand.

The other direction: an op's results are the caller's kind of array. A
:class:`Family` allocates outputs as numpy arrays or as PyTorch tensors on
the caller's device (bf16 as ``torch.bfloat16``), and names dtypes the way
the caller spells them.
"""

import ctypes
import operator

import numpy as np

from ._capi import KPoolError

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


class Strided:
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
        return Strided(self.address, self.shape, self.strides, dtype,
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


def dlpack_tensor(op, name, x, capsule):
    """The Strided of a legacy DLPack capsule of `x`. The capsule stays
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
    return Strided((t.data or 0) + t.byte_offset, shape, strides, dtype,
                    device=(t.device.device_type, t.device.device_id),
                    source=x, owner=capsule)


def numpy_alias(a):
    """A writable numpy array over the memory of the host Strided `a`,
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



_ARRAY_TYPES = (np.ndarray, int, float, str, type(None))


def is_torch(x):
    """Whether `x` is a PyTorch tensor (without importing torch)."""
    return any(c.__module__ == "torch" and c.__name__ == "Tensor"
               for c in type(x).__mro__)


def _export(op, name, x, stream=None):
    """`x.__dlpack__(...)` with a framework's refusal as a KPoolError naming
    the operand: a tensor that requires grad, a meta tensor, an array that
    cannot be exported."""
    if is_torch(x):
        if x.requires_grad:
            raise KPoolError(f"{op}: '{name}' requires grad; kpool's ops are "
                             f"not differentiable: pass {name}.detach()")
        if x.device.type == "meta":
            raise KPoolError(f"{op}: '{name}' is a meta tensor (it has no "
                             "data); the ops run on CPU tensors, or on CUDA "
                             "tensors with a CUDA kernel set (kpool.torch's "
                             "ops have meta implementations)")
    try:
        return x.__dlpack__() if stream is None else x.__dlpack__(
            stream=stream)
    except Exception as e:
        raise KPoolError(f"{op}: '{name}' ({type(x).__name__}) cannot be "
                         f"read through DLPack: {e}") from None


def host_array(op, name, x):
    """`x` as a numpy array without a copy when it is a host array of
    another library: anything with ``__dlpack__`` on the DLPack CPU device
    (numpy, PyTorch CPU tensors, ...); bfloat16 becomes its uint16 bit
    patterns. The alias is writable, as the producer's own array is.
    Device arrays are refused with an error: these ops run on host memory.
    Anything else is returned as it is."""
    if isinstance(x, (Strided,) + _ARRAY_TYPES) or isinstance(x, np.generic):
        return x
    interface = _cuda_interface(x)
    if interface is None and not hasattr(x, "__dlpack__"):
        return x
    if is_torch(x) and x.device.type == "meta":
        _export(op, name, x)  # refuses it, naming the operand
    device = _dlpack_device(x)
    if interface is not None or (device is not None
                                 and device[0] != _DLPACK_CPU):
        where = (f"DLPack device {device}" if interface is None
                 else "device memory (__cuda_array_interface__)")
        raise KPoolError(f"{op}: an operand of type {type(x).__name__} lives "
                         f"on {where}; the Python ops take host arrays "
                         "(numpy or anything exposing __dlpack__ on the CPU) "
                         "unless they run on a KernelSet(target='cuda')")
    return numpy_alias(dlpack_tensor(op, name, x, _export(op, name, x)))


def from_cuda_interface(op, name, x, interface):
    """The Strided of a __cuda_array_interface__ (v0 to v3) dict."""
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
    return Strided(address, shape, strides, dtype, readonly=bool(readonly),
                    source=x, stream=interface.get("stream"))


def from_dlpack_device(op, name, x, device, stream):
    """The Strided of a DLPack array on a CUDA device, exported for
    `stream` (a CUstream, None: the legacy default stream) as the DLPack
    protocol asks: the producer orders its pending work before it."""
    if device[0] not in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
        where = _DLPACK_DEVICE_NAMES.get(device[0], "DLPack device")
        raise KPoolError(f"{op}: '{name}' ({type(x).__name__}) lives on "
                         f"{where} {device}; a CUDA kernel set takes CUDA "
                         "device arrays (DLPack device type 2 or 13, or "
                         "__cuda_array_interface__)")
    # DLPack's stream argument: 1 is the legacy default stream (never 0).
    capsule = _export(op, name, x, 1 if stream is None else stream)
    return dlpack_tensor(op, name, x, capsule)


def call_stream(op, stream, producers):
    """The stream a CUDA call runs on, as a CUstream int or None (NULL: the
    legacy default stream): `stream` when given (not None); else the one
    stream that the __cuda_array_interface__ operands name (`producers`:
    (name, stream) pairs, stream None or absent: nothing to order; 1 the
    legacy default stream, 2 the per-thread one, else a CUstream); else
    None. Never a stream of its own."""
    if stream is not None:
        return stream_handle(stream)
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


def device_operands(op, arguments, skip=()):
    """Replaces, in `arguments` (an op's arguments by name, ``stream``
    among them), every device array by its Strided, without a copy, and
    sets ``stream`` to the call's stream (see call_stream): first the
    __cuda_array_interface__ operands, whose streams choose it, then the
    DLPack ones, exported for that stream. Others stay as they are (host
    arrays are refused later, by the view)."""
    interfaces, dlpack = [], []
    for name, value in arguments.items():
        if name in skip or name == "stream" or isinstance(
                value, (Strided,) + _ARRAY_TYPES):
            continue
        interface = _cuda_interface(value)
        if interface is not None:
            arguments[name] = from_cuda_interface(op, name, value, interface)
            interfaces.append((name, arguments[name].stream))
        elif hasattr(value, "__dlpack__"):
            dlpack.append(name)
    stream = call_stream(op, arguments.get("stream"), interfaces)
    devices = {}
    for name in dlpack:
        device = _dlpack_device(arguments[name])
        arguments[name] = from_dlpack_device(op, name, arguments[name],
                                             device, stream)
        devices.setdefault(device[1], name)
    if len(devices) > 1:
        (d0, n0), (d1, n1) = list(devices.items())[:2]
        raise KPoolError(f"{op}: '{n0}' is on CUDA device {d0} and '{n1}' "
                         f"on device {d1}; one call runs on one device")
    arguments["stream"] = stream


def stream_handle(stream):
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
                    f"with cuda_stream, ptr or handle, got "
                    f"{type(stream).__name__}")


# --- The caller's kind of array ---------------------------------------------

#: numpy dtypes by PyTorch's names (bf16 is kpool's uint16 bit patterns;
#: PyTorch has no uint32: its metadata is int32).
_TORCH_NAMES = {np.dtype(np.uint16): "bfloat16",
                np.dtype(np.float16): "float16",
                np.dtype(np.float32): "float32",
                np.dtype(np.int32): "int32", np.dtype(np.uint32): "int32",
                np.dtype(np.uint8): "uint8", np.dtype(np.int64): "int64",
                np.dtype(np.uint64): "int64"}


class Family:
    """The caller's kind of array: numpy, or PyTorch tensors on one device
    (``device``). Allocates outputs and names dtypes that way."""

    def __init__(self, torch_device=None):
        self.torch_device = torch_device

    @staticmethod
    def of(values):
        """The family of a call's operands: PyTorch when one of them is a
        tensor (on that tensor's device), else numpy."""
        for v in values:
            if is_torch(v):
                return Family(v.device)
        return Family()

    @property
    def torch(self):
        return self.torch_device is not None

    def zeros(self, shape, dtype):
        """Zeros of `shape` and numpy `dtype` (bf16 as uint16) in this
        family: torch.bfloat16 for bf16, int32 for uint32 metadata."""
        if not self.torch:
            return np.zeros(shape, dtype)
        import torch
        return torch.zeros(tuple(int(n) for n in shape),
                           dtype=getattr(torch, _TORCH_NAMES[np.dtype(dtype)]),
                           device=self.torch_device)

    def dtype_name(self, dtype):
        """How the caller spells numpy `dtype` (as kpool holds it)."""
        dtype = np.dtype(dtype)
        if self.torch:
            return "torch." + _TORCH_NAMES.get(dtype, str(dtype))
        return str(dtype)


def dtype_name(x, held):
    """How the caller spells the dtype of operand `x`, held by kpool as
    numpy dtype `held`: a PyTorch tensor's own dtype, else numpy's."""
    if is_torch(x):
        return str(x.dtype)
    return str(np.dtype(held)) if held is not None else type(x).__name__
