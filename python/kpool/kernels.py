"""Kernel sets and the ops, generated from the kernel ABI table.

:class:`KernelSet` holds the kernels of one configuration (the library's
KernelSet::get: one compiled set per configuration and process, shared by
every handle). Its op methods (``compress``, ``seed_tail``, ``ring_close``,
``pool_offsets``, ``step``) and the module functions of the same names are
made from the table (kpool.ops) on first use, with the operand names as
keyword names; every call goes through one path (:meth:`KernelSet._run`)
that fills in and allocates what the op's rules allow, checks each operand
by the table, builds the kernel's argument struct and calls kpoolCall.

Arrays: numpy arrays, PyTorch tensors, anything exposing ``__dlpack__`` on
the CPU (host) or ``__cuda_array_interface__`` / CUDA ``__dlpack__``
(device, on a CUDA set); metadata also as lists. Results are the caller's
kind of array: the given outputs themselves, and new ones as numpy arrays
or as PyTorch tensors on the operands' device (bf16 as torch.bfloat16).
Errors: :class:`kpool.KPoolError` (a ``ValueError``) naming the op, the
request and the field; ``TypeError`` for values of the wrong type or dtype.
A call that raises has written nothing.
"""

import ctypes
import inspect
import os

import numpy as np

from . import _capi, interop, marshal
from ._capi import KPoolError
from .ops import FILL_WHAT, Context, ops
from .types import DTYPES, element_type

#: Every op method's call options (keyword-only).
CALL_OPTIONS = (("validate", None), ("stream", None), ("status", None))
#: The configuration keywords of KernelSet and the module functions.
CONFIG_OPTIONS = (("openmp", False), ("vector_size", 16), ("target", "cpu"),
                  ("cache", None), ("rotate", "none"), ("scale", "absmax"))


class _Generated(type):
    """Makes the op methods on first access to one (kpool.ops: they come
    from the library's table)."""

    def __getattr__(cls, name):
        if name.startswith("_") or name not in _generate():
            raise AttributeError(name)
        return cls.__dict__[name]


class KernelSet(metaclass=_Generated):
    """The kernels compiled for one configuration.

    ``dtype`` is the element type: "bf16"/"bfloat16"/torch.bfloat16 (numpy
    uint16 bit patterns), "f16"/"float16"/torch.float16/numpy.float16 or
    "f32"/"float32"/torch.float32/numpy.float32. ``target`` is "cpu" or
    "cuda". Either takes, in order, kernels registered in the process
    (kernel packs: :func:`load_kernel_pack` and the packs installed next to
    the library, whose default CUDA pack holds bf16 and f16, head_dim 128,
    kpool 4, every pool-cache format), the disk cache (:mod:`kpool.cache`),
    then the JIT (libKPoolJit.so), once per process and configuration;
    later sets share it. A configuration none of them provides is a
    KPoolError naming it and saying how to get it. ``cache``, ``rotate``
    and ``scale``: the pool-cache format (docs/pool-cache.md): ``cache``
    None (no cache kernels), "element" or "fp8"; ``rotate`` "none" or
    "hadamard"; ``scale`` "absmax" or "pow2". The values' rules (head_dim
    and kpool ranges, a power-of-two head_dim for hadamard, ...) are the
    library's.

    A CPU set's ops take host arrays, without a copy. A CUDA set's ops take
    device arrays, also without a copy (PyTorch, CuPy, JAX), metadata
    included (uint32 or int32, never read back); they return the caller's
    objects. A call runs on ``stream=`` when given, else on the stream the
    operands' ``__cuda_array_interface__`` names, else on the legacy
    default stream (DLPack operands are exported for that stream). The
    Python layer allocates no device memory and reads no device metadata:
    on a CUDA set every output is the caller's, and a missing one is a
    KPoolError naming it. ``validate`` None (the default) checks metadata
    where it is host memory; True checks (an error on a CUDA set), False
    only checks shapes. ``status=``: the call's status word, an array of at
    least one uint64 (host or device memory as the set's operands), where
    the kernels record the first bad-metadata finding
    (:func:`kpool.status_error` decodes it). ``prepare`` loads the GPU
    modules before a CUDA graph capture.

    Thread-safe, as the library's kernel sets are.
    """

    def __init__(self, dtype, head_dim, kpool, *, openmp=False,
                 vector_size=16, target="cpu", cache=None, rotate="none",
                 scale="absmax", _pool_offsets_only=False):
        op = "kernel set"
        lib = _capi.load()
        _generate()
        E = _capi.enum
        config = lib.kpoolKernelConfigDefault()
        if not _pool_offsets_only:
            self.element_type = element_type(dtype)
            config.elementType = E(_capi.ENUM_ELEMENT_TYPE)[self.element_type]
            config.headDim = marshal.int_value(op, "head_dim", head_dim)
        config.kpool = marshal.int_value(op, "kpool", kpool)
        config.openmp = marshal.bool_value(op, "openmp", openmp)
        config.vectorSize = marshal.int_value(op, "vector_size", vector_size)
        config.target = E(_capi.ENUM_TARGET)[
            marshal.choice(op, "target", target, E(_capi.ENUM_TARGET))]
        names = {None: "none", **{n: n for n in
                                  E(_capi.ENUM_CACHE_ENTRY) if n != "none"}}
        config.cache.entry = E(_capi.ENUM_CACHE_ENTRY)[
            names[marshal.choice(op, "cache", cache, names)]]
        config.cache.rotate = E(_capi.ENUM_CACHE_ROTATE)[marshal.choice(
            op, "rotate", rotate, E(_capi.ENUM_CACHE_ROTATE))]
        config.cache.scale = E(_capi.ENUM_CACHE_SCALE)[marshal.choice(
            op, "scale", scale, E(_capi.ENUM_CACHE_SCALE))]
        config.poolOffsetsOnly = _pool_offsets_only
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolKernelSetCreate(ctypes.byref(config),
                                             ctypes.byref(handle)))
        self._lib, self._handle = lib, handle
        # What the set is, as the library holds it.
        lib.kpoolKernelSetGetConfig(handle, ctypes.byref(config))
        if _pool_offsets_only:
            self.element_type = "f32"
        self.dtype = DTYPES[self.element_type]
        self.head_dim, self.kpool = int(config.headDim), int(config.kpool)
        self.openmp, self.vector_size = bool(config.openmp), int(
            config.vectorSize)
        self.target, self.cache, self.rotate, self.scale = target, cache, \
            rotate, scale

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.kpoolKernelSetDestroy(handle)
            self._handle = None

    def __repr__(self):
        return (f"KernelSet({self.element_type!r}, head_dim={self.head_dim}, "
                f"kpool={self.kpool})")

    def __getattr__(self, name):
        """The op methods, made on first use (see _Generated)."""
        if name.startswith("_") or name not in _generate():
            raise AttributeError(name)
        return getattr(self, name)

    def has_kernel(self, name):
        """Whether the set has kernel `name` (e.g. "compress_cache")."""
        return bool(self._lib.kpoolKernelSetHasKernel(
            self._handle, _capi.kernels()[name].id))

    def prepare(self, stream=None):
        """Loads what the kernels need (GPU modules) in the context of
        ``stream`` before capturing calls into a CUDA graph; nothing to do
        on the CPU. ``stream``: a CUstream as an int, an object with
        ``cuda_stream``/``handle``/``ptr`` (PyTorch, CuPy), or None for the
        NULL stream."""
        _capi.check(self._lib.kpoolKernelSetPrepare(
            self._handle, interop.stream_handle(stream)))

    def _run(self, op, args):
        """Runs op `op` (a kpool.ops.Op) on `args`, its arguments by name
        (the caller's objects), and returns its result."""
        name = op.name
        validate, stream = args.pop("validate"), args.pop("stream")
        if op.out:
            out = args.pop("out")
            if out is not None and args[op.out] is not None:
                raise TypeError(f"{name}: pass '{op.out}' or out=, not both")
            if out is not None:
                args[op.out] = out
        cache = self._cache_group(op, args)
        kernel = op.kernel_for(cache)
        device = self.target == "cuda"
        given = dict(args)
        # The operands as kpool holds them: host arrays as numpy (aliases),
        # device arrays as Strided, and the call's stream.
        held = dict(args)
        if device:
            held["stream"] = stream
            interop.device_operands(name, held)
            stream = held.pop("stream")
        else:
            held = {n: interop.host_array(name, n, v) for n, v in held.items()}
            stream = interop.stream_handle(stream)
        status = held.pop("status")
        given.pop("status")
        for o in kernel.operands:    # metadata inputs, to read B and fill
            if (o.role == "input" and o.kind == "u32"
                    and held.get(o.name) is not None):
                held[o.name] = marshal.metadata(name, o.name, held[o.name],
                                                o.rank, given[o.name])
        ctx = self._context(held)
        for n in op.positional:
            if held.get(n) is None and op.fill(n):
                if device and n != "num_requests":
                    self._missing(name, n, op)
                held[n] = op.fill(n)(ctx)
                given[n] = held[n]
        family = interop.Family.of(given.values())
        for n, rule in op.allocate.items():
            if given.get(n) is None:
                if device:
                    self._missing(name, n, op)
                o = op.operands[n]
                dtype = self.dtype if o.kind == "element" else np.dtype(
                    np.uint32 if o.kind == "u32" else np.int32)
                given[n] = family.zeros(rule.shape(ctx), dtype)
                held[n] = interop.host_array(name, n, given[n])
        entry = (np.dtype(np.uint8) if self.cache == "fp8" else self.dtype)
        values = {o.name: marshal.operand(name, o, held[o.name], self.dtype,
                                          entry, device, given.get(o.name))
                  for o in kernel.operands if o.role != "context"}
        options = _capi.CallOptions(
            marshal.status_pointer(name, status, device), stream,
            _capi.enum(_capi.ENUM_VALIDATION)[
                "auto" if validate is None else
                "check" if marshal.bool_value(name, "validate", validate)
                else "trust"])
        _capi.check(self._lib.kpoolCall(
            self._handle, kernel.id, marshal.build_args(kernel, values),
            kernel.args_size, ctypes.byref(options)))
        result = tuple(given[n] for n in op.returns)
        return result[0] if len(result) == 1 else result

    def _context(self, held):
        """B, T, D, K of a call (see kpool.ops.Context)."""
        def rows(name):
            v = held.get(name)
            return int(np.shape(v)[0]) if v is not None and np.ndim(v) else 0
        return Context(rows("cache_lengths"), rows("k"), self.head_dim,
                       self.kpool, held, self)

    def _missing(self, op, name, o):
        rule = o.allocate.get(name)
        what = rule.what if rule else FILL_WHAT.get((o.name, name), "")
        raise KPoolError(
            f"{op}: on a CUDA kernel set the caller gives the outputs: "
            f"pass '{name}' ({what}, device memory); the Python layer "
            "allocates no device memory and cannot read device metadata")

    def _cache_group(self, op, args):
        """Whether the call has the pool-cache group (then the op's
        ``*_cache`` kernel runs): all of it or none. For entries of the
        element type `cache_scales` is not read: a placeholder stands in."""
        if args.get("block_table") is None:
            given = [n for n in op.cache if args.get(n) is not None]
            if given:
                raise KPoolError(f"{op.name}: 'cache_keys' and "
                                 "'cache_scales' need a 'block_table'")
            return False
        if self.cache is None:
            raise KPoolError(f"{op.name}: this kernel set has no pool-cache "
                             "kernels: create it with cache='fp8' or "
                             "cache='element'")
        if args.get("cache_keys") is None:
            raise KPoolError(f"{op.name}: a 'block_table' needs "
                             "'cache_keys'")
        if self.cache == "fp8":
            if args.get("cache_scales") is None:
                raise KPoolError(f"{op.name}: FP8 entries need "
                                 "'cache_scales' [pages, page_size] float32")
        elif args.get("cache_scales") is not None:
            raise KPoolError(f"{op.name}: entries of the element type have "
                             "no 'cache_scales'")
        else:
            args["cache_scales"] = np.zeros((0, 0), dtype=np.float32)
        return True


def kernel_set(dtype, head_dim, kpool, **config):
    """The :class:`KernelSet` of a configuration (see there); every handle of
    one configuration shares the library's one compiled set."""
    return KernelSet(dtype, head_dim, kpool, **config)


def load_kernel_pack(path):
    """Loads the kernel pack at ``path`` (a ``.so`` made by ``kpool-aot
    --pack``) and registers its configurations: kernel sets of those
    configurations then use its kernels, with no compilation. Returns how
    many configurations it holds. Loading a pack again does nothing (and
    returns 0). Raises :class:`KPoolError` when the file is not a pack, or
    is a pack of another kpool (the message says which). The packs
    installed next to the library load by themselves the first time a
    configuration is not found (``$KPOOL_KERNEL_PACKS``, a colon-separated
    list of files and folders, replaces them)."""
    count = ctypes.c_int64(0)
    _capi.check(_capi.load().kpoolLoadKernelPack(os.fsencode(path),
                                                 ctypes.byref(count)))
    return count.value


def pool_offsets_set(kpool):
    """A set with only the pool_offsets kernel of `kpool` (the scan
    depends on nothing else): the library takes it from a set of this kpool
    that exists, else compiles it alone."""
    kpool = marshal.int_value("pool_offsets", "kpool", kpool)
    return KernelSet(None, 1, kpool, _pool_offsets_only=True)


# --- The generated functions ------------------------------------------------

_generated = {}


def _method(op):
    sig = inspect.Signature(op.parameters(("self",), CALL_OPTIONS))

    def method(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop("self")
        return self._run(op, arguments)
    method.__name__ = method.__qualname__ = op.name
    method.__signature__ = sig
    method.__doc__ = op.doc(f"kpool.{op.name} on this set's kernels (see "
                            "KernelSet).")
    return method


def _config_of(op, arguments, target):
    """A module function's configuration from its operands: the element
    type of its first positional operand of the element type, head_dim and
    kpool from `ape` [kpool, head_dim] when the op has one, else from the
    ring `tail` [S, 2, R, head_dim] (kpool: the `kpool` keyword, default
    R), else `kpool` is an argument and only the scan is needed."""
    name = op.name
    if "ape" not in op.operands and "tail" not in op.operands:
        return None
    first = next(n for n in op.positional
                 if op.operands[n].kind == "element")
    looked = {n: arguments[n] for n in (first, "ape", "tail")
              if n in op.operands}
    if target == "cuda":
        interop.device_operands(name, looked)
    else:
        looked = {n: interop.host_array(name, n, v)
                  for n, v in looked.items()}
    for n, v in looked.items():
        rank = op.operands[n].rank
        marshal.check_array(name, n, v, rank, source=arguments[n])
    x = looked[first]
    try:
        dtype = element_type(arguments[first].dtype
                             if interop.is_torch(arguments[first])
                             else x.dtype)
    except TypeError:
        raise TypeError(f"{name}: '{first}' has dtype "
                        f"{interop.dtype_name(arguments[first], x.dtype)}; "
                        "use bf16 (torch.bfloat16 or uint16 bit patterns), "
                        "float16 or float32") from None
    if "ape" in looked:
        kpool, head_dim = looked["ape"].shape
    else:
        kpool = arguments.pop("kpool", None)
        head_dim = looked["tail"].shape[3]
        if kpool is None:
            kpool = looked["tail"].shape[2]
    return dtype, head_dim, kpool


def _function(op):
    """The module function of op `op`."""
    config = tuple((n, d) for n, d in CONFIG_OPTIONS)
    leading = ()
    if "ape" not in op.operands and "tail" not in op.operands:
        extra = [inspect.Parameter("kpool",
                                   inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    elif "ape" not in op.operands:
        config = (("kpool", None),) + config
        extra = []
    else:
        extra = []
    params = op.parameters(leading, CALL_OPTIONS + config)
    at = len(op.positional)
    params = params[:at] + extra + params[at:]
    sig = inspect.Signature(params)

    def function(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        options = {n: arguments.pop(n) for n, _ in CONFIG_OPTIONS}
        found = _config_of(op, arguments, options["target"])
        if found is None:
            kernels = pool_offsets_set(arguments.pop("kpool"))
        else:
            kernels = KernelSet(*found, **options)
        arguments.pop("kpool", None)
        return kernels._run(op, arguments)
    function.__name__ = function.__qualname__ = op.name
    function.__signature__ = sig
    function.__doc__ = op.doc(
        f"kpool.{op.name}; the kernel set's configuration comes from the "
        "operands (the element type of the first key-like operand, kpool "
        "and head_dim from 'ape' or the ring 'tail'), the keywords "
        + ", ".join(n for n, _ in CONFIG_OPTIONS) + " choose the rest. See "
        "KernelSet.")
    return function


def _generate():
    """The op methods and module functions, made once (kpool.ops)."""
    if not _generated:
        for name, op in ops().items():
            setattr(KernelSet, name, _method(op))
            _generated[name] = _function(op)
    return _generated


def __getattr__(name):
    """The module functions (compress, ...), made on first use."""
    if name.startswith("_") or name not in _generate():
        raise AttributeError(f"module 'kpool.kernels' has no attribute "
                             f"{name!r}")
    return _generated[name]


def op_names():
    """The ops' names (loads the library)."""
    return list(_generate())

