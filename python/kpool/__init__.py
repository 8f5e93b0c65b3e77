"""kpool from Python: the pooled-key kernels on numpy arrays and PyTorch
tensors.

A ctypes binding of libKPoolCAPI.so (no compiled extension), plus a pure-numpy
reference of the contract (docs/semantics.md; installed as
share/doc/kpool/docs/semantics.md) in :mod:`kpool.reference`.

Quick start (docs/python.md has more; examples/python/serving_loop.py is a
complete program)::

    import numpy as np, kpool
    k = gate = np.zeros((9, 128), np.uint16)        # 9 bf16 tokens
    ape = np.zeros((4, 128), np.float32)
    pooled = kpool.compress(k, gate, ape, [0, 9], None, [0])   # 2 pools
    store = kpool.PoolStore(ape, max_slots=8, dtype="bf16")
    produced = store.step(k, gate, [0, 9], [5])     # request in slot 5

The ops -- :func:`compress`, :func:`seed_tail`, :func:`ring_close`,
:func:`pool_offsets`, :func:`step`, and the methods of the same names of
:class:`KernelSet` -- are made from the library's kernel ABI table on first
use (their keyword names are the operands' names: ``input_row_offsets``,
``cache_lengths``, ``slot_idx``, ...). Results are the caller's kind of
array: numpy in, numpy out (bf16 as uint16 bit patterns: numpy has no
bfloat16); PyTorch in, PyTorch out (bf16 as ``torch.bfloat16``). Element
types are taken by their framework names too (``torch.bfloat16``,
``"bfloat16"``, ``np.float32``).

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

Threads: kernel sets (and the module functions) are safe to share; a store
(:class:`PoolStore`, :class:`PagedPoolStore`) serializes the calls on it,
each ``step`` returns its own pools, and ``close`` waits for a running
call.
"""

from . import reference
from ._capi import KPoolError, LibraryNotFoundError, library_path
from .kernels import KernelSet, kernel_set, load_kernel_pack
from .status import status_error
from .stores import PagedPoolStore, PoolStore, ProducedPool, ring_holds_pending
from .types import (DTYPES, bf16_to_f32, element_type, f32_to_bf16, from_f32,
                    to_f32, ulp_distance)


def __getattr__(name):
    """The op functions (compress, step, ...): kpool.kernels makes them from
    the library's kernel ABI table on first use; ``__version__``: the
    library's version."""
    why = ""
    if name == "__version__":
        from ._capi import version
        return version()
    if not name.startswith("_"):
        from . import kernels
        try:
            if name in kernels.op_names():
                return getattr(kernels, name)
        except LibraryNotFoundError as e:
            why = f" (the ops come from the library: {e})"
    raise AttributeError(f"module 'kpool' has no attribute {name!r}{why}")


__all__ = [
    "DTYPES",
    "KPoolError",
    "KernelSet",
    "LibraryNotFoundError",
    "PagedPoolStore",
    "PoolStore",
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
    "ring_holds_pending",
    "seed_tail",
    "status_error",
    "step",
    "to_f32",
    "ulp_distance",
]
