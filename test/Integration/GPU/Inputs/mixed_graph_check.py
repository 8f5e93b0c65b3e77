#!/usr/bin/env python3
"""Checks what mixed-graph-main.mlir printed (the CPU pipeline's run of
mixed-graph.mlir, or the GPU form's) against numpy and kpool.reference:
the consumer's output 2 * pooled + 1 (pooled rows computed by
reference.compress, the rest of the capacity 0), closed_pool and the closed
rows (reference.ring_close), and the ring after reference.seed_tail. Pools
within the contract's f32 tolerance of the reference (a few ulps of the
members' magnitude), ids and ring rows exactly.

  mixed_graph_check.py < runner_output
"""

import re
import sys

import numpy as np

from kpool import reference

T, D, K = 6, 8, 2


def inputs():
    x = np.array([[((i * D + j) % 11 - 5) / 4.0 for j in range(D)]
                  for i in range(T)], np.float32)
    x0 = np.array([((j * 3) % 7 - 3) / 2.0 for j in range(D)], np.float32)
    ape = np.array([[0.25 * (m + 1) * ((j % 3) - 1) for j in range(D)]
                    for m in range(K)], np.float32)
    tail = np.zeros((2, 2, K, D), np.float32)
    tail[1, 0, 0] = x0 * np.float32(0.5)
    tail[1, 1, 0] = x0 * x0
    return x, ape, tail


def expected():
    x, ape, tail = inputs()
    k = x * np.float32(0.5)
    gate = x * x
    iro, cache, slots = [0, 3, 6], [1, 0], [1, 0]
    closed, ids = reference.ring_close(tail, k, gate, ape, iro, cache, slots)
    pro = reference.pool_offsets(iro, cache, K)
    pooled = reference.compress(k, gate, ape, iro, pro, cache,
                                out=np.zeros((4, D), np.float32))
    ring = reference.seed_tail(tail.copy(), k, gate, iro, cache, slots)
    out = pooled * np.float32(2) + np.float32(1)
    return out, ids, closed, ring


def printed(text):
    """The arrays printMemref printed, in order."""
    arrays = []
    for block in re.split(r"Unranked Memref[^\n]*\n", text)[1:]:
        numbers = re.findall(r"-?(?:nan|inf|[0-9.]+(?:e[-+]?[0-9]+)?)",
                             block.split("Unranked")[0])
        arrays.append(np.array([float(v) for v in numbers]))
    return arrays


def main():
    got = printed(sys.stdin.read())
    want = expected()
    names = ["2 * pooled + 1", "closed_pool", "closed rows", "ring"]
    if len(got) != len(want):
        sys.exit(f"FAIL: expected {len(want)} printed arrays, got {len(got)}")
    failed = False
    for name, g, w in zip(names, got, want):
        w = np.asarray(w, np.float64).reshape(-1)
        if g.shape != w.shape:
            print(f"FAIL {name}: {g.size} values, expected {w.size}")
            failed = True
            continue
        # The pools within a few f32 ulps of their magnitude (the printer
        # keeps 6 significant digits); ids and ring rows exactly.
        tol = 1e-5 * np.maximum(np.abs(w), 1) if "pool" in name or \
            "closed rows" in name else 1e-6 * np.maximum(np.abs(w), 1)
        bad = np.abs(g - w) > tol
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            print(f"FAIL {name}: value {i}: got {g[i]}, expected {w[i]}")
            failed = True
        else:
            print(f"ok {name}: {w.size} values")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
