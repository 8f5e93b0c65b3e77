"""Where kernels come from beyond the JIT: kernel packs, and the version.

A kernel pack is a shared library made by ``kpool-aot --pack`` holding the
kernels of several configurations; it needs no MLIR. The packs installed
next to the runtime library (the wheel's default pack: bf16 and f16,
head_dim 128, kpool 4, every pool-cache format, CUDA sm_90) load by
themselves the first time a CUDA configuration is needed;
:func:`load_kernel_pack` loads another (docs/python.md, "Kernels").
"""

import ctypes
import os

from . import _capi

_declared = False


def _lib():
    """The C library, with this module's functions declared."""
    global _declared
    lib = _capi.load()
    if not _declared:
        lib.kpoolGetVersion.restype = ctypes.c_char_p
        lib.kpoolGetVersion.argtypes = []
        lib.kpoolLoadKernelPack.restype = _capi._ErrorP
        lib.kpoolLoadKernelPack.argtypes = [ctypes.c_char_p,
                                            ctypes.POINTER(ctypes.c_int64)]
        _declared = True
    return lib


def version():
    """kpool's version, as the C library reports it (e.g. ``"0.1.0"``)."""
    return _lib().kpoolGetVersion().decode()


def load_kernel_pack(path):
    """Loads the kernel pack at ``path`` (a ``.so`` made by ``kpool-aot
    --pack``) and registers its configurations: kernel sets of those
    configurations then use its kernels, with no compilation. Returns how
    many configurations it holds. Loading a pack again does nothing (and
    returns 0). Raises :class:`KPoolError` when the file is not a pack, or
    is a pack of another kpool (the message says which)."""
    count = ctypes.c_int64(0)
    _capi.check(_lib().kpoolLoadKernelPack(os.fsencode(path),
                                           ctypes.byref(count)))
    return count.value
