"""Uses the installed kpool package (see installed-python.test)."""

import numpy as np

import kpool

print("library:", kpool.library_path())
rng = np.random.default_rng(0)
k = rng.standard_normal((14, 8)).astype(np.float32)
gate = rng.standard_normal((14, 8)).astype(np.float32)
ape = np.zeros((4, 8), np.float32)
print("pool_row_offsets:",
      kpool.pool_offsets([0, 6, 14], [0, 0], 4).tolist())
store = kpool.PoolStore(ape, max_slots=2, dtype="f32")
print("produced:", [tuple(p) for p in store.step(k, gate, [0, 6, 14], [0, 1])])
try:
    kpool.compress(k[:8], gate[:8], ape, [0, 9], None, [0])
except kpool.KPoolError as e:
    print("error:", e)
