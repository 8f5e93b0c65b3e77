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

Subnormal weights (docs/semantics.md, "Subnormal weights"): a weight
``exp(z_m - M)`` below ``2^-126`` is flushed to zero or kept, as the backend
does; ``subnormal_weights`` says which (``"flush"``, the CPU kernels' rule
and the default, or ``"keep"``, the GPU kernels'; :data:`SUBNORMAL_WEIGHTS`
maps backends to their rule). A flushed weight is one whose float32 argument
``z_m - M`` is below ``-126 ln 2``.

The runtime guards of the contract are modelled too: reversed or overlong rows
bring no tokens, a slot at or past ``max_slots`` neither reads nor writes the
ring, a request writes only its own pooled rows that exist, and
``num_requests`` is clamped to ``[0, B]``.

The pool cache (paged ``cache_keys``/``cache_scales``, Hadamard rotation, FP8
E4M3FN codes with absmax or power-of-two scales) is modelled entry by entry:
:func:`cache_entry` computes what one pool's entry holds from its dense row,
:func:`store_cache` places it through the block table. FP8 codes are uint8.
"""

import numpy as np

from .types import element_type, from_f32, to_f32

__all__ = [
    "SUBNORMAL_WEIGHTS",
    "pool_function",
    "pool_sequence",
    "pool_counts",
    "pool_offsets",
    "compress",
    "seed_tail",
    "ring_close",
    "e4m3fn_decode",
    "e4m3fn_encode",
    "hadamard",
    "cache_entry",
    "store_cache",
]


#: What each backend's kernels do with softmax weights below 2^-126.
SUBNORMAL_WEIGHTS = {"cpu": "flush", "cuda": "keep"}

#: The float32 just above -126 ln 2: a weight exp(x) is below 2^-126
#: exactly when the float32 argument x is below it.
_FLUSH_BELOW = np.float32(-87.33654022216796875)


def _weights(x, subnormal_weights):
    """exp(x) of float32 arguments under a subnormal-weight rule."""
    if subnormal_weights not in ("flush", "keep"):
        raise ValueError("subnormal_weights must be 'flush' or 'keep', got "
                         f"{subnormal_weights!r}")
    e = np.exp(x).astype(np.float32)
    if subnormal_weights == "flush":
        e = np.where(x < _FLUSH_BELOW, np.float32(0), e).astype(np.float32)
    return e


def _u32(values):
    return [int(v) & 0xFFFFFFFF for v in np.asarray(values).reshape(-1)]


def pool_function(keys, gates, ape, etype=None, subnormal_weights="flush"):
    """Pools member rows: ``keys``, ``gates`` ``[..., K, D]`` -> ``[..., D]``.

    Member ``m`` uses ``ape[m]`` (``ape`` is ``[K, D]`` float32). The result
    has the element type of ``keys`` (or ``etype``). ``subnormal_weights``:
    ``"flush"`` (the CPU kernels) or ``"keep"`` (the GPU kernels).
    """
    etype = element_type(etype if etype is not None else np.asarray(keys).dtype)
    k = to_f32(keys, etype)
    z = to_f32(gates, etype) + np.asarray(ape, dtype=np.float32)
    kpool = z.shape[-2]
    m = z.max(axis=-2, keepdims=True)
    e = _weights((z - m).astype(np.float32), subnormal_weights)
    total = e[..., 0, :]
    acc = e[..., 0, :] * k[..., 0, :]
    for j in range(1, kpool):
        total = total + e[..., j, :]
        acc = acc + e[..., j, :] * k[..., j, :]
    return from_f32(acc / total, etype)


def pool_sequence(keys, gates, ape, etype=None, subnormal_weights="flush"):
    """Every complete pool of one whole sequence (``[T, D]``): ``[T//K, D]``."""
    keys = np.asarray(keys)
    gates = np.asarray(gates)
    kpool, dim = np.asarray(ape).shape
    count = keys.shape[0] // kpool
    shape = (count, kpool, dim)
    return pool_function(keys[:count * kpool].reshape(shape),
                         gates[:count * kpool].reshape(shape), ape,
                         etype if etype is not None else keys.dtype,
                         subnormal_weights)


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
             out=None, subnormal_weights="flush"):
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
            out[row] = pool_function(k[members], gate[members], ape, k.dtype,
                                     subnormal_weights)
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
               num_requests=None, subnormal_weights="flush"):
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
        pooled[b] = pool_function(keys, gates, ape, k.dtype,
                                  subnormal_weights)
        closed[b] = np.int64(c // kpool).astype(np.int32)
    return pooled, closed


# --- The pool cache -----------------------------------------------------------


def _e4m3fn_values():
    """The value of every E4M3FN code 0..255 (float64; NaN for 0x7f, 0xff):
    1 sign, 4 exponent (bias 7), 3 mantissa bits, no infinities."""
    values = np.empty(256, dtype=np.float64)
    for code in range(256):
        exponent, mantissa = (code >> 3) & 0xF, code & 0x7
        if exponent == 0xF and mantissa == 0x7:
            value = np.nan
        elif exponent == 0:
            value = mantissa * 2.0**-9
        else:
            value = (1 + mantissa / 8) * 2.0**(exponent - 7)
        values[code] = -value if code & 0x80 else value
    return values


_E4M3FN = _e4m3fn_values()


def e4m3fn_decode(codes):
    """E4M3FN codes (uint8) -> float32 values, exactly; 0x7f/0xff are NaN."""
    return _E4M3FN[np.asarray(codes, dtype=np.uint8)].astype(np.float32)


def e4m3fn_encode(x):
    """float32 values -> E4M3FN codes (uint8), rounded to nearest, ties to the
    even code. Magnitudes above 448 saturate to 448 (the cache clamps before
    encoding); NaN gives 0x7f with its sign. The sign is kept: -0 and
    negatives that round to zero encode as 0x80."""
    x = np.asarray(x, dtype=np.float32)
    magnitude = np.abs(x.astype(np.float64))
    magnitude = np.where(np.isnan(magnitude), 0.0, magnitude)  # coded below
    table = _E4M3FN[:0x7F]  # codes 0..0x7e, increasing values
    # hi: the first code whose value is >= |x|; lo the one below it.
    hi = np.searchsorted(table, np.minimum(magnitude, 448.0), side="left")
    lo = np.maximum(hi - 1, 0)
    midpoint = (table[lo] + table[hi]) / 2  # exact in float64
    code = np.where(magnitude < midpoint, lo, hi)
    tie = magnitude == midpoint
    code = np.where(tie, np.where(lo % 2 == 0, lo, hi), code)
    code = np.where(magnitude >= table[hi], hi, code)  # exact or |x| >= 448
    code = np.where(np.isnan(x), 0x7F, code)
    sign = np.where(np.signbit(x), 0x80, 0)
    return (code | sign).astype(np.uint8)


def hadamard(x):
    """The unnormalized fast Walsh-Hadamard transform over the last axis
    (``D`` a power of two), in float32: stages ``h = 1, 2, ..., D/2``, each
    replacing every pair ``(x_i, x_{i+h})`` with ``i mod 2h < h`` by
    ``(x_i + x_{i+h}, x_i - x_{i+h})``."""
    y = np.array(x, dtype=np.float32)
    dim = y.shape[-1]
    if dim < 1 or dim & (dim - 1):
        raise ValueError(f"hadamard: D = {dim} is not a power of two")
    h = 1
    while h < dim:
        for i in range(dim):
            if i % (2 * h) < h:
                u, v = y[..., i].copy(), y[..., i + h].copy()
                y[..., i] = u + v
                y[..., i + h] = u - v
        h *= 2
    return y


def cache_entry(x, etype, rotate="hadamard", entry="fp8", scale="absmax"):
    """The pool-cache entry of dense pooled rows.

    ``x`` is ``[..., D]`` float32: the dense output's values widened to f32
    (``to_f32(pooled_row, etype)``). Returns ``(values, scales)``: for
    ``entry="fp8"`` uint8 E4M3FN codes and float32 scales (one per row, a
    scalar for a single row); for ``entry="element"`` the rotated values in
    ``etype``'s storage and ``None``.
    """
    etype = element_type(etype)
    if rotate not in ("hadamard", "none"):
        raise ValueError(f"cache_entry: rotate {rotate!r}")
    if entry not in ("fp8", "element"):
        raise ValueError(f"cache_entry: entry {entry!r}")
    if scale not in ("absmax", "pow2"):
        raise ValueError(f"cache_entry: scale {scale!r}")
    y = np.array(x, dtype=np.float32)
    if rotate == "hadamard":
        c = np.float32(1.0 / np.sqrt(float(y.shape[-1])))
        y = to_f32(from_f32(hadamard(y) * c, etype), etype)
    if entry == "element":
        return from_f32(y, etype), None
    a = np.maximum(np.abs(y).max(axis=-1), np.float32(1e-4))
    s = np.asarray(a * (np.float32(1) / np.float32(448)), dtype=np.float32)
    if scale == "pow2":
        # s = m * 2^e, m in [0.5, 1): s when m == 0.5, else 2^e (exact).
        m, e = np.frexp(s)
        s = np.where(m == 0.5, s, np.ldexp(np.float32(1), e)).astype(
            np.float32)
    q = (y / s[..., None]).astype(np.float32)
    q = np.minimum(np.maximum(q, np.float32(-448)), np.float32(448))
    return e4m3fn_encode(q), s[()]


def store_cache(cache_keys, cache_scales, block_table, batch_row, pool_id,
                entry, scale=None):
    """Places one entry (``entry`` ``[D]``; ``scale`` for FP8, ``None`` for
    an element entry) as pool ``pool_id`` of ``batch_row``, in place:
    ``page = block_table[batch_row, pool_id // page_size]`` read as unsigned
    32-bit, ``row = pool_id % page_size``. ``cache_keys`` is
    ``[N, page_size, D]``, ``cache_scales`` ``[N, page_size]`` float32 (may
    be ``None`` without a scale). Writes nothing when the batch row, the page
    index or the page is out of range (for FP8, of ``cache_scales`` too).
    Returns whether it wrote."""
    block_table = np.asarray(block_table)
    page_size = cache_keys.shape[1]
    if batch_row < 0 or pool_id < 0 or page_size < 1:
        return False
    index, row = pool_id // page_size, pool_id % page_size
    if batch_row >= block_table.shape[0] or index >= block_table.shape[1]:
        return False
    page = int(block_table[batch_row, index]) & 0xFFFFFFFF
    if page >= cache_keys.shape[0]:
        return False
    if scale is not None and (page >= cache_scales.shape[0]
                              or row >= cache_scales.shape[1]):
        return False
    cache_keys[page, row] = entry
    if scale is not None:
        cache_scales[page, row] = scale
    return True
