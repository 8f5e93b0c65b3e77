"""kpool's ops as PyTorch custom ops (optional: ``import kpool.torch`` needs
torch; nothing else in kpool imports it).

Importing this module registers, with ``torch.library``:

* ``torch.ops.kpool.pool_offsets(input_row_offsets, cache_lengths, kpool)
  -> pool_row_offsets`` [B+1] int32 (CPU and Meta);
* ``torch.ops.kpool.compress(k, gate, ape, input_row_offsets,
  pool_row_offsets, cache_lengths, pooled)``: writes ``pooled``
  (``Tensor(a!)``, rows a capacity) in place, returns nothing;
* ``torch.ops.kpool.ring_close(tail, k, gate, ape, input_row_offsets,
  cache_lengths, slot_idx, num_requests=None) -> (pooled [B, D],
  closed_pool [B] int32)``;
* ``torch.ops.kpool.seed_tail(tail, k, gate, input_row_offsets,
  cache_lengths, slot_idx, num_requests=None)``: updates ``tail``
  (``Tensor(a!)``) in place;
* ``torch.ops.kpool.step(tail, k, gate, ape, input_row_offsets,
  cache_lengths, slot_idx, num_requests=None) -> (closed [B, D],
  closed_pool [B] int32, pool_row_offsets [B+1] int32, pooled
  [T // kpool + B, D])``: the fused step, ``tail`` (``Tensor(a!)``) updated.

Keys, gates, pooled keys and the ring are torch.bfloat16, float16 or
float32 tensors; ``ape`` float32 ``[kpool, head_dim]``; the metadata int32
tensors (uint32 values; any integer dtype on the CPU). The configuration
comes from the operands (element type of ``k``, ``kpool`` and
``head_dim`` from ``ape``), as for :func:`kpool.compress`.

Each op has CPU and CUDA implementations (the CUDA one runs a
``target="cuda"`` kernel set on ``torch.cuda.current_stream()``, without
host metadata checks) and a Meta implementation that only allocates the
outputs' shapes, so that fake tensors, ``torch.compile`` and CUDA-graph
capture can trace them. Output shapes never depend on metadata values.
The CUDA implementation has not run on a GPU here (see docs/python.md).
"""

import torch

from . import runtime

_ETYPES = {torch.bfloat16: "bf16", torch.float16: "f16",
           torch.float32: "f32"}

_lib = torch.library.Library("kpool", "DEF")
_SCHEMAS = {
    "pool_offsets": "pool_offsets(Tensor input_row_offsets, "
                    "Tensor cache_lengths, int kpool) -> Tensor",
    "compress": "compress(Tensor k, Tensor gate, Tensor ape, "
                "Tensor input_row_offsets, Tensor pool_row_offsets, "
                "Tensor cache_lengths, Tensor(a!) pooled) -> ()",
    "ring_close": "ring_close(Tensor tail, Tensor k, Tensor gate, "
                  "Tensor ape, Tensor input_row_offsets, "
                  "Tensor cache_lengths, Tensor slot_idx, "
                  "int? num_requests=None) -> (Tensor, Tensor)",
    "seed_tail": "seed_tail(Tensor(a!) tail, Tensor k, Tensor gate, "
                 "Tensor input_row_offsets, Tensor cache_lengths, "
                 "Tensor slot_idx, int? num_requests=None) -> ()",
    "step": "step(Tensor(a!) tail, Tensor k, Tensor gate, Tensor ape, "
            "Tensor input_row_offsets, Tensor cache_lengths, "
            "Tensor slot_idx, int? num_requests=None) "
            "-> (Tensor, Tensor, Tensor, Tensor)",
}
for _schema in _SCHEMAS.values():
    _lib.define(_schema)


def _kernels(k, ape):
    """The shared kernel set of the operands' configuration and the
    keywords of a call on their device."""
    if k.dtype not in _ETYPES:
        raise TypeError(f"kpool: keys of dtype {k.dtype}; use "
                        "torch.bfloat16, float16 or float32")
    if k.is_cuda:
        target = "cuda"
        call = {"validate": False,
                "stream": torch.cuda.current_stream(k.device).cuda_stream}
    else:
        target, call = "cpu", {}
    kernels = runtime.kernel_set(_ETYPES[k.dtype], ape.shape[1],
                                 ape.shape[0], target=target)
    return kernels, call


def _zeros(like, *shape, dtype=None):
    return torch.zeros(shape, dtype=like.dtype if dtype is None else dtype,
                       device=like.device)


def _pool_offsets(compute):
    def pool_offsets(input_row_offsets, cache_lengths, kpool):
        out = _zeros(cache_lengths, cache_lengths.shape[0] + 1,
                     dtype=torch.int32)
        if compute:
            runtime.pool_offsets(input_row_offsets, cache_lengths, kpool,
                                 out=out)
        return out
    return pool_offsets


def _compress(compute):
    def compress(k, gate, ape, input_row_offsets, pool_row_offsets,
                 cache_lengths, pooled):
        if compute:
            kernels, call = _kernels(k, ape)
            kernels.compress(k, gate, ape, input_row_offsets,
                             pool_row_offsets, cache_lengths, out=pooled,
                             **call)
    return compress


def _ring_close(compute):
    def ring_close(tail, k, gate, ape, input_row_offsets, cache_lengths,
                   slot_idx, num_requests=None):
        batch = cache_lengths.shape[0]
        pooled = _zeros(k, batch, k.shape[1])
        closed_pool = _zeros(k, batch, dtype=torch.int32)
        if compute:
            kernels, call = _kernels(k, ape)
            kernels.ring_close(tail, k, gate, ape, input_row_offsets,
                               cache_lengths, slot_idx, num_requests,
                               pooled=pooled, closed_pool=closed_pool, **call)
        return pooled, closed_pool
    return ring_close


def _seed_tail(compute):
    def seed_tail(tail, k, gate, input_row_offsets, cache_lengths, slot_idx,
                  num_requests=None):
        if compute:
            # What seed_tail stores depends only on the ring window.
            ape = torch.empty(tail.shape[2], tail.shape[3], device="meta")
            kernels, call = _kernels(k, ape)
            kernels.seed_tail(tail, k, gate, input_row_offsets,
                              cache_lengths, slot_idx, num_requests, **call)
    return seed_tail


def _step(compute):
    def step(tail, k, gate, ape, input_row_offsets, cache_lengths, slot_idx,
             num_requests=None):
        batch, dim = cache_lengths.shape[0], k.shape[1]
        closed = _zeros(k, batch, dim)
        closed_pool = _zeros(k, batch, dtype=torch.int32)
        pro = _zeros(k, batch + 1, dtype=torch.int32)
        pooled = _zeros(k, k.shape[0] // ape.shape[0] + batch, dim)
        if compute:
            kernels, call = _kernels(k, ape)
            kernels.step(tail, k, gate, ape, input_row_offsets,
                         cache_lengths, slot_idx, num_requests,
                         pooled=pooled, closed=closed,
                         closed_pool=closed_pool, pool_row_offsets=pro,
                         **call)
        return closed, closed_pool, pro, pooled
    return step


for _name, _make in [("pool_offsets", _pool_offsets),
                     ("compress", _compress), ("ring_close", _ring_close),
                     ("seed_tail", _seed_tail), ("step", _step)]:
    _lib.impl(_name, _make(True), "CPU")
    if _name != "pool_offsets":  # the scan has no CUDA set of its own here
        _lib.impl(_name, _make(True), "CUDA")
    _lib.impl(_name, _make(False), "Meta")
    if int(torch.__version__.split(".")[0]) < 2:
        # torch 1.x has no autograd fallthrough for meta tensors.
        _lib.impl(_name, _make(False), "AutogradMeta")
