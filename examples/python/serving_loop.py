#!/usr/bin/env python3
"""A complete serving loop over the kpool kernels, from Python.

Three requests share a pool store (ring slots 3, 0 and 5 of 6): a chunked
prefill whose chunk boundaries fall inside pools, then decode steps of one
and of three tokens, all requests mixed in each call. Afterwards every
request's pools are compared, bit for bit, with compressing its whole
sequence at once, and, within the contract's tolerance, with the numpy
reference.

Run from a build tree:

    PYTHONPATH=python KPOOL_CAPI_LIB=build/lib/libKPoolRuntime.so \\
        /usr/bin/python3 examples/python/serving_loop.py

or with an installed package (PYTHONPATH=<prefix>/python only).
"""

import numpy as np

import kpool

D, K = 128, 4           # the production geometry: head_dim 128, kpool 4
ETYPE = "bf16"          # bf16 keys and gates as uint16 bit patterns
SLOTS = [3, 0, 5]       # ring slots of requests 0, 1, 2 (not the batch rows)


def random_tokens(rng, count):
    """Keys and gates of `count` tokens (large gates: the softmax matters)."""
    k = kpool.from_f32(rng.standard_normal((count, D), dtype=np.float32),
                       ETYPE)
    gate = kpool.from_f32(
        4 * rng.standard_normal((count, D), dtype=np.float32), ETYPE)
    return k, gate


def main():
    rng = np.random.default_rng(7)
    ape = rng.standard_normal((K, D), dtype=np.float32)
    lengths = [23, 10, 17]       # prompt lengths
    sequences = [random_tokens(rng, n + 8) for n in lengths]  # + decode room
    sent = [0, 0, 0]             # tokens of each request sent so far

    # Each call: how many tokens each request brings (0: not in the call).
    schedule = [
        [6, 10, 5],              # prefill chunks (request 1 all at once)
        [9, 0, 7],               # more prefill, boundaries inside pools
        [8, 1, 5],               # request 0 finishes, 1 decodes
        [1, 1, 3],               # decode; request 2 speculates 3 tokens
        [3, 1, 1],
    ]
    with kpool.PoolStore(ape, max_slots=6, dtype=ETYPE) as store:
        for number, counts in enumerate(schedule):
            requests = []
            for b, count in enumerate(counts):
                if count == 0:
                    continue
                k, gate = sequences[b]
                rows = slice(sent[b], sent[b] + count)
                requests.append((SLOTS[b], k[rows], gate[rows]))
                sent[b] += count
            produced = store.step_requests(requests)
            print(f"call {number}: {len(requests)} requests, "
                  f"{len(produced)} pools produced "
                  f"({sum(p.from_ring for p in produced)} from the ring)")

        for b, slot in enumerate(SLOTS):
            k, gate = sequences[b]
            n = sent[b]
            pools = store.pools(slot)
            one_shot = kpool.compress(k[:n], gate[:n], ape, [0, n], None, [0])
            same = np.array_equal(pools.view(np.uint16),
                                  one_shot.view(np.uint16))
            ref = kpool.reference.pool_sequence(k[:n], gate[:n], ape)
            ulps = int(kpool.ulp_distance(pools, ref, ETYPE).max(initial=0))
            print(f"request {b} (slot {slot}): {n} tokens, {len(pools)} "
                  f"pools, bit-identical to one-shot compress: {same}, "
                  f"max ulps vs the reference: {ulps}")
            assert store.tokens(slot) == n and len(pools) == n // K
            assert same
    print("ok")


if __name__ == "__main__":
    main()
