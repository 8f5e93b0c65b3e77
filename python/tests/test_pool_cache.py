"""The pool cache through the runtime (docs/pool-cache.md): the cache
variants of compress, ring_close and step on caller buffers, their host
validation, and PagedPoolStore, an engine-style loop into a paged FP8 cache.

Every stored entry is checked byte for byte against kpool.reference's
formulas applied to the CPU backend's own dense pool (the contract: "the
formula applied to that backend's dense pooled value"); the dense pools come
from PoolStore, the same kernels without a cache, so a cache that differs
from them also fails.
"""

import numpy as np
import pytest

import kpool
from kpool import reference

from conftest import random_inputs

FORMATS = [("fp8", "hadamard", "absmax"), ("fp8", "hadamard", "pow2"),
           ("fp8", "none", "absmax"), ("element", "hadamard", "absmax"),
           ("element", "none", "absmax")]


def _schedule(rng, lengths, max_chunk):
    """Per request, a list of chunk sizes summing to its length (chunk
    boundaries anywhere, including inside pools), then decode steps."""
    plan = []
    for n in lengths:
        chunks = []
        left = n
        while left:
            c = int(min(left, rng.integers(1, max_chunk + 1)))
            chunks.append(c)
            left -= c
        plan.append(chunks)
    return plan


def _run(store, rows_of, plan, slots, rng):
    """Feeds every request's chunks, several requests per call in a random
    ragged mix; returns the (slot, pool) list the calls reported."""
    cursor = [0] * len(plan)
    step = [0] * len(plan)
    stored = []
    while any(step[b] < len(plan[b]) for b in range(len(plan))):
        live = [b for b in range(len(plan)) if step[b] < len(plan[b])]
        rng.shuffle(live)
        batch = live[:int(rng.integers(1, len(live) + 1))]
        ks, gs, iro, sl = [], [], [0], []
        for b in batch:
            n = plan[b][step[b]]
            k, g = rows_of[b]
            ks.append(k[cursor[b]:cursor[b] + n])
            gs.append(g[cursor[b]:cursor[b] + n])
            iro.append(iro[-1] + n)
            sl.append(slots[b])
            cursor[b] += n
            step[b] += 1
        stored += store.step(np.concatenate(ks), np.concatenate(gs), iro, sl)
    return stored


def test_both_stores_report_the_same_pools():
    """PagedPoolStore.step reports what PoolStore.step reports for the same
    calls: ProducedPool(slot, pool, from_ring), per request the ring's pool
    first, then compress's in id order."""
    rng = np.random.default_rng(11)
    dim, kp = 16, 4
    lengths, slots = [19, 7, 12], [2, 0, 5]
    rows_of = [random_inputs(rng, n, dim, kp, "bf16")[:2] for n in lengths]
    _, _, ape = random_inputs(rng, 1, dim, kp, "bf16")
    plan = _schedule(rng, lengths, 5)
    paged = kpool.PagedPoolStore(ape, 6, "bf16", page_size=2, num_pages=32)
    with kpool.PoolStore(ape, 6, "bf16") as plain:
        got = _run(paged, rows_of, plan, slots, np.random.default_rng(3))
        want = _run(plain, rows_of, plan, slots, np.random.default_rng(3))
    assert got == want and any(p.from_ring for p in got)


@pytest.mark.parametrize("etype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_paged_store_matches_reference(etype, fmt):
    entry, rotate, scale = fmt
    rng = np.random.default_rng(7)
    dim, kp, page = 32, 3, 4
    lengths = [37, 22, 9, 2]
    slots = [3, 0, 5, 1]
    rows_of = []
    for n in lengths:
        k, g, _ = random_inputs(rng, n, dim, kp, etype, signed=True)
        rows_of.append((k, g))
    _, _, ape = random_inputs(rng, 1, dim, kp, etype)
    order = rng.permutation(24).tolist()
    esize = 1 if entry == "fp8" else kpool.DTYPES[etype].itemsize
    stride = page * dim * esize + (4 * page if entry == "fp8" else 0) + 64
    store = kpool.PagedPoolStore(ape, 6, etype, page_size=page, num_pages=24,
                                 entry=entry, rotate=rotate, scale=scale,
                                 page_stride=stride, page_order=order)
    store.buffer[:] = 0xA5
    canary = store.buffer.copy()
    plan = _schedule(rng, lengths, 7)
    stored = _run(store, rows_of, plan, slots, rng)
    # Every pool of every request was stored exactly once.
    want = sorted((slots[b], p) for b in range(len(lengths))
                  for p in range(lengths[b] // kp))
    assert sorted((s.slot, s.pool) for s in stored) == want
    # Reported as PoolStore reports them: the ring's pools are the ones a
    # call closed (their first position before the call).
    assert all(isinstance(s, kpool.ProducedPool) for s in stored)
    assert any(s.from_ring for s in stored)

    # The backend's dense pools: one-shot through PoolStore (no cache).
    dense = kpool.PoolStore(ape, 6, etype)
    for b, n in enumerate(lengths):
        k, g = rows_of[b]
        dense.step(k, g, [0, n], [slots[b]])
    touched = np.zeros(store.buffer.shape, dtype=bool)
    for b, n in enumerate(lengths):
        slot = slots[b]
        pages = store.pages(slot)
        for p in range(n // kp):
            x = kpool.to_f32(dense.pool(slot, p), etype)
            values, s = reference.cache_entry(x, etype, rotate=rotate,
                                              entry=entry, scale=scale)
            got, got_scale = store.entry(slot, p)
            np.testing.assert_array_equal(
                got.view(np.uint8), np.asarray(values).view(np.uint8),
                err_msg=f"slot {slot} pool {p}")
            if entry == "fp8":
                assert np.float32(got_scale).view(np.uint32) == \
                    np.float32(s).view(np.uint32), (slot, p)
            pg, row = pages[p // page], p % page
            start = row * dim * esize
            touched[pg, start:start + dim * esize] = True
            if entry == "fp8":
                off = page * dim + 4 * row
                touched[pg, off:off + 4] = True
    # Nothing outside the entries changed (padding, unused rows, pages).
    np.testing.assert_array_equal(store.buffer[~touched], canary[~touched])


def _fp8_set(etype="bf16", dim=16, kp=4):
    return kpool.kernel_set(etype, dim, kp, cache="fp8", rotate="hadamard")


def _compress_args(rng, etype="bf16", dim=16, kp=4):
    k, g, ape = random_inputs(rng, 12, dim, kp, etype)
    iro = np.array([0, 8, 12], dtype=np.uint32)
    cache = np.array([0, 4], dtype=np.uint32)   # pools 0, 1 and pool 1
    return k, g, ape, iro, cache


# Request 0 (c = 0, 8 tokens) stores pools 0 and 1, request 1 (c = 4, 4
# tokens) pool 1; with page_size 2 all of them are on page index 0.
@pytest.mark.parametrize("table, message", [
    ([[0], [-1]], r"compress: request 1: pool 1 goes to block_table\[1, 0\], "
                  r"which is -1 \(padding\)"),
    ([[0], [9]], r"compress: request 1: block_table\[1, 0\] = 9 is not below "
                 r"the cache's 4 pages \(pool 1\)"),
    ([[0], [0]], r"compress: request 1: pool 1 goes to page 0 row 1, which "
                 r"request 0 also writes in this call"),
    (np.zeros((2, 0), dtype=np.int32),
     r"compress: request 0: pool 0 goes to block_table\[0, 0\], past the "
     r"table's 0 pages per request \(page_size 2\)"),
])
def test_compress_cache_validation(table, message):
    """Host validation names the request and the table entry; a call that
    fails writes nothing."""
    rng = np.random.default_rng(1)
    ks = _fp8_set()
    k, g, ape, iro, cache = _compress_args(rng)
    keys = np.full((4, 2, 16), 0xA5, dtype=np.uint8)
    scales = np.full((4, 2), 7.0, dtype=np.float32)
    pooled = np.zeros((3, 16), dtype=np.uint16)
    with pytest.raises(kpool.KPoolError, match=message):
        ks.compress(k, g, ape, iro, None, cache, out=pooled,
                    block_table=np.array(table, dtype=np.int32),
                    cache_keys=keys, cache_scales=scales)
    assert (keys == 0xA5).all() and (scales == 7.0).all()
    assert (pooled == 0).all()
    # A good table: both requests' pools are stored.
    ks.compress(k, g, ape, iro, None, cache, out=pooled,
                block_table=np.array([[0], [2]], dtype=np.int32),
                cache_keys=keys, cache_scales=scales)
    for p, (page, row) in enumerate([(0, 0), (0, 1), (2, 1)]):
        codes, s = reference.cache_entry(kpool.to_f32(pooled[p], "bf16"),
                                         "bf16")
        np.testing.assert_array_equal(keys[page, row], codes)
        assert scales[page, row] == s


def test_compress_cache_guards_without_validation():
    """validate=False: the kernels' own guards; a -1 entry, a page past N
    and a short table write nothing, the good entries are written."""
    rng = np.random.default_rng(2)
    ks = _fp8_set()
    k, g, ape, iro, cache = _compress_args(rng)
    keys = np.full((3, 2, 16), 0xA5, dtype=np.uint8)
    scales = np.full((3, 2), 7.0, dtype=np.float32)
    # request 0: pools 0, 1 on page index 0 -> page 2; request 1: pool 1 on
    # page index 0 -> -1 (nothing).
    table = np.array([[2], [-1]], dtype=np.int32)
    pooled = ks.compress(k, g, ape, iro, None, cache, block_table=table,
                         cache_keys=keys, cache_scales=scales,
                         validate=False)
    for p, row in ((0, 0), (1, 1)):
        codes, s = reference.cache_entry(kpool.to_f32(pooled[p], "bf16"),
                                         "bf16")
        np.testing.assert_array_equal(keys[2, row], codes)
        assert scales[2, row] == s
    assert (keys[:2] == 0xA5).all() and (scales[:2] == 7.0).all()
    # A page past N and a table of width 0.
    for table in (np.array([[3], [7]], dtype=np.int32),
                  np.zeros((2, 0), dtype=np.int32)):
        keys[:] = 0xA5
        scales[:] = 7.0
        ks.compress(k, g, ape, iro, None, cache, block_table=table,
                    cache_keys=keys, cache_scales=scales, validate=False)
        assert (keys == 0xA5).all() and (scales == 7.0).all()


def test_cache_errors():
    rng = np.random.default_rng(3)
    k, g, ape, iro, cache = _compress_args(rng)
    plain = kpool.kernel_set("bf16", 16, 4)
    with pytest.raises(kpool.KPoolError, match="no pool-cache kernels"):
        plain.compress(k, g, ape, iro, None, cache, block_table=[[0], [1]],
                       cache_keys=np.zeros((2, 2, 16), np.uint8),
                       cache_scales=np.zeros((2, 2), np.float32))
    ks = _fp8_set()
    with pytest.raises(kpool.KPoolError, match="need 'cache_scales'"):
        ks.compress(k, g, ape, iro, None, cache, block_table=[[0], [1]],
                    cache_keys=np.zeros((2, 2, 16), np.uint8))
    with pytest.raises(kpool.KPoolError, match="'cache_scales' must have "
                       r"shape \[2, 2\]"):
        ks.compress(k, g, ape, iro, None, cache, block_table=[[0], [1]],
                    cache_keys=np.zeros((2, 2, 16), np.uint8),
                    cache_scales=np.zeros((2, 3), np.float32))
    with pytest.raises(kpool.KPoolError, match="power-of-two head_dim"):
        kpool.KernelSet("bf16", 12, 4, cache="fp8", rotate="hadamard")
    with pytest.raises(kpool.KPoolError, match="cache must be one of"):
        kpool.KernelSet("bf16", 16, 4, cache="int8")


def test_paged_store_out_of_pages_changes_nothing():
    rng = np.random.default_rng(4)
    k, g, ape = random_inputs(rng, 40, 16, 4, "bf16")
    store = kpool.PagedPoolStore(ape, 2, "bf16", page_size=2, num_pages=3)
    store.step(k[:8], g[:8], [0, 8], [0])          # pools 0, 1: one page
    with pytest.raises(kpool.KPoolError, match="new pages"):
        store.step(k[8:40], g[8:40], [0, 32], [1])  # 8 pools: 4 pages
    assert store.tokens(1) == 0 and store.pages(1) == []
    assert len(store.pages(0)) == 1


@pytest.mark.parametrize("drafts", [1, 3])
def test_paged_store_speculative(drafts):
    """Verify steps of 1 + d tokens with a ring of K + d - 1 rows, every
    accepted length: the cache after rollbacks equals, byte for byte, the
    cache of a store fed only the accepted tokens (rejected pools are
    re-produced into the same entries)."""
    rng = np.random.default_rng(11 + drafts)
    dim, kp = 16, 4
    k, g, ape = random_inputs(rng, 300, dim, kp, "bf16", signed=True)
    junk_k, junk_g, _ = random_inputs(rng, 300, dim, kp, "bf16", signed=True)
    window = kp + drafts - 1
    spec = kpool.PagedPoolStore(ape, 2, "bf16", page_size=4, num_pages=12,
                                ring_window=window, page_order=list(
                                    range(12))[::-1])
    plain = kpool.PagedPoolStore(ape, 2, "bf16", page_size=4, num_pages=12,
                                 ring_window=window,
                                 page_order=list(range(12))[::-1])
    # A prefill of 9 tokens, then verify steps: the accepted token plus d
    # drafts, of which a random prefix is accepted (rejected drafts are
    # junk rows that must leave no trace).
    spec.step(k[:9], g[:9], [0, 9], [1])
    plain.step(k[:9], g[:9], [0, 9], [1])
    pos = 9
    while pos < 120:
        accepted = int(rng.integers(1, drafts + 2))
        rows_k = np.concatenate([k[pos:pos + accepted],
                                 junk_k[pos:pos + drafts + 1 - accepted]])
        rows_g = np.concatenate([g[pos:pos + accepted],
                                 junk_g[pos:pos + drafts + 1 - accepted]])
        spec.step(rows_k, rows_g, [0, drafts + 1], [1])
        spec.accept(1, accepted)
        plain.step(k[pos:pos + accepted], g[pos:pos + accepted],
                   [0, accepted], [1])
        pos += accepted
    assert spec.tokens(1) == plain.tokens(1) == pos
    # The same pages in the same order (a verify step may have taken one
    # more for pools of rejected drafts).
    assert spec.pages(1)[:len(plain.pages(1))] == plain.pages(1)
    for p in range(spec.num_pools(1)):
        got, gs = spec.entry(1, p)
        want, ws = plain.entry(1, p)
        np.testing.assert_array_equal(got, want, err_msg=f"pool {p}")
        assert np.float32(gs).view(np.uint32) == np.float32(ws).view(np.uint32)


def test_paged_store_accept_errors():
    rng = np.random.default_rng(5)
    k, g, ape = random_inputs(rng, 16, 16, 4, "bf16")
    store = kpool.PagedPoolStore(ape, 1, "bf16", page_size=4, num_pages=4)
    store.step(k[:6], g[:6], [0, 6], [0])
    with pytest.raises(kpool.KPoolError,
                       match=r"accept: slot 0: accepted = 7 is outside"):
        store.accept(0, 7)
    # Continuing at 3 after positions [0, 6) needs the ring to hold 0..5.
    with pytest.raises(kpool.KPoolError, match="ring window of at least 6"):
        store.accept(0, 3)
    assert store.tokens(0) == 6
    store.accept(0, 4)  # a pool boundary: always valid
    assert store.tokens(0) == 4
