"""ctypes bindings of the runtime's C API, libKPoolRuntime.so
(kpool-c/Runtime.h, kpool-c/Stores.h, kpool-c/Packs.h). The library needs no
MLIR: it opens the JIT (libKPoolJit.so, next to it) only when a kernel set
must be compiled, and loads kernel packs and the disk cache's kernels itself.

Everything about the kernels comes from the library: :func:`kernels` reads
the kernel ABI table (kpoolKernelAbiGetKernel: each kernel's operands in
call order, with their role, rank, kind, shape and offset in the kernel's
argument struct), :func:`enum` the names of the enums' values
(kpoolEnumName: element types, targets, pool-cache formats, validation,
operand roles and kinds). Every kernel is called through one function,
kpoolCall, on an argument struct built from that table.

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

# KPoolEnum: which enum kpoolEnumName names.
ENUM_ELEMENT_TYPE = 0
ENUM_TARGET = 1
ENUM_CACHE_ENTRY = 2
ENUM_CACHE_ROTATE = 3
ENUM_CACHE_SCALE = 4
ENUM_VALIDATION = 5
ENUM_OPERAND_ROLE = 6
ENUM_OPERAND_KIND = 7

#: One operand of a kernel: ``name``, ``role`` ("output", "input", "scalar",
#: or "context" for the call's context: the status word, then the caller's
#: stream, always last), ``rank``, ``kind`` ("element", "u32", "i32", "f32",
#: "cache_entry", "cache_scale", "u64", "stream"), ``shape`` ("?xD": '?' any
#: extent, 'D' head_dim, 'K' kpool) and ``offset`` in the kernel's argument
#: struct (-1 for the context).
Operand = collections.namedtuple("Operand",
                                 "name role rank kind shape offset")
#: One kernel: its ``name`` (e.g. "compress_cache"), its C function, its
#: operands in order, its KPoolKernelId ``id``, the ``base`` kernel's name
#: (the op's plain kernel, e.g. "compress") and the size of its argument
#: struct.
Kernel = collections.namedtuple(
    "Kernel", "name capi_function operands id base args_size")


class KPoolError(ValueError):
    """An operand or its metadata is invalid; nothing was written.

    Raised for errors the runtime reports (the message names the op, the
    request and the field, e.g. ``compress: request 2: input_row_offsets[3]
    = 70 reaches past the 64 rows of 'k'``) and for operands this package
    rejects before calling it (wrong shapes, strides that are not a whole
    number of elements, arrays a framework cannot export).
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
        ("offset", ctypes.c_int64),
    ]


class _KernelInfo(ctypes.Structure):
    """KPoolKernelInfo."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("capiFunction", ctypes.c_char_p),
        ("numOperands", ctypes.c_int64),
        ("operands", ctypes.POINTER(_OperandInfo)),
        ("id", ctypes.c_int32),
        ("base", ctypes.c_int32),
        ("argsSize", ctypes.c_int64),
    ]


class CacheFormat(ctypes.Structure):
    """KPoolCacheFormat."""

    _fields_ = [("entry", ctypes.c_int32), ("rotate", ctypes.c_int32),
                ("scale", ctypes.c_int32)]


class KernelConfig(ctypes.Structure):
    """KPoolKernelConfig."""

    _fields_ = [
        ("target", ctypes.c_int32),
        ("elementType", ctypes.c_int32),
        ("headDim", ctypes.c_int64),
        ("kpool", ctypes.c_int64),
        ("vectorSize", ctypes.c_int64),
        ("cache", CacheFormat),
        ("openmp", ctypes.c_bool),
        ("poolOffsetsOnly", ctypes.c_bool),
    ]


class CallOptions(ctypes.Structure):
    """KPoolCallOptions."""

    _fields_ = [("status", ctypes.c_void_p), ("stream", ctypes.c_void_p),
                ("validation", ctypes.c_int32)]


class PagedStoreOptions(ctypes.Structure):
    """KPoolPagedPoolStoreOptions."""

    _fields_ = [
        ("maxSlots", ctypes.c_int64),
        ("pageSize", ctypes.c_int64),
        ("numPages", ctypes.c_int64),
        ("pageStride", ctypes.c_int64),
        ("ringWindow", ctypes.c_int64),
        ("pageOrder", ctypes.POINTER(ctypes.c_int64)),
        ("cache", ctypes.c_void_p),
    ]


class PagedStoreLayout(ctypes.Structure):
    """KPoolPagedPoolStoreLayout."""

    _fields_ = [
        ("maxSlots", ctypes.c_int64),
        ("ringWindow", ctypes.c_int64),
        ("pageSize", ctypes.c_int64),
        ("numPages", ctypes.c_int64),
        ("pageStride", ctypes.c_int64),
        ("entryBytes", ctypes.c_int64),
        ("buffer", ctypes.c_void_p),
        ("bufferBytes", ctypes.c_int64),
        ("cacheKeys", View),
        ("cacheScales", View),
    ]


class CacheEntryInfo(ctypes.Structure):
    """KPoolKernelCacheEntryInfo (kpool-c/Packs.h)."""

    _fields_ = [("path", ctypes.c_char_p), ("bytes", ctypes.c_uint64),
                ("summary", ctypes.c_char_p), ("valid", ctypes.c_int32),
                ("problem", ctypes.c_char_p)]


class CacheStatistics(ctypes.Structure):
    """KPoolKernelCacheStatistics (kpool-c/Packs.h)."""

    _fields_ = [(n, ctypes.c_int64)
                for n in ("hits", "misses", "compiled", "stored", "rejected")]


#: KPoolKernelCacheCallback.
CacheCallback = ctypes.CFUNCTYPE(None, ctypes.POINTER(CacheEntryInfo),
                                 ctypes.c_void_p)

_ErrorP = ctypes.c_void_p
_ViewP = ctypes.POINTER(View)
_lock = threading.Lock()
_lib = None
_kernels = None
_enums = {}


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
    fn("kpoolEnumName", ctypes.c_char_p, c_int32, c_int32)
    fn("kpoolKernelConfigDefault", KernelConfig)
    fn("kpoolKernelSetCreate", _ErrorP, ctypes.POINTER(KernelConfig),
       ctypes.POINTER(c_void_p))
    fn("kpoolKernelSetDestroy", None, c_void_p)
    fn("kpoolKernelSetGetConfig", c_bool, c_void_p,
       ctypes.POINTER(KernelConfig))
    fn("kpoolKernelSetHasKernel", c_bool, c_void_p, c_int32)
    fn("kpoolKernelSetPrepare", _ErrorP, c_void_p, c_void_p)
    fn("kpoolKernelAbiGetNumKernels", c_int64)
    fn("kpoolKernelAbiGetKernel", ctypes.POINTER(_KernelInfo), c_int64)
    # Every kernel through one generic call on its argument struct.
    fn("kpoolCall", _ErrorP, c_void_p, c_int32, c_void_p, ctypes.c_size_t,
       ctypes.POINTER(CallOptions))
    fn("kpoolCheck", _ErrorP, c_void_p, c_int32, c_void_p, ctypes.c_size_t)
    # The stores (kpool-c/Stores.h). A step writes its produced pools into
    # the caller's buffer of KPoolProducedPool records.
    fn("kpoolRingHoldsPending", c_bool, c_int64, c_int64, c_int64, c_int64)
    fn("kpoolStoreMaxProduced", c_int64, c_int64, c_int64, c_int64)
    step = (_ErrorP, c_void_p, _ViewP, _ViewP, c_int64, u32p, u32p, c_void_p,
            c_int64, i64p)
    for store in ("kpoolPoolStore", "kpoolPagedPoolStore"):
        fn(store + "Step", *step)
        fn(store + "Accept", _ErrorP, c_void_p, c_uint32, c_int64)
        fn(store + "Close", None, c_void_p)
        fn(store + "IsClosed", c_bool, c_void_p)
        fn(store + "Destroy", None, c_void_p)
        fn(store + "GetTokens", c_int64, c_void_p, c_uint32)
        fn(store + "GetNumPools", c_int64, c_void_p, c_uint32)
    fn("kpoolPoolStoreCreateWithWindow", _ErrorP, c_void_p, c_int64,
       c_int64, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(c_void_p))
    fn("kpoolPoolStoreGetRingWindow", c_int64, c_void_p)
    fn("kpoolPoolStoreGetMaxSlots", c_int64, c_void_p)
    fn("kpoolPoolStoreCopyPools", _ErrorP, c_void_p, c_uint32, c_int64,
       c_int64, _ViewP)
    fn("kpoolPoolStoreReset", _ErrorP, c_void_p, c_uint32)
    fn("kpoolPagedPoolStoreCreate", _ErrorP, c_void_p,
       ctypes.POINTER(ctypes.c_float), ctypes.POINTER(PagedStoreOptions),
       ctypes.POINTER(c_void_p))
    fn("kpoolPagedPoolStoreRelease", _ErrorP, c_void_p, c_uint32)
    fn("kpoolPagedPoolStoreGetPages", _ErrorP, c_void_p, c_uint32, u32p,
       c_int64, i64p)
    fn("kpoolPagedPoolStoreGetFreePages", _ErrorP, c_void_p, u32p, c_int64,
       i64p)
    fn("kpoolPagedPoolStoreGetEntry", _ErrorP, c_void_p, c_uint32, c_int64,
       c_void_p, c_int64, ctypes.POINTER(ctypes.c_float))
    fn("kpoolPagedPoolStoreGetLayout", _ErrorP, c_void_p,
       ctypes.POINTER(PagedStoreLayout))
    # The version, kernel packs and the kernel cache (kpool-c/Packs.h).
    fn("kpoolGetVersion", ctypes.c_char_p)
    fn("kpoolLoadKernelPack", _ErrorP, ctypes.c_char_p, i64p)
    fn("kpoolKernelCacheGetDirectory", ctypes.c_char_p)
    fn("kpoolKernelCacheList", _ErrorP, CacheCallback, c_void_p)
    fn("kpoolKernelCacheClear", _ErrorP, i64p)
    fn("kpoolKernelCacheGetStatistics", None,
       ctypes.POINTER(CacheStatistics), ctypes.POINTER(ctypes.c_char_p))


def _names(lib, which):
    """The values of enum `which` by name, asked of the library."""
    names, value = {}, 0
    while True:
        name = lib.kpoolEnumName(which, value)
        if name is None:
            return names
        names[name.decode()] = value
        value += 1


def _read_kernels(lib):
    """The kernel ABI table of `lib`: kernel name -> Kernel."""
    roles = {v: n for n, v in _names(lib, ENUM_OPERAND_ROLE).items()}
    kinds = {v: n for n, v in _names(lib, ENUM_OPERAND_KIND).items()}
    infos = [lib.kpoolKernelAbiGetKernel(i).contents
             for i in range(lib.kpoolKernelAbiGetNumKernels())]
    table = {}
    for info in infos:
        operands = tuple(
            Operand(o.name.decode(), roles[o.role], o.rank, kinds[o.kind],
                    o.shape.decode(), o.offset)
            for o in info.operands[:info.numOperands])
        name = info.name.decode()
        table[name] = Kernel(name, info.capiFunction.decode(), operands,
                             info.id, infos[info.base].name.decode(),
                             info.argsSize)
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
            _declare(lib)
            for which in range(ENUM_OPERAND_KIND + 1):
                _enums[which] = _names(lib, which)
            _kernels = _read_kernels(lib)
            _lib = lib
            return lib
        raise LibraryNotFoundError(
            f"kpool: cannot load {LIBRARY_NAME}; set {ENV_VAR} to its path "
            f"(e.g. <build>/lib/{LIBRARY_NAME}) or use an installed package "
            f"(<prefix>/python with <prefix>/lib). Tried:\n  "
            + "\n  ".join(tried))


def kernels():
    """The kernel ABI: kernel name -> :data:`Kernel` (loads the library)."""
    load()
    return _kernels


def enum(which):
    """The values of enum `which` (an ENUM_* constant) by the names the
    library gives them, e.g. ``enum(ENUM_CACHE_ENTRY)`` is ``{"none": 0,
    "element": 1, "fp8": 2}`` (loads the library)."""
    load()
    return _enums[which]


def library_path():
    """The file the library was loaded from."""
    lib = load()
    return lib._name


def version():
    """kpool's version, as the library reports it (e.g. ``"0.1.0"``)."""
    return load().kpoolGetVersion().decode()


def check(error):
    """Raises KPoolError for a non-null KPoolError*, freeing it."""
    if not error:
        return
    lib = load()
    message = lib.kpoolErrorMessage(error).decode("utf-8", "replace")
    lib.kpoolErrorDestroy(error)
    raise KPoolError(message)
