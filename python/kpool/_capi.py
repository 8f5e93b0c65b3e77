"""ctypes bindings of the runtime's C API, libKPoolRuntime.so (kpool-c/View.h,
kpool-c/Runtime.h, kpool-c/Packs.h). The library needs no MLIR: it opens
the JIT (libKPoolJit.so, next to it) only when a kernel set must be
compiled, and loads kernel packs and the disk cache's kernels itself.

The kernels' C functions (kpoolCompress, ...) are declared from the kernel
ABI the library describes (kpoolKernelAbiGetKernel): :func:`kernels` lists
each kernel's operands in call order, with their role, rank and kind.

The library is looked up, in order:

1. ``$KPOOL_CAPI_LIB``: the path of the library file itself (when set, the
   only place tried; libKPoolCAPI.so, the dialect's C API, works too: it
   depends on the runtime's);
2. inside the package, ``kpool/_lib/libKPoolRuntime.so`` (the wheel);
3. next to an install: ``<prefix>/lib/libKPoolRuntime.so`` when this package
   is ``<prefix>/python/kpool`` (what ``cmake --install`` lays out);
4. the package directory itself (a copy of the library placed there);
5. the dynamic loader's search path (``LD_LIBRARY_PATH``, ldconfig).

It is loaded on first use, so ``kpool.reference`` works without it.
"""

import collections
import ctypes
import os
import threading

LIBRARY_NAME = "libKPoolRuntime.so"
ENV_VAR = "KPOOL_CAPI_LIB"

MAX_RANK = 4

# KPoolElementType
BF16 = 0
F16 = 1
F32 = 2

# KPoolTarget
TARGET_CPU = 0
TARGET_CUDA = 1

# KPoolOperandRole
OUTPUT = 0
INPUT = 1
SCALAR = 2
CONTEXT = 3

# KPoolOperandKind
KIND_ELEMENT = 0
KIND_U32 = 1
KIND_I32 = 2
KIND_F32 = 3
KIND_STREAM = 4
KIND_CACHE_ENTRY = 5
KIND_U64 = 6

CACHE_NONE = 0
CACHE_ELEMENT = 1
CACHE_FP8 = 2
ROTATE_NONE = 0
ROTATE_HADAMARD = 1
SCALE_ABSMAX = 0
SCALE_POW2 = 1

#: One operand of a kernel: ``name``, ``role`` (OUTPUT, INPUT, SCALAR, or
#: CONTEXT for the call's context: the status word, then the caller's
#: stream, always last),
#: ``rank``, ``kind`` (KIND_*) and ``shape`` ("?xD": '?' any extent, 'D'
#: head_dim, 'K' kpool).
Operand = collections.namedtuple("Operand", "name role rank kind shape")
#: One kernel: the op's ``name``, its C function and its operands in order.
Kernel = collections.namedtuple("Kernel", "name capi_function operands")


class KPoolError(ValueError):
    """An operand or its metadata is invalid; nothing was written.

    Raised for errors the runtime reports (the message names the op, the
    request and the field, e.g. ``compress: request 2: input_row_offsets[3]
    = 70 reaches past the 64 rows of 'k'``) and for operands this package
    rejects before calling it (wrong shapes, strides that are not a whole
    number of elements).
    """


class LibraryNotFoundError(OSError):
    """libKPoolRuntime.so could not be found or loaded."""


class View(ctypes.Structure):
    """KPoolView: data pointer, rank, sizes and strides in elements."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("rank", ctypes.c_int64),
        ("sizes", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


class _OperandInfo(ctypes.Structure):
    """KPoolOperandInfo."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("role", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("kind", ctypes.c_int32),
        ("shape", ctypes.c_char_p),
    ]


class _KernelInfo(ctypes.Structure):
    """KPoolKernelInfo."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("capiFunction", ctypes.c_char_p),
        ("numOperands", ctypes.c_int64),
        ("operands", ctypes.POINTER(_OperandInfo)),
    ]


class ProducedPoolStruct(ctypes.Structure):
    """KPoolProducedPool."""

    _fields_ = [
        ("slot", ctypes.c_uint32),
        ("fromRing", ctypes.c_int32),
        ("pool", ctypes.c_int64),
    ]


_ErrorP = ctypes.c_void_p
_ViewP = ctypes.POINTER(View)
_lock = threading.Lock()
_lib = None
_kernels = None


def candidate_paths():
    """The places searched for the library, in order (see module doc)."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = []
    env = os.environ.get(ENV_VAR)
    if env:
        return [env]
    paths.append(os.path.join(here, "_lib", LIBRARY_NAME))
    paths.append(os.path.normpath(os.path.join(here, "..", "..", "lib",
                                               LIBRARY_NAME)))
    paths.append(os.path.join(here, LIBRARY_NAME))
    paths.append(LIBRARY_NAME)
    return paths


def _declare(lib):
    def fn(name, restype, *argtypes):
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    c_bool, c_int32, c_int64 = ctypes.c_bool, ctypes.c_int32, ctypes.c_int64
    c_uint32, c_void_p = ctypes.c_uint32, ctypes.c_void_p
    u32p = ctypes.POINTER(ctypes.c_uint32)
    i64p = ctypes.POINTER(ctypes.c_int64)

    fn("kpoolErrorMessage", ctypes.c_char_p, _ErrorP)
    fn("kpoolErrorDestroy", None, _ErrorP)
    fn("kpoolStatusWordError", _ErrorP, ctypes.c_uint64)
    fn("kpoolElementTypeName", ctypes.c_char_p, ctypes.c_int)
    fn("kpoolKernelSetCreate", _ErrorP, ctypes.c_int, c_int64, c_int64,
       c_bool, c_int64, ctypes.POINTER(c_void_p))
    fn("kpoolKernelSetCreateForTarget", _ErrorP, ctypes.c_int, ctypes.c_int,
       c_int64, c_int64, c_bool, c_int64, ctypes.POINTER(c_void_p))
    fn("kpoolKernelSetCreateWithCache", _ErrorP, ctypes.c_int, ctypes.c_int,
       c_int64, c_int64, c_bool, c_int64, ctypes.c_int, ctypes.c_int,
       ctypes.c_int, ctypes.POINTER(c_void_p))
    fn("kpoolPoolOffsetsKernelCreate", _ErrorP, c_int64,
       ctypes.POINTER(c_void_p))
    fn("kpoolKernelSetDestroy", None, c_void_p)
    fn("kpoolKernelSetGetTarget", ctypes.c_int, c_void_p)
    fn("kpoolKernelAbiGetNumKernels", c_int64)
    fn("kpoolKernelAbiGetKernel", ctypes.POINTER(_KernelInfo), c_int64)
    # The kernels: (kernel set, one argument per operand, validate); the
    # context (CONTEXT) is the status word as uint64_t * and the stream, a
    # CUstream as void *.
    scalar = {KIND_I32: c_int32, KIND_F32: ctypes.c_float,
              KIND_STREAM: c_void_p, KIND_U64: c_void_p}
    table = _read_kernels(lib)
    for kernel in table.values():
        fn(kernel.capi_function, _ErrorP, c_void_p,
           *[scalar[o.kind] if o.role in (SCALAR, CONTEXT) else _ViewP
             for o in kernel.operands], c_bool)
    fn("kpoolKernelSetPrepare", _ErrorP, c_void_p, c_void_p)
    fn("kpoolPoolStoreCreate", _ErrorP, c_void_p, c_int64,
       ctypes.POINTER(ctypes.c_float), ctypes.POINTER(c_void_p))
    fn("kpoolPoolStoreCreateWithWindow", _ErrorP, c_void_p, c_int64,
       c_int64, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(c_void_p))
    fn("kpoolPoolStoreGetRingWindow", c_int64, c_void_p)
    fn("kpoolRingHoldsPending", ctypes.c_bool, c_int64, c_int64, c_int64,
       c_int64)
    fn("kpoolPoolStoreAccept", _ErrorP, c_void_p, c_uint32, c_int64)
    fn("kpoolPoolStoreDestroy", None, c_void_p)
    fn("kpoolPoolStoreStep", _ErrorP, c_void_p, _ViewP, _ViewP, c_int64, u32p,
       u32p, i64p)
    fn("kpoolPoolStoreGetProduced", ctypes.POINTER(ProducedPoolStruct),
       c_void_p, i64p)
    fn("kpoolPoolStoreGetMaxSlots", c_int64, c_void_p)
    fn("kpoolPoolStoreGetTokens", c_int64, c_void_p, c_uint32)
    fn("kpoolPoolStoreGetNumPools", c_int64, c_void_p, c_uint32)
    fn("kpoolPoolStoreCopyPools", _ErrorP, c_void_p, c_uint32, c_int64,
       c_int64, _ViewP)
    fn("kpoolPoolStoreReset", _ErrorP, c_void_p, c_uint32)
    return table


def _read_kernels(lib):
    """The kernel ABI table of `lib`: op name -> Kernel."""
    table = {}
    for i in range(lib.kpoolKernelAbiGetNumKernels()):
        info = lib.kpoolKernelAbiGetKernel(i).contents
        operands = tuple(
            Operand(o.name.decode(), o.role, o.rank, o.kind, o.shape.decode())
            for o in info.operands[:info.numOperands])
        name = info.name.decode()
        table[name] = Kernel(name, info.capiFunction.decode(), operands)
    return table


def load():
    """Returns the loaded library, loading it on first use."""
    global _lib, _kernels
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidate_paths():
            if os.sep in path and not os.path.exists(path):
                tried.append(f"{path} (no such file)")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            _kernels = _declare(lib)
            _lib = lib
            return lib
        raise LibraryNotFoundError(
            f"kpool: cannot load {LIBRARY_NAME}; set {ENV_VAR} to its path "
            f"(e.g. <build>/lib/{LIBRARY_NAME}) or use an installed package "
            f"(<prefix>/python with <prefix>/lib). Tried:\n  "
            + "\n  ".join(tried))


def kernels():
    """The kernel ABI: op name -> :data:`Kernel` (loads the library)."""
    load()
    return _kernels


def library_path():
    """The file the library was loaded from."""
    lib = load()
    return lib._name


def check(error):
    """Raises KPoolError for a non-null KPoolError*, freeing it."""
    if not error:
        return
    lib = load()
    message = lib.kpoolErrorMessage(error).decode("utf-8", "replace")
    lib.kpoolErrorDestroy(error)
    raise KPoolError(message)
