"""A pure-numpy reference of the kpool operations (docs/semantics.md).

Usable without the compiled library: to check the kernels, to prototype a
serving loop, or to see exactly what each operation computes. Arrays use the
package's conventions: keys, gates, pooled keys and the ring are uint16 (bf16
bit patterns), float16 or float32; ``ape`` is float32; offsets, cache lengths
and slots are integers read as unsigned 32-bit; ``closed_pool`` is int32.

The pooling function is the production kernels' arithmetic, in float32:
``z_m = g_m + ape[m]``, ``M = max z``, ``e_m = exp(z_m - M)``, ``Z`` and
``A = sum e_m * k_m`` summed in member order (a rounded multiply, then a
rounded add), one division and one rounding to the element type at the end.
numpy's ``exp`` is not the kernels' polynomial, so results agree within a few
units in the last place, not bit for bit.

The runtime guards of the contract are modelled too: reversed or overlong rows
bring no tokens, a slot at or past ``max_slots`` neither reads nor writes the
ring, a request writes only its own pooled rows that exist, and
``num_requests`` is clamped to ``[0, B]``.
"""

import numpy as np

from .types import element_type, from_f32, to_f32

__all__ = [
    "pool_function",
    "pool_sequence",
    "pool_counts",
    "pool_offsets",
    "compress",
    "seed_tail",
    "ring_close",
]


def _u32(values):
    return [int(v) & 0xFFFFFFFF for v in np.asarray(values).reshape(-1)]


def pool_function(keys, gates, ape, etype=None):
    """Pools member rows: ``keys``, ``gates`` ``[..., K, D]`` -> ``[..., D]``.

    Member ``m`` uses ``ape[m]`` (``ape`` is ``[K, D]`` float32). The result
    has the element type of ``keys`` (or ``etype``).
    """
    etype = element_type(etype if etype is not None else np.asarray(keys).dtype)
    k = to_f32(keys, etype)
    z = to_f32(gates, etype) + np.asarray(ape, dtype=np.float32)
    kpool = z.shape[-2]
    m = z.max(axis=-2, keepdims=True)
    e = np.exp(z - m).astype(np.float32)
    total = e[..., 0, :]
    acc = e[..., 0, :] * k[..., 0, :]
    for j in range(1, kpool):
        total = total + e[..., j, :]
        acc = acc + e[..., j, :] * k[..., j, :]
    return from_f32(acc / total, etype)


def pool_sequence(keys, gates, ape, etype=None):
    """Every complete pool of one whole sequence (``[T, D]``): ``[T//K, D]``."""
    keys = np.asarray(keys)
    gates = np.asarray(gates)
    kpool, dim = np.asarray(ape).shape
    count = keys.shape[0] // kpool
    shape = (count, kpool, dim)
    return pool_function(keys[:count * kpool].reshape(shape),
                         gates[:count * kpool].reshape(shape), ape,
                         etype if etype is not None else keys.dtype)


def _rows(iro, b, num_rows):
    """(start, count) of request b; (0, 0) when its rows are bad."""
    start, end = iro[b], iro[b + 1]
    if start > end or (num_rows is not None and end > num_rows):
        return start, 0
    return start, end - start


def pool_counts(input_row_offsets, cache_lengths, kpool, num_rows=None):
    """Per request: the number of pools made only of this call's tokens."""
    iro = _u32(input_row_offsets)
    cache = _u32(cache_lengths)
    counts = []
    for b in range(len(cache)):
        _, n = _rows(iro, b, num_rows)
        c = cache[b]
        first = -(-c // kpool)
        last = (c + n) // kpool
        counts.append(max(0, last - first))
    return counts


def pool_offsets(input_row_offsets, cache_lengths, kpool):
    """kpool.pool_offsets: exclusive prefix sum of the pool counts (uint32,
    wrapping modulo 2^32)."""
    counts = pool_counts(input_row_offsets, cache_lengths, kpool)
    out = np.zeros(len(counts) + 1, dtype=np.uint32)
    total = 0
    for b, count in enumerate(counts):
        total = (total + count) & 0xFFFFFFFF
        out[b + 1] = total
    return out


def compress(k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths,
             out=None):
    """kpool.compress. Returns ``pooled`` (``out`` updated in place, or a new
    zero-filled ``[pool_row_offsets[B], D]`` array)."""
    k = np.asarray(k)
    gate = np.asarray(gate)
    ape = np.asarray(ape, dtype=np.float32)
    kpool, dim = ape.shape
    iro = _u32(input_row_offsets)
    pro = _u32(pool_row_offsets)
    cache = _u32(cache_lengths)
    batch = len(cache)
    if out is None:
        out = np.zeros((pro[batch] if batch else 0, dim), dtype=k.dtype)
    counts = pool_counts(iro, cache, kpool, num_rows=k.shape[0])
    for b in range(batch):
        s, _ = _rows(iro, b, k.shape[0])
        c = cache[b]
        first = -(-c // kpool)
        skip = first * kpool - c
        for j in range(counts[b]):
            row = pro[b] + j
            if row >= pro[b + 1] or row >= out.shape[0]:
                break
            members = slice(s + skip + j * kpool, s + skip + (j + 1) * kpool)
            out[row] = pool_function(k[members], gate[members], ape, k.dtype)
    return out


def seed_tail(tail, k, gate, input_row_offsets, cache_lengths, slot_idx,
              num_requests=None):
    """kpool.seed_tail: updates ``tail`` ``[S, 2, R, D]`` in place (``R``
    the ring window); returns it. Each request's last ``R`` positions that
    this call brings go to ring rows ``q mod R``."""
    k = np.asarray(k)
    gate = np.asarray(gate)
    window = tail.shape[2]
    iro = _u32(input_row_offsets)
    cache = _u32(cache_lengths)
    slots = _u32(slot_idx)
    batch = len(cache)
    n_req = batch if num_requests is None else min(max(int(num_requests), 0),
                                                   batch)
    for b in range(n_req):
        s, n = _rows(iro, b, k.shape[0])
        slot = slots[b]
        if slot >= tail.shape[0]:
            continue
        c = cache[b]
        end = c + n
        for q in range(max(end - window, c), end):
            tail[slot, 0, q % window] = k[s + q - c]
            tail[slot, 1, q % window] = gate[s + q - c]
    return tail


def ring_close(tail, k, gate, ape, input_row_offsets, cache_lengths, slot_idx,
               num_requests=None):
    """kpool.ring_close. Returns ``(pooled [B, D], closed_pool [B] int32)``."""
    k = np.asarray(k)
    gate = np.asarray(gate)
    ape = np.asarray(ape, dtype=np.float32)
    kpool, dim = ape.shape
    iro = _u32(input_row_offsets)
    cache = _u32(cache_lengths)
    slots = _u32(slot_idx)
    batch = len(cache)
    n_req = batch if num_requests is None else min(max(int(num_requests), 0),
                                                   batch)
    pooled = np.zeros((batch, dim), dtype=k.dtype)
    closed = np.full(batch, -1, dtype=np.int32)
    for b in range(n_req):
        s, n = _rows(iro, b, k.shape[0])
        slot = slots[b]
        c = cache[b]
        held = c % kpool
        if held == 0 or n < kpool - held or slot >= tail.shape[0]:
            continue
        # Position p*K + m of the pending pool is in ring row (p*K + m) mod R.
        rows = [(c - held + m) % tail.shape[2] for m in range(held)]
        keys = np.concatenate([tail[slot, 0, rows], k[s:s + kpool - held]])
        gates = np.concatenate([tail[slot, 1, rows],
                                gate[s:s + kpool - held]])
        pooled[b] = pool_function(keys, gates, ape, k.dtype)
        closed[b] = np.int64(c // kpool).astype(np.int32)
    return pooled, closed
