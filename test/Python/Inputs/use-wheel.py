"""Uses kpool as installed from its wheel into a venv (wheel.test): found
without PYTHONPATH, its libraries inside the package, compress against the
reference, the JIT (libKPoolJit.so inside the package, MLIR from Debian)."""

import os

import numpy as np

import kpool
from kpool import reference

print("package:", os.path.dirname(kpool.__file__))
print("version:", kpool.__version__)
print("library:", kpool.library_path())
here = os.path.dirname(kpool.library_path())
for name in ["libKPoolJit.so", "libkpool_cuda_runtime.so",
             os.path.join("kpool-packs", "cuda", "kpool_default_cuda.so")]:
    print("ships:", name, os.path.exists(os.path.join(here, name)))
rng = np.random.default_rng(0)
k = rng.uniform(0.5, 2, (14, 8)).astype(np.float32)
gate = rng.standard_normal((14, 8)).astype(np.float32)
ape = rng.standard_normal((4, 8)).astype(np.float32)
iro, cache = [0, 6, 14], [0, 3]
pooled = kpool.compress(k, gate, ape, iro, None, cache)
pro = reference.pool_offsets(np.array(iro), np.array(cache), 4)
expected = reference.compress(k, gate, ape, np.array(iro), pro,
                              np.array(cache))
worst = int(kpool.ulp_distance(pooled, expected, "f32").max())
print("compress:", pooled.shape, "pools, within", worst <= 4, "ulps")
