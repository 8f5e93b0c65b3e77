"""Speculative decoding: the ring window R >= K and PoolStore.accept.

Verify steps bring 1 + d tokens whose rejected drafts are junk; after
``accept`` every pool must equal (bit for bit) what the accepted sequence
gives sent without drafts. The ops themselves with R > K are checked
against the numpy reference."""

import numpy as np
import pytest

import kpool
from conftest import ETYPES, assert_bits, random_inputs


def one_shot(k, gate, ape):
    n = k.shape[0]
    return kpool.compress(k, gate, ape, [0, n], None, [0])


@pytest.mark.parametrize("etype", ETYPES)
@pytest.mark.parametrize("kpool_,drafts", [(4, 3), (3, 1), (1, 2), (4, 7)])
def test_random_verify_schedules(rng, etype, kpool_, drafts):
    dim = 8
    window = kpool_ + drafts - 1
    slots = [3, 0, 5]
    truth = {s: random_inputs(rng, 200, dim, kpool_, etype, signed=True)
             for s in slots}
    ape = truth[slots[0]][2]
    store = kpool.PoolStore(ape, 6, etype, ring_window=window)
    assert store.ring_window == window
    kept = {s: 0 for s in slots}
    for _ in range(25):
        ks, gates, iro, batch, plan = [], [], [0], [], {}
        for s in slots:
            mode = rng.integers(0, 4)
            if mode == 0:
                continue
            if mode == 1:
                n = int(rng.integers(0, 3 * kpool_ + 3))
                accepted = n
            else:
                # The accepted token and `drafts` drafts: none to all of
                # the drafts are accepted.
                n = 1 + drafts
                accepted = int(rng.integers(1, n + 1))
            k, g, _ = truth[s]
            junk_k, junk_g, _ = random_inputs(rng, n - accepted, dim, kpool_,
                                              etype, signed=True)
            ks += [k[kept[s]:kept[s] + accepted], junk_k]
            gates += [g[kept[s]:kept[s] + accepted], junk_g]
            iro.append(iro[-1] + n)
            batch.append(s)
            plan[s] = (n, accepted)
        if not batch:
            continue
        store.step(np.concatenate(ks), np.concatenate(gates), iro, batch)
        for s, (n, accepted) in plan.items():
            store.accept(s, accepted)
            kept[s] += accepted
            assert store.tokens(s) == kept[s]
            assert store.num_pools(s) == kept[s] // kpool_
    for s in slots:
        k, g, _ = truth[s]
        n = kept[s]
        assert_bits(store.pools(s), one_shot(k[:n], g[:n], ape))


def test_window_too_small_is_rejected(rng):
    """K = 4 with R = 5: after a verify step of 4 tokens from c = 2 (to
    end = 6), going back to length 2 (dropping the verify step's first token
    too) needs positions 0 and 1 of pool 0, which the step overwrote (R must
    be at least end - 0 = 6)."""
    dim, kpool_ = 8, 4
    k, g, ape = random_inputs(rng, 16, dim, kpool_, "bf16")
    store = kpool.PoolStore(ape, 2, "bf16", ring_window=5)
    store.step(k[:2], g[:2], [0, 2], [1])           # c = 2
    store.step(k[2:6], g[2:6], [0, 4], [1])         # verify: positions 2..5
    pools = store.pools(1)
    with pytest.raises(kpool.KPoolError,
                       match=r"accept: slot 1: keeping 0 token\(s\) .* a ring "
                             r"window of at least 6 rows"):
        store.accept(1, 0)
    assert store.tokens(1) == 6                      # nothing changed
    assert_bits(store.pools(1), pools)
    store.accept(1, 2)                               # c' = 4: a boundary
    assert store.tokens(1) == 4 and store.num_pools(1) == 1
    with pytest.raises(kpool.KPoolError, match=r"accepted = 3 is outside"):
        store.accept(1, 3)


def test_ring_window_must_cover_kpool():
    ape = np.zeros((4, 8), np.float32)
    with pytest.raises(kpool.KPoolError,
                       match=r"ring_window must be 0 \(kpool\) or in \[kpool "
                             r"= 4"):
        kpool.PoolStore(ape, 2, "bf16", ring_window=3)


@pytest.mark.parametrize("etype", ETYPES)
def test_ops_with_a_wide_ring(rng, etype):
    """seed_tail keeps each request's last R positions in rows q mod R;
    ring_close reads (p*K + m) mod R; both against the numpy reference."""
    dim, kpool_, window = 8, 3, 7
    k, gate, ape = random_inputs(rng, 40, dim, kpool_, etype)
    tail0 = random_inputs(rng, 6 * 2 * window, dim, kpool_, etype)[0]
    tail0 = tail0.reshape(6, 2, window, dim)
    # Request 4 (c = 8) holds positions 6, 7 of pool 2: ring rows 6 and 0,
    # so its members wrap around the window.
    iro = [0, 9, 10, 10, 26, 29]
    cache = [11, 5, 2, 40, 8]
    slots = [4, 0, 2, 5, 1]
    pooled, closed = kpool.ring_close(tail0, k, gate, ape, iro, cache, slots)
    ref_pooled, ref_closed = kpool.reference.ring_close(
        tail0, k, gate, ape, iro, cache, slots)
    assert_bits(closed, ref_closed)
    assert list(closed) == [3, 1, -1, 13, 2]
    if etype == "f32":
        np.testing.assert_allclose(pooled, ref_pooled, rtol=1e-5, atol=1e-6)
    else:
        assert (kpool.ulp_distance(pooled, ref_pooled, etype) <= 1).all()
    tail = tail0.copy()
    kpool.seed_tail(tail, k, gate, iro, cache, slots, kpool=kpool_)
    expected = kpool.reference.seed_tail(tail0.copy(), k, gate, iro, cache,
                                         slots)
    assert_bits(tail, expected)
    # Request 0 (c = 11, 9 tokens): its last 7 positions 13..19 went to rows
    # q mod 7; request 3 brings 16 tokens from 40: positions 49..55.
    for q in range(13, 20):
        assert_bits(tail[4, 0, q % window], k[q - 11])
    for q in range(49, 56):
        assert_bits(tail[5, 1, q % window], gate[10 + q - 40])


def test_accept_edges(rng):
    """What "the last step" is: a step that brought the slot no tokens is
    its last step too; a slot that missed the last step can still roll back
    its own last step; reset starts over."""
    dim, kpool_ = 8, 4
    k, g, ape = random_inputs(rng, 32, dim, kpool_, "f32")
    store = kpool.PoolStore(ape, 4, "f32", ring_window=6)
    store.step(k[:5], g[:5], [0, 5], [0])                 # slot 0: 0..4
    store.step(k[5:9], g[5:9], [0, 4, 4], [0, 1])         # slot 0: 5..8
    store.accept(0, 1)                                    # slot 0 at 6
    assert store.tokens(0) == 6 and store.num_pools(0) == 1
    assert store.tokens(1) == 0
    store.accept(1, 0)                                    # nothing to undo
    store.step(k[:0], g[:0], [0, 0], [0])                 # no tokens
    with pytest.raises(kpool.KPoolError, match=r"accepted = 1 is outside "
                                               r"\[0, 0\]"):
        store.accept(0, 1)
    store.reset(0)
    with pytest.raises(kpool.KPoolError, match=r"accepted = 1 is outside"):
        store.accept(0, 1)
    assert store.tokens(0) == 0 and store.num_pools(0) == 0


def test_ring_holds_pending():
    # K = 4, a verify step of 1 + 3 tokens from c = 3 (end = 7): with
    # R = K + d - 1 = 6 every length from 4 (the first token kept) up is
    # fine and length 3 (no token kept) is not; with R = 5 too, since length
    # 4 is a pool boundary and the later ones need only positions 4.. .
    assert all(kpool.ring_holds_pending(4, 6, c, 7) for c in range(4, 8))
    assert not kpool.ring_holds_pending(4, 6, 3, 7)
    assert [kpool.ring_holds_pending(4, 5, c, 7) for c in range(3, 8)] == \
        [False, True, True, True, True]
    # A step from c = 2 (K = 4, R = 5 = K + d - 2 for d = 3) that rejects
    # every draft: length 3 needs positions 0..2, but end - 0 = 6 > 5.
    assert not kpool.ring_holds_pending(4, 5, 3, 6)
    assert kpool.ring_holds_pending(4, 4, 8, 12)          # a pool boundary
    assert not kpool.ring_holds_pending(4, 5, 7, 12)
    assert kpool.ring_holds_pending(1, 1, 3, 9)           # K = 1: always
