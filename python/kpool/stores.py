"""Pool stores: the ring and the pooled keys of every slot.

:class:`PoolStore` runs over the library's PoolStore (ring_close, compress
and seed_tail in one fused step per call, pools kept per slot);
:class:`PagedPoolStore` keeps every pool in a paged pool cache (FP8 or the
element type, optionally Hadamard-rotated), one fused ``step`` with the
cache destination per call. Both take one call of any shape per
:meth:`step` -- ``(k, gate, input_row_offsets, slot_idx)``, the names of
the ops' operands -- and return the pools it produced as
:class:`ProducedPool` records; both roll back rejected draft tokens with
:meth:`accept`.

Not thread-safe: one thread at a time per store.
"""

import collections
import ctypes
import operator

import numpy as np

from . import _capi, interop, marshal
from ._capi import KPoolError
from .kernels import kernel_set

#: One pool a store's :meth:`~PoolStore.step` produced: its request's ring
#: ``slot``, its ``pool`` id (absolute positions ``[pool*K, (pool+1)*K)``)
#: and whether ``ring_close`` closed it (``from_ring``) or ``compress``
#: built it.
ProducedPool = collections.namedtuple("ProducedPool", "slot pool from_ring")


def ring_holds_pending(kpool, window, accepted, end):
    """The contract's rollback condition, for engines that track lengths
    themselves: after a call that brought positions ``[c, end)`` of a
    request, continuing it at length ``accepted`` (``c <= accepted <= end``)
    with a ring of ``window`` rows is valid iff ``accepted % kpool == 0`` or
    ``end - (accepted // kpool) * kpool <= window``. :meth:`PoolStore.accept`
    checks the same."""
    args = [operator.index(v) for v in (kpool, window, accepted, end)]
    return bool(_capi.load().kpoolRingHoldsPending(*args))


def _slots(op, slot_idx):
    """A store step's slots, as dense uint32."""
    return np.ascontiguousarray(marshal.metadata(
        op, "slot_idx", interop.host_array(op, "slot_idx", slot_idx)))


def _offsets(op, input_row_offsets, length):
    """A store step's row offsets (`length` of them), as dense uint32."""
    iro = np.ascontiguousarray(marshal.metadata(
        op, "input_row_offsets",
        interop.host_array(op, "input_row_offsets", input_row_offsets)))
    if iro.shape[0] != length:
        raise KPoolError(f"{op}: 'input_row_offsets' must have {length} "
                         f"entries, got {iro.shape[0]}")
    return iro


def _rows(op, name, rows, dtype):
    """The view of a step's `k` or `gate` (host arrays of the store's
    element type)."""
    array = interop.host_array(op, name, rows)
    marshal.check_array(op, name, array, 2, (dtype,), rows)
    return marshal.view(op, name, array, 2)


def store_slot(op, slot, max_slots):
    """`slot` as an int in ``[0, max_slots)``, else a KPoolError naming
    `op` (the stores' slot argument)."""
    slot = marshal.int_value(op, "slot", slot, -2**63)
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
        max_slots = marshal.int_value(op, "max_slots", max_slots, 1, 2**31)
        ring_window = (0 if ring_window is None
                       else marshal.int_value(op, "ring_window", ring_window, 1, 2**31))
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

    def step(self, k, gate, input_row_offsets, slot_idx):
        """Runs one call (request ``b`` brings rows ``[input_row_offsets[b],
        input_row_offsets[b+1])`` of ``k`` and ``gate`` for ring slot
        ``slot_idx[b]``); returns the :class:`ProducedPool` list (per
        request: the ring's pool first, then compress's, in id order). On
        error raises :class:`KPoolError` and nothing changes."""
        op = "step"
        handle = self._live()
        slots = _slots(op, slot_idx)
        iro = _offsets(op, input_row_offsets, slots.shape[0] + 1)
        u32p = ctypes.POINTER(ctypes.c_uint32)
        produced = ctypes.c_int64()
        _capi.check(self._lib.kpoolPoolStoreStep(
            handle, _rows(op, "k", k, self.dtype),
            _rows(op, "gate", gate, self.dtype), slots.shape[0],
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
        ks = [np.asarray(interop.host_array("step", "k", r[1]))
              for r in requests] or [
            empty]
        gates = [np.asarray(interop.host_array("step", "gate", r[2]))
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
        return store_slot(op, slot, self.max_slots)

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
            marshal.int_value("accept", "accepted", accepted, -2**63)))

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
        first = marshal.int_value("pools", "first", first, -2**63)
        if count is None:
            count = self.num_pools(slot) - first
        count = marshal.int_value("pools", "count", count, -2**63)
        out = np.zeros((max(count, 0), self.head_dim), dtype=self.dtype)
        _capi.check(self._lib.kpoolPoolStoreCopyPools(
            self._live(), slot, first, count,
            marshal.view("pools", "dst", out, 2, writable=True)))
        return out

    def pool(self, slot, pool):
        """A copy of one pool, ``[head_dim]``."""
        return self.pools(slot, pool, 1)[0]

    def reset(self, slot):
        """Forgets the slot's tokens and pools (for a new request)."""
        _capi.check(self._lib.kpoolPoolStoreReset(
            self._live(), self._slot("reset", slot)))


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
        marshal.choice(op, "entry", entry, ("element", "fp8"))
        self.kernels = kernel_set(dtype, ape.shape[1], ape.shape[0],
                                  openmp=openmp, vector_size=vector_size,
                                  cache=entry, rotate=rotate, scale=scale)
        self.dtype, self.head_dim = self.kernels.dtype, self.kernels.head_dim
        self.kpool = self.kernels.kpool
        #: ``(entry, rotate, scale)``.
        self.format = (entry, rotate, scale)
        self.max_slots = marshal.int_value(op, "max_slots", max_slots, 1, 2**31)
        self.page_size = marshal.int_value(op, "page_size", page_size, 1, 2**31)
        self.num_pages = marshal.int_value(op, "num_pages", num_pages, 1, 2**31 - 1)
        window = self.kpool if ring_window is None else marshal.int_value(
            op, "ring_window", ring_window, self.kpool, 2**31)
        self.ring_window = window
        esize = 1 if entry == "fp8" else self.dtype.itemsize
        keys_bytes = self.page_size * self.head_dim * esize
        page_bytes = keys_bytes + (4 * self.page_size if entry == "fp8" else 0)
        self.page_stride = page_bytes if page_stride is None else marshal.int_value(
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
                 else [marshal.int_value(op, "page_order", p, 0, self.num_pages - 1)
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
        return store_slot(op, slot, self.max_slots)

    def step(self, k, gate, input_row_offsets, slot_idx):
        """Runs one call (request ``b`` brings rows ``[input_row_offsets[b],
        input_row_offsets[b+1])`` of ``k`` and ``gate`` for slot
        ``slot_idx[b]``); returns the :class:`ProducedPool` list of the
        pools it stored (per request: the ring's pool first, then
        compress's, in id order), as :meth:`PoolStore.step` does. Pages for
        the new pools come from the free list first; on an error (bad
        metadata, no free page) nothing changes."""
        op = "step"
        slot_list = [self._slot(op, s) for s in _slots(op, slot_idx).tolist()]
        iro = _offsets(op, input_row_offsets, len(slot_list) + 1)
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
            # The pool the ring held open (c not a multiple of kpool) is
            # the one ring_close closes.
            stored += [ProducedPool(slot, p, p * self.kpool < c)
                       for p in range(c // self.kpool, (c + n) // self.kpool)]
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
        accepted = marshal.int_value("accept", "accepted", accepted, 0, end - start)
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
        pool = marshal.int_value("entry", "pool", pool, 0, self.num_pools(slot) - 1)
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
