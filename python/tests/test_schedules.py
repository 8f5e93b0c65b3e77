"""The PoolStore over the spec's arrival schedules: whatever the chunking,
every pool is produced exactly once and is bit-identical to one-shot
compression of the whole sequence."""

import numpy as np
import pytest

import kpool
from conftest import assert_bits, assert_ulps, random_inputs


class Sequences:
    """One token sequence per slot and what each call feeds the store."""

    def __init__(self, rng, lengths, dim, kpool_, etype, signed):
        self.dim, self.kpool, self.etype = dim, kpool_, etype
        self.data = {}
        ape = None
        for slot, length in lengths.items():
            k, gate, a = random_inputs(rng, length, dim, kpool_, etype,
                                       signed)
            self.data[slot] = (k, gate)
            ape = a if ape is None else ape
        self.ape = ape
        self.fed = {slot: 0 for slot in lengths}

    def call(self, store, counts):
        """One step: slot -> number of next tokens (a ragged batch)."""
        ks, gates, iro, slots = [], [], [0], []
        for slot, n in counts.items():
            k, gate = self.data[slot]
            start = self.fed[slot]
            ks.append(k[start:start + n])
            gates.append(gate[start:start + n])
            iro.append(iro[-1] + n)
            slots.append(slot)
            self.fed[slot] += n
        empty = np.zeros((0, self.dim), dtype=kpool.DTYPES[self.etype])
        return store.step(np.concatenate(ks or [empty]),
                          np.concatenate(gates or [empty]), iro, slots)


def run_schedule(rng, schedule, lengths, dim=16, kpool_=4, etype="bf16",
                 max_slots=None, signed=False):
    """Feeds `schedule` (a list of {slot: tokens} calls) to a store and
    checks every slot against one-shot compression (bit for bit) and, for
    positive keys, the numpy reference (a few ulps)."""
    seqs = Sequences(rng, lengths, dim, kpool_, etype, signed)
    store = kpool.PoolStore(seqs.ape, max_slots or max(lengths) + 1, etype)
    produced = []
    for counts in schedule:
        before = {s: store.tokens(s) for s in lengths}
        step = seqs.call(store, counts)
        for p in step:
            # A pool is closed from the ring exactly when the request
            # started the call inside it.
            start = before[p.slot]
            assert p.from_ring == (start % kpool_ != 0 and
                                   p.pool == start // kpool_)
        produced += step
    ids = [(p.slot, p.pool) for p in produced]
    assert len(ids) == len(set(ids)), "a pool was produced twice"
    for slot, length in lengths.items():
        k, gate = seqs.data[slot]
        assert seqs.fed[slot] == length
        assert store.tokens(slot) == length
        count = length // kpool_
        assert store.num_pools(slot) == count
        assert sorted(p for s, p in ids if s == slot) == list(range(count))
        whole = kpool.compress(k, gate, seqs.ape, [0, length], None, [0])
        assert_bits(store.pools(slot), whole)
        if not signed:
            assert_ulps(store.pools(slot),
                        kpool.reference.pool_sequence(k, gate, seqs.ape),
                        etype)
        if count:
            assert_bits(store.pool(slot, count - 1), whole[-1])
    return store, produced


@pytest.mark.parametrize("etype,kpool_", [("bf16", 1), ("bf16", 3),
                                          ("bf16", 4), ("f16", 4),
                                          ("f32", 4)])
def test_one_prefill(rng, etype, kpool_):
    run_schedule(rng, [{0: 23}], {0: 23}, kpool_=kpool_, etype=etype)
    run_schedule(rng, [{0: 23}], {0: 23}, kpool_=kpool_, etype=etype,
                 signed=True)


@pytest.mark.parametrize("kpool_", [1, 3, 4])
def test_one_token_per_call(rng, kpool_):
    store, produced = run_schedule(rng, [{2: 1}] * 17, {2: 17},
                                   kpool_=kpool_)
    if kpool_ > 1:
        # Decode closes every pool from the ring.
        assert all(p.from_ring for p in produced)


@pytest.mark.parametrize("kpool_", [1, 3, 4])
def test_chunked_prefill_then_decode(rng, kpool_):
    # Chunk boundaries at 5, 11 and 18 fall inside pools; then decode.
    schedule = [{1: 5}, {1: 6}, {1: 7}] + [{1: 1}] * 6
    run_schedule(rng, schedule, {1: 24}, kpool_=kpool_)


@pytest.mark.parametrize("kpool_", [3, 4])
def test_mixed_ragged_batches(rng, kpool_):
    """Requests hold different remainders and bring different token counts,
    none of them 1, in slots 3, 0 and 5 of 6 (neither identity nor dense);
    requests join and leave the batch."""
    schedule = [
        {3: 6, 0: 2},
        {0: 7, 3: 5, 5: 3},
        {5: 2, 3: 3},
        {0: 4, 5: 9, 3: 2},
        {3: 7, 0: 2, 5: 5},
    ]
    lengths = {3: 23, 0: 15, 5: 19}
    store, _ = run_schedule(rng, schedule, lengths, kpool_=kpool_,
                            max_slots=6, signed=True)
    for unused in (1, 2, 4):
        assert store.tokens(unused) == 0 and store.num_pools(unused) == 0


def test_production_geometry(rng):
    """bf16, head_dim 128, kpool 4: a mixed schedule in non-identity slots."""
    schedule = [{7: 10, 2: 3}, {2: 6, 7: 2}, {7: 5, 2: 3}, {2: 2, 7: 3}]
    run_schedule(rng, schedule, {7: 20, 2: 14}, dim=128, kpool_=4,
                 etype="bf16", max_slots=8)


def test_long_sequence_past_2_16_pools(rng):
    """Positions past 2^18 and pool ids past 2^16: chunked prefill, then
    decode across a pool boundary."""
    kpool_, dim = 4, 8
    length = 4 * 65536 + 10
    schedule = [{0: 100003}, {0: 100001}, {0: 62140}] + [{0: 2}] * 5
    assert sum(c[0] for c in schedule) == length
    store, produced = run_schedule(rng, schedule, {0: length}, dim=dim,
                                   kpool_=kpool_, etype="f16")
    assert produced[-1].pool == length // kpool_ - 1 > 65536


def test_step_requests_and_reset(rng):
    k, gate, ape = random_inputs(rng, 12, 16, 4, "f32")
    store = kpool.PoolStore(ape, 4, np.float32)
    produced = store.step_requests([(1, k[:6], gate[:6]), (3, k[6:], gate[6:])])
    assert produced == [kpool.ProducedPool(1, 0, False),
                        kpool.ProducedPool(3, 0, False)]
    assert store.step_requests([]) == []
    assert (store.tokens(1), store.tokens(3)) == (6, 6)
    store.reset(1)
    assert store.tokens(1) == 0 and store.num_pools(1) == 0
    # The slot starts over: a new request's pool 0.
    assert store.step(k[:4], gate[:4], [0, 4], [1]) == [
        kpool.ProducedPool(1, 0, False)]
    with store:
        pass
    with pytest.raises(kpool.KPoolError, match="closed"):
        store.tokens(1)
