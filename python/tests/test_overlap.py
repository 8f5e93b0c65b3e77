"""Overlapping operands (contract revision 3, issue 24 finding 7): a call
where an operand the op writes overlaps another operand of the call is
refused before anything runs, naming both; inputs may share memory, and
views that interleave without sharing a byte are accepted.

The issue's cases, as a caller would write them with numpy views: the
fused step's `closed` aliasing `pooled[:2]`, ring_close writing `pooled`
into the ring it reads, seed_tail with the ring overlapping `k`, a status
word inside `pooled`. Each was accepted before, and three of them gave
results that differ from separate buffers. test/Runtime/overlap.test
covers every written operand of every kernel."""

import numpy as np
import pytest

import kpool
from conftest import assert_bits, random_inputs

D, K = 16, 4


@pytest.fixture
def call():
    rng = np.random.default_rng(7)
    k, g, ape = random_inputs(rng, 13, D, K, "f32")
    # Two requests: 9 tokens after 3 cached, 4 after 2; slots 1 and 0.
    return dict(k=k, g=g, ape=ape, iro=[0, 9, 13], cache=[3, 2],
                slots=[1, 0])


def ring(slots=2):
    return np.zeros((slots, 2, K, D), np.float32)


def test_step_closed_aliasing_pooled(call):
    c = call
    pooled = np.zeros((8, D), np.float32)
    with pytest.raises(kpool.KPoolError, match=r"^step: 'closed' \(bytes "
                       r"0x[0-9a-f]+\.\.0x[0-9a-f]+\), which the op writes, "
                       r"overlaps 'pooled'"):
        kpool.step(ring(), c["k"], c["g"], c["ape"], c["iro"], c["cache"],
                   c["slots"], closed=pooled[:2], pooled=pooled)
    assert not pooled.any()


def test_ring_close_writing_pooled_into_its_ring(call):
    c = call
    tail = ring()
    tail[:] = 0.5
    before = tail.copy()
    with pytest.raises(kpool.KPoolError, match=r"^ring_close: 'pooled' .*, "
                       r"which the op writes, overlaps 'tail'"):
        kpool.ring_close(tail, c["k"], c["g"], c["ape"], c["iro"],
                         c["cache"], c["slots"],
                         pooled=tail.reshape(-1, D)[:2])
    assert_bits(tail, before)


def test_seed_tail_with_the_ring_overlapping_k(call):
    c = call
    tail = ring(4)
    k = tail.reshape(-1, D)[:13]
    k[:] = c["k"]
    with pytest.raises(kpool.KPoolError, match=r"^seed_tail: 'tail' .*, "
                       r"which the op writes, overlaps 'k'"):
        kpool.seed_tail(tail, k, c["g"], c["iro"], c["cache"], c["slots"])
    assert_bits(k, c["k"])


def test_status_word_inside_pooled(call):
    c = call
    pooled = np.zeros((8, D), np.float32)
    word = pooled.reshape(-1)[4:6].view(np.uint64)
    with pytest.raises(kpool.KPoolError, match=r"^compress: 'pooled' .*, "
                       r"which the op writes, overlaps the status word"):
        kpool.compress(c["k"], c["g"], c["ape"], c["iro"], None,
                       c["cache"], pooled=pooled[:2], status=word)
    # With any validation: nothing is read to compare addresses.
    with pytest.raises(kpool.KPoolError, match="overlaps the status word"):
        kpool.compress(c["k"], c["g"], c["ape"], c["iro"], None,
                       c["cache"], pooled=pooled[:2], status=word,
                       validate=False)
    assert not pooled.any()


def test_more_written_operands(call):
    c = call
    iro = np.array(c["iro"], np.uint32)
    # pool_offsets writing its offsets over the row offsets it reads.
    with pytest.raises(kpool.KPoolError, match=r"^pool_offsets: "
                       r"'pool_row_offsets' .*overlaps 'input_row_offsets'"):
        kpool.pool_offsets(iro, c["cache"], K, out=iro)
    # step's closed_pool inside the cache lengths.
    cache = np.array(c["cache"] + [0, 0], np.uint32)
    with pytest.raises(kpool.KPoolError, match=r"^step: 'closed_pool' .*"
                       r"overlaps 'cache_lengths'"):
        kpool.step(ring(), c["k"], c["g"], c["ape"], c["iro"], cache[:2],
                   c["slots"], closed_pool=cache[:2].view(np.int32))
    # The pool cache: scales inside the keys' bytes.
    ks = kpool.KernelSet("f32", D, K, cache="fp8", rotate="hadamard")
    keys = np.zeros((4, 2, D), np.uint8)
    scales = keys.reshape(-1)[:32].view(np.float32).reshape(4, 2)
    with pytest.raises(kpool.KPoolError, match=r"^compress: 'cache_keys' .*"
                       r"overlaps 'cache_scales'"):
        ks.compress(c["k"], c["g"], c["ape"], c["iro"], None, c["cache"],
                    block_table=[[0, 1], [2, 3]], cache_keys=keys,
                    cache_scales=scales)


def test_what_is_not_an_overlap(call):
    """Inputs may share memory; interleaved views that share no byte and
    empty views are accepted, and compute what separate buffers do."""
    c = call
    # k and gate as one buffer.
    one = kpool.compress(c["k"], c["k"], c["ape"], c["iro"], None,
                         c["cache"])
    assert_bits(one, kpool.compress(c["k"], c["k"].copy(), c["ape"],
                                    c["iro"], None, c["cache"]))
    # closed and pooled as two column blocks of one matrix.
    both = np.zeros((8, 2 * D), np.float32)
    closed, pooled = both[:2, :D], both[:, D:]
    got = kpool.step(ring(), c["k"], c["g"], c["ape"], c["iro"],
                     c["cache"], c["slots"], closed=closed, pooled=pooled)
    want = kpool.step(ring(), c["k"], c["g"], c["ape"], c["iro"],
                      c["cache"], c["slots"], pooled=np.zeros((8, D),
                                                               np.float32))
    assert_bits(got[0], want[0])
    assert_bits(got[3], want[3])
    # A paged cache with keys and scales interleaved in its pages.
    store = kpool.PagedPoolStore(c["ape"], 2, "f32", page_size=2,
                                 num_pages=8)
    assert store.cache_keys.base is not None
    store.step(c["k"], c["g"], [0, 13], [0])
    assert store.num_pools(0) == 3
