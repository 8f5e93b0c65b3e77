"""From Python values to the C API's argument structs.

An op's operands arrive as numpy arrays, :class:`kpool.interop.Strided`
device arrays, lists and numbers; the kernel ABI table (kpool._capi) says
what each must be: a view of an element kind and rank, metadata (uint32
values, int32 accepted), or a scalar. :func:`build_args` checks each operand
by the table and writes the kernel's argument struct (KPool<Name>Args) at
the table's offsets; values' own rules (ranges of a configuration, shapes
against each other, the metadata request by request) are the C++ core's.

Errors: TypeError for a value of the wrong type or dtype, KPoolError for
the rest, each naming the op and the operand; dtypes are named as the
caller spells them (numpy, or torch for PyTorch tensors).
"""

import ctypes
import operator

import numpy as np

from . import _capi
from ._capi import KPoolError
from .interop import Family, Strided, dtype_name, is_torch

#: Metadata in which -1 is padding (stored as its uint32 bit pattern).
PADDED = frozenset({"block_table"})


def int_value(op, name, value, low=-2**63, high=2**63 - 1):
    """`value` as a Python int in ``[low, high]`` (default: int64).

    Accepts ints and numpy integers (anything with ``__index__``); rejects
    bools, floats, strings and the rest with TypeError, and values out of
    range with KPoolError (a ValueError), naming `name`: nothing is
    truncated, rounded or wrapped. The ranges of a configuration's values
    are the library's (validateConfig); this only keeps a Python int from
    wrapping on its way there.
    """
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(f"{op}: '{name}' must be an integer, got "
                        f"{type(value).__name__} {value!r}")
    value = operator.index(value)
    if not low <= value <= high:
        raise KPoolError(f"{op}: '{name}' = {value} is not in [{low}, "
                         f"{high}]")
    return value


def bool_value(op, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: '{name}' must be True or False, got "
                        f"{type(value).__name__} {value!r}")
    return bool(value)


def choice(op, name, value, names):
    """`value`, one of `names` (the library's names of an enum)."""
    if not isinstance(value, (str, type(None))) or value not in names:
        raise KPoolError(f"{op}: {name} must be one of "
                         + ", ".join(repr(c) for c in names)
                         + f", got {value!r}")
    return value


def _want(family, dtypes):
    return " or ".join(family.dtype_name(d) for d in dtypes)


def check_array(op, name, array, rank, dtypes=None, source=None):
    """Checks that `array` is a numpy array (or a device array's Strided)
    of one of `dtypes`, when given, with `rank` dimensions. `source` is the
    caller's object (named in messages)."""
    source = array if source is None else source
    family = Family.of([source])
    if not isinstance(array, (np.ndarray, Strided)):
        raise TypeError(f"{op}: '{name}' must be an array, got "
                        f"{type(source).__name__}")
    if dtypes is not None and array.dtype not in dtypes:
        if array.dtype.byteorder == ">":  # numpy prints '>f4' as float32
            got = array.dtype.str
        else:
            got = dtype_name(source, array.dtype)
        raise TypeError(f"{op}: '{name}' must have dtype "
                        f"{_want(family, dtypes)}, got {got}")
    if array.ndim != rank:
        raise KPoolError(f"{op}: '{name}' must have rank {rank}, got shape "
                         f"{list(array.shape)}")


def view(op, name, array, rank, writable=False, device=False):
    """A KPoolView of `array` (checked: no copy), with strides in elements.
    With `device` (a CUDA kernel set) the array must be device memory (a
    Strided; an empty host array holds no memory and passes)."""
    if device and isinstance(array, np.ndarray) and array.size:
        raise KPoolError(f"{op}: '{name}' is a host array (numpy.ndarray); "
                         "a CUDA kernel set takes device arrays (anything "
                         "exposing __cuda_array_interface__, or __dlpack__ "
                         "on a CUDA device)")
    size = array.itemsize
    if isinstance(array, Strided):
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
    v = _capi.View()
    v.data = address if array.size else None
    v.rank = rank
    for d in range(rank):
        v.sizes[d] = array.shape[d]
        v.strides[d] = strides[d]
    return v


_U32 = (np.dtype(np.uint32), np.dtype(np.int32))


def metadata(op, name, values, rank=1, source=None):
    """Metadata (offsets, cache lengths, slots, block tables) as a uint32
    array, a view when it already is 32-bit: any integer array or (nested)
    list whose values are unsigned 32-bit (-1 padding too for PADDED
    operands). A device array (Strided) must be uint32 or int32 already:
    its values are device memory and are passed as they are."""
    source = values if source is None else source
    if isinstance(values, Strided):
        check_array(op, name, values, rank, _U32, source)
        return values.retyped(np.uint32)
    array = values if isinstance(values, np.ndarray) else np.asarray(values)
    if array.size == 0 and array.dtype.kind == "f":
        array = array.astype(np.uint32)  # np.asarray([]) is float64
    if array.ndim != rank:
        raise KPoolError(f"{op}: '{name}' must have rank {rank}, got shape "
                         f"{list(array.shape)}")
    low = -1 if name in PADDED else 0
    if array.dtype == object:
        # numpy keeps Python ints beyond 64 bits as objects.
        items = array.reshape(-1).tolist()
        if all(isinstance(v, int) and not isinstance(v, bool)
               for v in items):
            bad = next((i for i, v in enumerate(items)
                        if not low <= v <= 0xFFFFFFFF), None)
            if bad is not None:
                raise KPoolError(f"{op}: {name}[{bad}] = {items[bad]} is not "
                                 "an unsigned 32-bit value")
            array = np.array(items, dtype=np.int64).reshape(array.shape)
    if array.dtype == np.uint32:
        return array
    if array.dtype == np.int32 and (low < 0 or not (array < 0).any()):
        return array.view(np.uint32)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{op}: '{name}' must hold integers, got dtype "
                        f"{dtype_name(source, array.dtype)}")
    bad = (array < low) | (array > 0xFFFFFFFF)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        where = ", ".join(str(i) for i in at)
        what = ("is not a page id (uint32, or -1 padding)" if low < 0
                else "is negative; offsets, cache lengths and slots are "
                     "unsigned" if array.dtype == np.int32
                else "is not an unsigned 32-bit value")
        raise KPoolError(f"{op}: {name}[{where}] = {int(array[at])} {what}")
    return array.astype(np.int64).astype(np.uint32)


def status_pointer(op, status, device):
    """The address of the status word `status` (None: no status word): an
    array of at least one 64-bit integer, writable (numpy or any host array
    on a CPU set; a device array on a CUDA set), whose first element is the
    word, or such an address as a positive int. Its alignment is checked by
    the library."""
    if status is None:
        return None
    if isinstance(status, (bool, np.bool_)) or (
            isinstance(status, (int, np.integer)) and int(status) <= 0):
        raise KPoolError(f"{op}: 'status' must be an array of one uint64 or "
                         f"a positive address, got {status!r}")
    if isinstance(status, (int, np.integer)):
        return int(status)
    iface = getattr(status, "__cuda_array_interface__", None) if device \
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
        ok = (isinstance(status, np.ndarray)
              and status.dtype in (np.uint64, np.int64) and status.size >= 1
              and status.flags.writeable)
        address = status.ctypes.data if ok else 0
    if not ok:
        raise KPoolError(f"{op}: 'status' must be a writable array of at "
                         "least one uint64 (the status word)")
    return address


def operand(op, o, value, element, cache_entry, device, source=None):
    """The KPoolView (or scalar) of operand `o` (a _capi.Operand) of value
    `value`: numpy dtypes from its kind, `element` and `cache_entry` being
    the kernel set's."""
    if o.role == "scalar":
        return int_value(op, o.name, value, -2**31, 2**31 - 1)
    written = o.role == "output"
    if o.kind in ("u32", "i32"):
        if written or isinstance(value, Strided):
            dtypes = _U32 if o.kind == "u32" else (np.dtype(np.int32),)
            check_array(op, o.name, value, o.rank, dtypes, source)
            if isinstance(value, Strided):
                value = value.retyped(dtypes[0])
            elif value.dtype == np.int32 and o.kind == "u32":
                value = value.view(np.uint32)
        else:
            value = metadata(op, o.name, value, o.rank, source)
    else:
        dtype = {"element": element, "cache_entry": cache_entry,
                 "f32": np.dtype(np.float32),
                 "cache_scale": np.dtype(np.float32)}[o.kind]
        check_array(op, o.name, value, o.rank, (dtype,), source)
    return view(op, o.name, value, o.rank, written, device)


def build_args(kernel, values):
    """Kernel `kernel`'s argument struct (a ctypes buffer of its size) with
    each of `values` (name -> KPoolView or int) at the table's offset."""
    args = (ctypes.c_char * kernel.args_size)()
    for o in kernel.operands:
        if o.role == "context":
            continue
        v = values[o.name]
        if o.role == "scalar":
            ctypes.c_int32.from_buffer(args, o.offset).value = v
        else:
            ctypes.memmove(ctypes.byref(args, o.offset), ctypes.byref(v),
                           ctypes.sizeof(v))
    return args


def family_of(values):
    """The caller's kind of array for a call's operands (see Family)."""
    return Family.of(values)


__all__ = ["KPoolError", "bool_value", "build_args", "check_array", "choice",
           "family_of", "int_value", "is_torch", "metadata", "operand",
           "status_pointer", "view"]
