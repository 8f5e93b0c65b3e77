"""kpool's kernels as PyTorch custom ops (optional: ``import kpool.torch``
needs torch; nothing else in kpool imports it).

Importing this module registers, with ``torch.library``, one op per kernel
of the library's kernel ABI table -- ``torch.ops.kpool.compress``,
``seed_tail``, ``ring_close``, ``pool_offsets``, ``step`` and the
pool-cache kernels ``compress_cache``, ``ring_close_cache``,
``step_cache`` -- whose schemas are made from the table as the module
functions' signatures are (kpool.ops): the same operand names in the same
order, e.g.::

    step(Tensor(a!) tail, Tensor k, Tensor gate, Tensor ape,
         Any input_row_offsets, Any cache_lengths, Any slot_idx,
         int? num_requests=None) -> (Tensor, Tensor, Tensor, Tensor)
    compress(Tensor k, Tensor gate, Tensor ape, Any input_row_offsets,
             Any pool_row_offsets, Any cache_lengths, *,
             Tensor(a!) pooled) -> Tensor(a!)

* Keys, gates, pooled keys and the ring are ``torch.bfloat16``,
  ``torch.float16`` or ``torch.float32`` tensors; ``ape`` float32.
* Metadata (``Any``) is what the module functions take: int32 tensors
  (uint32 values), other integer tensors on the CPU, lists. The op
  dispatches on its tensors of the element type; ``pool_offsets``, which
  has none, takes its metadata as tensors.
* Outputs whose shape the other operands' shapes give (``ring_close``'s,
  ``step``'s, ``pool_offsets``') are allocated and returned; an output whose
  size depends on metadata values (``compress``'s ``pooled``, a capacity)
  is the caller's (``Tensor(a!)``), as is the ring, updated in place; the
  op returns what the module function returns.
* The configuration comes from the operands (element type of the first
  key-like operand, ``kpool`` and ``head_dim`` from ``ape``, or the ring),
  as for :func:`kpool.compress`.

Each op has CPU and CUDA implementations (the CUDA one runs a
``target="cuda"`` kernel set on ``torch.cuda.current_stream()``, without
host metadata checks) and a Meta implementation that only allocates the
outputs' shapes, so that fake tensors, ``torch.compile`` and CUDA-graph
capture can trace them. Output shapes never depend on metadata values.
The CUDA implementation has not run on a GPU here (see docs/python.md).
"""

import torch

from . import ops
from .kernels import KernelSet, pool_offsets_set

_lib = torch.library.Library("kpool", "DEF")


def _elements(op, cache):
    """The names of the op's tensors of the element type (positional)."""
    return [n for n in op.positional
            if op.operands[n].kind in ("element", "f32")]


def _plan(op, cache):
    """The schema of the torch op of `op` (with or without its pool-cache
    group), and what it allocates: (schema, allocated outputs)."""
    dispatch = bool(_elements(op, cache))
    written = iter("abcdefghij")
    marks = {}

    def tensor(name, out):
        if out:
            marks[name] = next(written)
            return f"Tensor({marks[name]}!)"
        return "Tensor"

    params = []
    for n in op.positional:
        o = op.operands[n]
        if o.role == "scalar":
            params.append(f"int? {n}=None" if op.fill(n) else f"int {n}")
        elif o.kind in ("u32", "i32") and o.role == "input":
            params.append(f"{'Any' if dispatch else 'Tensor'} {n}")
        else:
            params.append(f"{tensor(n, o.role == 'output')} {n}")
    if "ape" not in op.operands and "tail" not in op.operands:
        params.append("int kpool")
    # Outputs whose shape needs metadata values are the caller's.
    given = [n for n, r in op.allocate.items() if r.reads_values]
    allocated = [n for n, r in op.allocate.items() if not r.reads_values]
    keywords = [f"{tensor(n, True)} {n}" for n in given]
    if cache:
        for n in op.cache:
            o = next(p for p in op.cache_kernel.operands if p.name == n)
            if o.role == "input":
                keywords.append(f"Any {n}")
            elif o.kind == "cache_scale":
                keywords.append(f"{tensor(n, True)}? {n}=None")
            else:
                keywords.append(f"{tensor(n, True)} {n}")
    if cache:
        keywords += [f"str {n}={d!r}".replace("'", '"') for n, d in _FORMAT]
    if keywords:
        params += ["*"] + keywords
    returns = [f"Tensor({marks[n]}!)" if n in marks else "Tensor"
               for n in op.returns]
    ret = returns[0] if len(returns) == 1 else f"({', '.join(returns)})"
    name = op.kernel_for(cache).name
    return f"{name}({', '.join(params)}) -> {ret}", allocated


def _config(op, a):
    """The kernel set's (dtype, head_dim, kpool) of the operands `a`."""
    first = _elements(op, False)[0]
    if "ape" in a:
        kpool, head_dim = a["ape"].shape
    else:
        kpool, head_dim = a["tail"].shape[2], a["tail"].shape[3]
    return a[first].dtype, int(head_dim), int(kpool)


#: The configuration keywords of the pool-cache ops (the entry type comes
#: from ``cache_keys``: uint8 codes are FP8, else the element type).
_FORMAT = (("rotate", "none"), ("scale", "absmax"))


def _make(op, cache, allocated, compute):
    names = list(op.positional)
    if "ape" not in op.operands and "tail" not in op.operands:
        names.append("kpool")
    elements = _elements(op, cache)

    def impl(*args, **kwargs):
        a = dict(zip(names, args))
        a.update(kwargs)
        fmt = {n: a.pop(n, d) for n, d in _FORMAT} if cache else {}
        # The op's device: its tensors of the element type, or (the scan)
        # its metadata.
        like = a[elements[0]] if elements else a["cache_lengths"]
        context = ops.Context(_rows(a["cache_lengths"]),
                              _rows(a["k"]) if "k" in a else 0, 0, 0, a,
                              None)
        if elements:
            dtype, head_dim, kpool = _config(op, a)
            context = context._replace(D=head_dim, K=kpool)
        outputs = {n: torch.zeros(
            op.allocate[n].shape(context),
            dtype=dtype if op.operands[n].kind == "element" else torch.int32,
            device=like.device) for n in allocated}
        if not compute:
            result = tuple(outputs[n] if n in outputs else a[n]
                           for n in op.returns)
            return result[0] if len(result) == 1 else result
        call = {}
        if like.is_cuda:
            call = {"validate": False,
                    "stream": torch.cuda.current_stream(like.device)}
        if not elements:
            kernels = pool_offsets_set(a.pop("kpool"))
        else:
            if cache:
                fmt["cache"] = ("fp8" if a["cache_keys"].dtype == torch.uint8
                                else "element")
            kernels = KernelSet(dtype, head_dim, kpool,
                                target="cuda" if like.is_cuda else "cpu",
                                **fmt)
        return getattr(kernels, op.name)(**a, **outputs, **call)
    return impl


def _rows(value):
    """Entries of a metadata operand (a tensor, an array with a shape, or a
    list)."""
    shape = getattr(value, "shape", None)
    return int(shape[0]) if shape is not None else len(value)


#: The implementations registered, by (op name, dispatch key), e.g.
#: ``("compress", "CUDA")``: what ``torch.ops.kpool.*`` dispatches to.
implementations = {}


def _register(name, impl, key):
    implementations[(name, key)] = impl
    _lib.impl(name, impl, key)


for _op in ops.ops().values():
    for _cache in ((False, True) if _op.cache_kernel else (False,)):
        _schema, _allocated = _plan(_op, _cache)
        _name = _op.kernel_for(_cache).name
        _lib.define(_schema)
        _register(_name, _make(_op, _cache, _allocated, True), "CPU")
        if _op.name != "pool_offsets":  # the scan has no CUDA set here
            _register(_name, _make(_op, _cache, _allocated, True), "CUDA")
        _register(_name, _make(_op, _cache, _allocated, False), "Meta")
        if int(torch.__version__.split(".")[0]) < 2:
            # torch 1.x has no autograd fallthrough for meta tensors.
            _lib.impl(_name, _make(_op, _cache, _allocated, False),
                      "AutogradMeta")
