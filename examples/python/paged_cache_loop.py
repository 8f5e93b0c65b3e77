#!/usr/bin/env python3
"""A serving loop that writes the production pool cache, from Python.

The pooled keys of three requests (ring slots 3, 0 and 5 of 6) go straight
into a paged cache in the DeepSeek/vLLM indexer format: pages of 64 entries,
each entry the Hadamard-rotated pool quantized to FP8 (e4m3fn) with one
float32 scale, codes then scales in one uint8 buffer, pages handed out in a
shuffled order (docs/pool-cache.md). Each call is one fused kernel
(kpool.step with a cache). A chunked prefill whose chunks end inside pools,
then decode steps; afterwards every entry is compared, byte for byte, with
the formulas (kpool.reference.cache_entry) applied to the request's pools
compressed in one call.

Run from a build tree:

    PYTHONPATH=python KPOOL_CAPI_LIB=build/lib/libKPoolRuntime.so \\
        /usr/bin/python3 examples/python/paged_cache_loop.py
"""

import numpy as np

import kpool

D, K = 128, 4           # head_dim 128, kpool 4
ETYPE = "bf16"
SLOTS = [3, 0, 5]
PAGE = 64


def random_tokens(rng, count):
    k = kpool.from_f32(rng.standard_normal((count, D), dtype=np.float32),
                       ETYPE)
    gate = kpool.from_f32(
        4 * rng.standard_normal((count, D), dtype=np.float32), ETYPE)
    return k, gate


def main():
    rng = np.random.default_rng(3)
    ape = rng.standard_normal((K, D), dtype=np.float32)
    lengths = [300, 41, 170]
    sequences = [random_tokens(rng, n) for n in lengths]
    sent = [0, 0, 0]
    store = kpool.PagedPoolStore(
        ape, max_slots=6, dtype=ETYPE, page_size=PAGE, num_pages=16,
        entry="fp8", rotate="hadamard", scale="absmax",
        page_order=rng.permutation(16).tolist())
    print(f"cache: {store.num_pages} pages of {store.page_stride} bytes "
          f"({PAGE} entries: {PAGE * D} code bytes, {PAGE * 4} scale bytes)")
    calls = 0
    while any(sent[b] < lengths[b] for b in range(3)):
        ks, gs, iro, slots = [], [], [0], []
        for b in range(3):
            left = lengths[b] - sent[b]
            if left == 0:
                continue
            count = min(left, int(rng.integers(1, 97)) if calls < 4 else 1)
            k, gate = sequences[b]
            ks.append(k[sent[b]:sent[b] + count])
            gs.append(gate[sent[b]:sent[b] + count])
            iro.append(iro[-1] + count)
            slots.append(SLOTS[b])
            sent[b] += count
        store.step(np.concatenate(ks), np.concatenate(gs), iro, slots)
        calls += 1
    print(f"{calls} calls")

    for b, slot in enumerate(SLOTS):
        k, gate = sequences[b]
        n = lengths[b]
        dense = kpool.compress(k, gate, ape, [0, n], None, [0])
        codes, scales = kpool.reference.cache_entry(
            kpool.to_f32(dense, ETYPE), ETYPE, rotate="hadamard",
            entry="fp8", scale="absmax")
        same = all(
            np.array_equal(store.entry(slot, p)[0], codes[p]) and
            store.entry(slot, p)[1] == scales[p]
            for p in range(n // K))
        print(f"request {b} (slot {slot}): {n // K} entries on pages "
              f"{store.pages(slot)}, byte-identical to the formulas on "
              f"one-shot pools: {same}")
        assert same
    print("ok")


if __name__ == "__main__":
    main()
