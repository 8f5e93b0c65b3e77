"""Pool stores: the ring and the pooled keys of every slot.

Both classes are thin wrappers over the library's stores
(kpool-c/Stores.h, the C++ PoolStore and PagedPoolStore), so the slot
bookkeeping, rollback rules, page accounting and messages are the
library's, one implementation for C++, C and Python. :class:`PoolStore`
keeps each slot's pools as rows; :class:`PagedPoolStore` stores them into a
paged pool cache (FP8 or the element type, optionally Hadamard-rotated).
Both take one call of any shape per :meth:`~PoolStore.step` -- ``(k, gate,
input_row_offsets, slot_idx)``, the names of the ops' operands -- and
return the pools that call produced as :class:`ProducedPool` records; both
roll back rejected draft tokens with :meth:`~PoolStore.accept`.

Thread safety: the library serializes the calls on one store (each takes
the store's lock), so several threads may share a store; each
:meth:`~PoolStore.step` returns the pools of its own call, and
:meth:`~PoolStore.close` waits for a call running on another thread, after
which every call raises :class:`KPoolError` ("... the store is closed").
Kernel sets are safe to share as well.
"""

import collections
import ctypes

import numpy as np

from . import _capi, interop, marshal
from ._capi import KPoolError
from .kernels import kernel_set

#: One pool a store's :meth:`~PoolStore.step` produced: its request's ring
#: ``slot``, its ``pool`` id (absolute positions ``[pool*K, (pool+1)*K)``)
#: and whether ``ring_close`` closed it (``from_ring``) or ``compress``
#: built it.
ProducedPool = collections.namedtuple("ProducedPool", "slot pool from_ring")

#: KPoolProducedPool as a numpy record, for the step's produced buffer.
_PRODUCED = np.dtype([("slot", "<u4"), ("from_ring", "<i4"),
                      ("pool", "<i8")])

_INT64 = (-2**63, 2**63 - 1)


def ring_holds_pending(kpool, window, accepted, end):
    """The contract's rollback condition, for engines that track lengths
    themselves: after a call that brought positions ``[c, end)`` of a
    request, continuing it at length ``accepted`` (``c <= accepted <= end``)
    with a ring of ``window`` rows is valid iff ``accepted % kpool == 0`` or
    ``end - (accepted // kpool) * kpool <= window``. The stores'
    :meth:`~PoolStore.accept` checks the same."""
    op = "ring_holds_pending"
    args = [marshal.int_value(op, n, v) for n, v in
            (("kpool", kpool), ("window", window), ("accepted", accepted),
             ("end", end))]
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


def _ape(op, ape):
    """`ape` as a dense float32 [kpool, head_dim] array (nested lists of
    numbers are converted)."""
    if isinstance(ape, np.ndarray):
        if ape.dtype != np.float32:
            raise TypeError(f"{op}: 'ape' must have dtype float32, got "
                            f"{ape.dtype}")
    else:
        try:
            ape = np.array(ape, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{op}: 'ape' must be a float32 array or nested "
                            f"lists of numbers [kpool][head_dim] ({e})") \
                from None
    if ape.ndim != 2:
        raise KPoolError(f"{op}: 'ape' must be [kpool, head_dim], got shape "
                         f"{list(ape.shape)}")
    return np.ascontiguousarray(ape)


def store_slot(op, slot, max_slots):
    """`slot` as an int in ``[0, max_slots)``, else a KPoolError naming
    `op` (the stores' slot argument; nothing wraps on its way to the
    library's uint32)."""
    slot = marshal.int_value(op, "slot", slot, *_INT64)
    if not 0 <= slot < max_slots:
        raise KPoolError(f"{op}: slot {slot} is not in [0, max_slots = "
                         f"{max_slots})")
    return slot


class _Store:
    """What both stores share: the step, accept, the slot queries and
    close, each one library call (subclasses name the C functions)."""

    _prefix = None   # "kpoolPoolStore" or "kpoolPagedPoolStore"

    def _fn(self, name):
        return getattr(self._lib, self._prefix + name)

    def close(self):
        """Closes the store: waits for a call running on another thread,
        then frees the ring and the pools; every later call raises
        KPoolError. Idempotent (also done when the store is
        garbage-collected)."""
        handle = getattr(self, "_handle", None)
        if handle:
            self._fn("Close")(handle)

    @property
    def closed(self):
        """Whether :meth:`close` ran."""
        return bool(self._fn("IsClosed")(self._handle))

    def __del__(self):
        # No thread can be in a call: each holds a reference to the store.
        handle = getattr(self, "_handle", None)
        if handle:
            self._fn("Destroy")(handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _slot(self, op, slot):
        return store_slot(op, slot, self.max_slots)

    def _count(self, op, value):
        """A query's answer; -1 for a valid slot means the store is
        closed."""
        if value < 0:
            raise KPoolError(f"{op}: the store is closed")
        return int(value)

    def step(self, k, gate, input_row_offsets, slot_idx):
        """Runs one call: request ``b`` brings rows
        ``[input_row_offsets[b], input_row_offsets[b+1])`` of ``k`` and
        ``gate`` for ring slot ``slot_idx[b]``, continuing where that slot's
        earlier calls stopped. Returns the :class:`ProducedPool` list of
        the pools this call produced (per request: the ring's pool first,
        then compress's, in id order), never another call's. On error
        raises :class:`KPoolError` naming the request, the slot and the
        field, and nothing changes."""
        op = "step"
        slots = _slots(op, slot_idx)
        iro = _offsets(op, input_row_offsets, slots.shape[0] + 1)
        kv = _rows(op, "k", k, self.dtype)
        gv = _rows(op, "gate", gate, self.dtype)
        most = self._lib.kpoolStoreMaxProduced(self.kpool, kv.sizes[0],
                                               slots.shape[0])
        produced = np.empty(max(most, 0), dtype=_PRODUCED)
        count = ctypes.c_int64()
        u32p = ctypes.POINTER(ctypes.c_uint32)
        _capi.check(self._fn("Step")(
            self._handle, kv, gv, slots.shape[0], iro.ctypes.data_as(u32p),
            slots.ctypes.data_as(u32p),
            produced.ctypes.data if produced.size else None, produced.size,
            ctypes.byref(count)))
        return [ProducedPool(s, p, bool(r))
                for s, r, p in produced[:count.value].tolist()]

    def step_requests(self, requests):
        """:meth:`step` over ``[(slot, k_rows, gate_rows), ...]``: the rows
        of each request as separate arrays (concatenated here)."""
        requests = list(requests)
        empty = np.zeros((0, self.head_dim), dtype=self.dtype)
        ks = [np.asarray(interop.host_array("step", "k", r[1]))
              for r in requests] or [empty]
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

    def accept(self, slot, accepted):
        """Speculative decoding: keeps the first ``accepted`` of the tokens
        the slot's last :meth:`step` brought (or that an earlier accept
        left), forgets its pools at and after the first rejected position
        (the next steps re-produce them) and sets its length to the step's
        start plus ``accepted``. Raises :class:`KPoolError`, changing
        nothing, when ``accepted`` is out of range or the ring window no
        longer holds the pending pool's members -- checked against how far
        the last step wrote the ring, also after earlier accepts (the
        message names the slot and the window needed)."""
        op = "accept"
        _capi.check(self._fn("Accept")(
            self._handle, self._slot(op, slot),
            marshal.int_value(op, "accepted", accepted, *_INT64)))

    def tokens(self, slot):
        """Tokens the slot has seen (its next cache length)."""
        op = "tokens"
        return self._count(op, self._fn("GetTokens")(
            self._handle, self._slot(op, slot)))

    def num_pools(self, slot):
        """Complete pools of the slot (ids ``0 .. num_pools - 1``)."""
        op = "num_pools"
        return self._count(op, self._fn("GetNumPools")(
            self._handle, self._slot(op, slot)))


class PoolStore(_Store):
    """A tail ring and the pooled keys of every slot, over the library's
    PoolStore.

    Each :meth:`step` takes one call of any shape (prefill, chunked prefill,
    decode, mixed ragged batches) and runs the fused step (ring_close,
    compress and seed_tail). A slot's pools are bit-identical whatever the
    chunking.

    ``ape`` is ``[kpool, head_dim]`` float32 (copied); ``dtype`` the element
    type of keys and gates ("bf16"/uint16, "f16"/float16, "f32"/float32).
    ``ring_window`` (default ``kpool``) is the ring's rows per slot, at
    least ``kpool``: with ``kpool + d - 1`` rows, :meth:`accept` can roll
    back any rejected suffix of a verify step of ``1 + d`` tokens.

    Thread-safe: calls on one store run one at a time (the library's lock);
    :meth:`close` waits for a running call (see the module doc).
    """

    _prefix = "kpoolPoolStore"

    def __init__(self, ape, max_slots, dtype, *, ring_window=None,
                 openmp=False, vector_size=16):
        op = "pool store"
        ape = _ape(op, ape)
        max_slots = marshal.int_value(op, "max_slots", max_slots, 1, 2**31)
        ring_window = (0 if ring_window is None else marshal.int_value(
            op, "ring_window", ring_window, 1, 2**31))
        self.kernels = kernel_set(dtype, ape.shape[1], ape.shape[0],
                                  openmp=openmp, vector_size=vector_size)
        self.dtype = self.kernels.dtype
        self.head_dim = self.kernels.head_dim
        self.kpool = self.kernels.kpool
        lib = _capi.load()
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolPoolStoreCreateWithWindow(
            self.kernels._handle, max_slots, ring_window,
            ape.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            ctypes.byref(handle)))
        self._lib, self._handle = lib, handle
        self.max_slots = max_slots
        #: Ring rows per slot (``R >= kpool``).
        self.ring_window = int(lib.kpoolPoolStoreGetRingWindow(handle))

    def pools(self, slot, first=0, count=None):
        """A copy of pools ``[first, first + count)`` of the slot (all by
        default), ``[count, head_dim]``, made under the store's lock."""
        op = "pools"
        slot = self._slot(op, slot)
        first = marshal.int_value(op, "first", first, *_INT64)
        if count is None:
            count = self.num_pools(slot) - first
        count = marshal.int_value(op, "count", count, *_INT64)
        # Rows for a range the slot has; otherwise none, and the library
        # names the range.
        have = self.num_pools(slot)
        rows = count if 0 <= first and 0 <= count <= have - first else 0
        out = np.zeros((rows, self.head_dim), dtype=self.dtype)
        view = marshal.view(op, "dst", out, 2, writable=True)
        view.sizes[0] = count
        _capi.check(self._lib.kpoolPoolStoreCopyPools(
            self._handle, slot, first, count, view))
        return out

    def pool(self, slot, pool):
        """A copy of one pool, ``[head_dim]``."""
        return self.pools(slot, pool, 1)[0]

    def reset(self, slot):
        """Forgets the slot's tokens and pools (for a new request)."""
        op = "reset"
        _capi.check(self._lib.kpoolPoolStoreReset(self._handle,
                                                  self._slot(op, slot)))


class PagedPoolStore(_Store):
    """The pooled keys of every slot in the production pool cache, over the
    library's PagedPoolStore.

    A tail ring per slot, as in :class:`PoolStore`, but every pool goes
    straight into a paged cache (docs/pool-cache.md), optionally rotated by
    the Walsh-Hadamard transform and quantized to FP8 (e4m3fn) with one
    float32 scale per pool: each :meth:`step` is one fused kernel
    (``kpool.step`` with ``to_cache``) that pools, rounds, rotates,
    quantizes and stores.

    The cache is one uint8 array owned by this object (:attr:`buffer`,
    which stays valid after :meth:`close`) of ``num_pages`` pages of
    ``page_stride`` bytes: ``page_size * head_dim`` entry elements (uint8
    codes for ``entry="fp8"``, the element type for ``entry="element"``)
    then, for FP8, ``page_size`` float32 scales, the DeepSeek/vLLM indexer
    page. :attr:`cache_keys` and :attr:`cache_scales` are strided views of
    it. ``page_stride`` defaults to the page's size; a larger one pads the
    pages. A slot's pools get pages from a free list as they need them
    (:meth:`pages`), in the order the list gives them; ``page_order`` (a
    permutation of the page ids) sets that order, e.g. to test pages out of
    order. :meth:`release` returns a slot's pages.

    Thread-safe, as :class:`PoolStore`.
    """

    _prefix = "kpoolPagedPoolStore"

    def __init__(self, ape, max_slots, dtype, *, page_size, num_pages,
                 entry="fp8", rotate="hadamard", scale="absmax",
                 page_stride=None, page_order=None, ring_window=None,
                 openmp=False, vector_size=16):
        op = "paged pool store"
        ape = _ape(op, ape)
        marshal.choice(op, "entry", entry, ("element", "fp8"))
        ints = {n: marshal.int_value(op, n, v, *_INT64) for n, v in (
            ("max_slots", max_slots), ("page_size", page_size),
            ("num_pages", num_pages),
            ("page_stride", 0 if page_stride is None else page_stride),
            ("ring_window", 0 if ring_window is None else ring_window))}
        order = None
        if page_order is not None:
            order = np.array([marshal.int_value(op, "page_order", p, *_INT64)
                              for p in page_order], dtype=np.int64)
            if order.shape[0] != ints["num_pages"]:
                raise KPoolError(f"{op}: page_order must be a permutation "
                                 f"of the {ints['num_pages']} page ids, got "
                                 f"{order.shape[0]} entries")
        self.kernels = kernel_set(dtype, ape.shape[1], ape.shape[0],
                                  openmp=openmp, vector_size=vector_size,
                                  cache=entry, rotate=rotate, scale=scale)
        self.dtype, self.head_dim = self.kernels.dtype, self.kernels.head_dim
        self.kpool = self.kernels.kpool
        #: ``(entry, rotate, scale)``.
        self.format = (entry, rotate, scale)
        # The cache is this object's, so that it outlives close(): the
        # documented page (pageSize x head_dim entry bytes, then the FP8
        # scales) sizes it; the library checks every option against it.
        esize = 1 if entry == "fp8" else self.dtype.itemsize
        pages, size = ints["num_pages"], ints["page_size"]
        stride = ints["page_stride"] or (size * self.head_dim * esize
                                         + (4 * size if entry == "fp8" else 0))
        valid = 1 <= pages < 2**31 and 1 <= size <= 2**31 and stride >= 1
        try:
            buffer = np.zeros((pages, stride) if valid else (0, 0), np.uint8)
        except (MemoryError, ValueError):
            raise KPoolError(f"{op}: could not allocate the cache of "
                             f"{pages} pages of {stride} bytes") from None
        options = _capi.PagedStoreOptions(
            ints["max_slots"], size, pages, ints["page_stride"],
            ints["ring_window"],
            None if order is None else order.ctypes.data_as(
                ctypes.POINTER(ctypes.c_int64)),
            buffer.ctypes.data if valid else None)
        lib = _capi.load()
        handle = ctypes.c_void_p()
        _capi.check(lib.kpoolPagedPoolStoreCreate(
            self.kernels._handle,
            ape.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            ctypes.byref(options), ctypes.byref(handle)))
        self._lib, self._handle = lib, handle
        layout = _capi.PagedStoreLayout()
        _capi.check(lib.kpoolPagedPoolStoreGetLayout(handle,
                                                     ctypes.byref(layout)))
        self.max_slots = int(layout.maxSlots)
        #: Ring rows per slot (``R >= kpool``).
        self.ring_window = int(layout.ringWindow)
        self.page_size, self.num_pages = int(layout.pageSize), \
            int(layout.numPages)
        self.page_stride = int(layout.pageStride)
        self._entry_dtype = (np.dtype(np.uint8) if entry == "fp8"
                             else self.dtype)
        # The library writes into it until close: held here whatever the
        # caller does with the attribute.
        self._cache = buffer
        #: The whole cache, ``[num_pages, page_stride]`` uint8.
        self.buffer = buffer
        #: ``[num_pages, page_size, head_dim]`` entries (a view of buffer).
        self.cache_keys = self._over(layout.cacheKeys, self._entry_dtype)
        #: ``[num_pages, page_size]`` float32 scales (FP8), or None.
        self.cache_scales = (self._over(layout.cacheScales,
                                        np.dtype(np.float32))
                             if entry == "fp8" else None)

    def _over(self, view, dtype):
        """The library's view of the cache, as a numpy view of buffer."""
        return np.ndarray(
            tuple(view.sizes[d] for d in range(view.rank)), dtype=dtype,
            buffer=self._cache, offset=view.data - self._cache.ctypes.data,
            strides=tuple(view.strides[d] * dtype.itemsize
                          for d in range(view.rank)))

    def _ids(self, op, fn, *args):
        ids = np.empty(self.num_pages, dtype=np.uint32)
        count = ctypes.c_int64()
        _capi.check(fn(self._handle, *args,
                       ids.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
                       ids.size, ctypes.byref(count)))
        return ids[:count.value].tolist()

    def pages(self, slot):
        """The slot's pages, in block-table order (pool ``p`` is on page
        ``pages[p // page_size]``, row ``p % page_size``)."""
        op = "pages"
        return self._ids(op, self._lib.kpoolPagedPoolStoreGetPages,
                         self._slot(op, slot))

    def free_pages(self):
        """The free pages, in the order steps will take them."""
        return self._ids("free_pages",
                         self._lib.kpoolPagedPoolStoreGetFreePages)

    def entry(self, slot, pool):
        """Pool ``pool`` of the slot as stored: ``(codes uint8 [head_dim],
        scale float32)`` for FP8, ``(values [head_dim], None)`` otherwise
        (copies, made under the store's lock)."""
        op = "entry"
        slot = self._slot(op, slot)
        pool = marshal.int_value(op, "pool", pool, *_INT64)
        values = np.empty(self.head_dim, dtype=self._entry_dtype)
        scale = ctypes.c_float()
        _capi.check(self._lib.kpoolPagedPoolStoreGetEntry(
            self._handle, slot, pool, values.ctypes.data, values.nbytes,
            ctypes.byref(scale)))
        return values, (np.float32(scale.value)
                        if self.cache_scales is not None else None)

    def release(self, slot):
        """Forgets the slot's tokens, clears its ring rows and returns its
        pages to the free list (for a new request)."""
        op = "release"
        _capi.check(self._lib.kpoolPagedPoolStoreRelease(
            self._handle, self._slot(op, slot)))
