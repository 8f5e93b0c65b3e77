"""The status word: what the kernels found, decoded by the library."""

import ctypes

import numpy as np

from . import _capi


def status_error(word):
    """The message the status word ``word`` (an int, or an array whose
    first element is the word) holds: None for 0, else the request and
    field the kernels found at fault, e.g. ``"request 1:
    input_row_offsets[2] is below input_row_offsets[1] (rows reversed)
    (found by the kernels; status word 0x101)"``."""
    if not isinstance(word, (int, np.integer)):
        word = int(np.asarray(word).reshape(-1)[0])
    lib = _capi.load()
    err = lib.kpoolStatusWordError(ctypes.c_uint64(int(word) & (2**64 - 1)))
    if not err:
        return None
    try:
        return lib.kpoolErrorMessage(err).decode()
    finally:
        lib.kpoolErrorDestroy(err)
