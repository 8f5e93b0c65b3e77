"""kpool from Python: the pooled-key kernels on numpy arrays.

A ctypes binding of libKPoolRuntime.so (no compiled extension), plus a pure-numpy
reference of the contract (docs/semantics.md; installed as
share/doc/kpool/docs/semantics.md) in :mod:`kpool.reference`. bf16 arrays are
uint16 bit patterns (see :mod:`kpool.types`).

Quick start (docs/python.md has more; examples/python/serving_loop.py is a
complete program)::

    import numpy as np, kpool
    k = gate = np.zeros((9, 128), np.uint16)        # 9 bf16 tokens
    ape = np.zeros((4, 128), np.float32)
    pooled = kpool.compress(k, gate, ape, [0, 9], None, [0])   # 2 pools
    store = kpool.PoolStore(ape, max_slots=8, dtype="bf16")
    produced = store.step(k, gate, [0, 9], [5])     # request in slot 5

The library is found inside the package (a wheel: ``pip install .``), through
``$KPOOL_CAPI_LIB``, or next to an install; see :mod:`kpool._capi` and
docs/python.md. ``kpool.__version__`` is the library's version. Kernels come
from kernel packs (:func:`load_kernel_pack`; the wheel's default pack holds
the production CUDA configurations), the disk cache (:mod:`kpool.cache`) or
the JIT, compiled once per configuration.

Arrays of other libraries work without a copy: host arrays exposing
``__dlpack__`` (PyTorch CPU tensors) everywhere, device arrays
(``__cuda_array_interface__``, CUDA DLPack) on a ``KernelSet(...,
target="cuda")``. ``import kpool.torch`` (needs torch; not imported here)
registers the ops as PyTorch custom ops (``torch.ops.kpool.*``).
"""

from . import reference
from ._capi import KPoolError, LibraryNotFoundError, library_path
from ._packs import load_kernel_pack
from .runtime import (KernelSet, PagedPoolStore, PoolStore, ProducedPool,
                      compress,
                      kernel_set, pool_offsets, ring_close, ring_holds_pending,
                      seed_tail, status_error)
from .types import (DTYPES, bf16_to_f32, element_type, f32_to_bf16, from_f32,
                    to_f32, ulp_distance)

__all__ = [
    "status_error",
    "DTYPES",
    "KPoolError",
    "KernelSet",
    "LibraryNotFoundError",
    "PagedPoolStore",
    "PoolStore",
    "ring_holds_pending",
    "ProducedPool",
    "bf16_to_f32",
    "compress",
    "element_type",
    "f32_to_bf16",
    "from_f32",
    "kernel_set",
    "library_path",
    "load_kernel_pack",
    "pool_offsets",
    "reference",
    "ring_close",
    "seed_tail",
    "to_f32",
    "ulp_distance",
]


def __getattr__(name):
    # kpool.__version__: read from the library, loaded on first use.
    if name == "__version__":
        from ._packs import version
        return version()
    raise AttributeError(f"module 'kpool' has no attribute {name!r}")
