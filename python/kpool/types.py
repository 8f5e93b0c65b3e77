"""Element types: bf16, f16 and f32, by kpool's and the frameworks' names.

numpy has no bfloat16; kpool passes bf16 keys, gates, pooled keys and rings
as ``uint16`` arrays holding the bf16 bit patterns (the upper half of the
f32 pattern), and PyTorch's as ``torch.bfloat16`` tensors. :func:`f32_to_bf16` rounds to nearest even like the kernels'
``arith.truncf``; :func:`bf16_to_f32` is exact.
"""

import numpy as np

#: The element types by name, with the numpy dtype that holds them.
DTYPES = {
    "bf16": np.dtype(np.uint16),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
}


#: Names of the element types as numpy, PyTorch and kpool spell them.
_NAMES = {"bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "float16": "f16",
          "half": "f16", "f32": "f32", "float32": "f32"}


def element_type(dtype):
    """The kpool element type name ("bf16", "f16", "f32") of a dtype or name.

    Takes kpool's names ("bf16", "f16", "f32"), the frameworks' names
    ("bfloat16", "float16", "half", "float32"), PyTorch dtypes
    (``torch.bfloat16``, ``torch.float16``, ``torch.float32``) and numpy
    dtypes: ``uint16`` is bf16 (its bit patterns), ``float16`` f16,
    ``float32`` f32.
    """
    if isinstance(dtype, str) and dtype in _NAMES:
        return _NAMES[dtype]
    text = str(dtype)
    if text.startswith("torch."):   # a torch.dtype, without importing torch
        name = _NAMES.get(text[len("torch."):])
        if name is not None:
            return name
        raise TypeError(f"kpool: {text} is not an element type; use "
                        "torch.bfloat16, torch.float16 or torch.float32")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"kpool: {dtype!r} is not an element type; use "
                        "'bf16'/'bfloat16' (torch.bfloat16, or numpy uint16 "
                        "bit patterns), 'f16'/'float16' or 'f32'/'float32'"
                        ) from None
    for name, d in DTYPES.items():
        if d == dt:
            return name
    raise TypeError(f"kpool: dtype {dt} is not an element type; use uint16 "
                    "(bf16 bit patterns), float16 or float32")


def bf16_to_f32(bits):
    """Widens bf16 bit patterns (uint16) to float32, exactly."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x):
    """Rounds float32 values to bf16 (nearest even), as uint16 patterns.

    NaNs stay NaNs (quiet); infinities and signed zeros are kept.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    rounded = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(
            np.uint16)
    return out


def to_f32(x, etype):
    """Values of element type `etype` (numpy storage) as float32."""
    etype = element_type(etype)
    if etype == "bf16":
        return bf16_to_f32(x)
    return np.asarray(x).astype(np.float32)


def from_f32(x, etype):
    """float32 values rounded (nearest even) to `etype`'s numpy storage."""
    etype = element_type(etype)
    if etype == "bf16":
        return f32_to_bf16(x)
    return np.asarray(x, dtype=np.float32).astype(DTYPES[etype])


def ulp_distance(a, b, etype):
    """Elementwise distance in units in the last place of `etype`.

    Counts the representable values between `a` and `b` (both in `etype`'s
    numpy storage); +0 and -0 are 0 apart. Returns int64.
    """
    etype = element_type(etype)
    bits = {"bf16": (np.uint16, 16), "f16": (np.uint16, 16),
            "f32": (np.uint32, 32)}[etype]

    def ordered(v):
        u = np.ascontiguousarray(v).view(bits[0]).astype(np.int64)
        sign = np.int64(1) << np.int64(bits[1] - 1)
        return np.where(u & sign, -(u & (sign - 1)), u)

    return np.abs(ordered(a) - ordered(b))
