"""The numpy reference of the pool cache (docs/semantics.md, "The pool
cache") on cases with known answers: E4M3FN codes, the Hadamard stages, the
scales and the placement guards. Needs only numpy (no C API library)."""

import numpy as np
import pytest

import kpool
from kpool import reference

NAN_CODES = (0x7F, 0xFF)


def e4m3fn_value(code):
    """The value of an E4M3FN code, spelled out once more for the tests."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0:
        return sign * mantissa / 512.0
    return sign * (8 + mantissa) / 8.0 * 2.0**(exponent - 7)


def test_e4m3fn_decode_values():
    codes = np.arange(256, dtype=np.uint8)
    values = reference.e4m3fn_decode(codes)
    assert values.dtype == np.float32
    for code in range(256):
        if code in NAN_CODES:
            assert np.isnan(values[code])
        else:
            assert values[code] == e4m3fn_value(code), hex(code)
    assert values[0x7E] == 448.0 and values[0xFE] == -448.0
    assert values[0x01] == 2.0**-9 and values[0x08] == 2.0**-6
    assert values[0x38] == 1.0
    assert np.signbit(values[0x80]) and values[0x80] == 0.0


def test_e4m3fn_round_trip_all_codes():
    codes = np.arange(256, dtype=np.uint8)
    again = reference.e4m3fn_encode(reference.e4m3fn_decode(codes))
    assert again.dtype == np.uint8
    finite = [c for c in range(256) if c not in NAN_CODES]
    assert again[finite].tolist() == finite
    # NaN keeps its sign; the NaN codes themselves come back.
    assert again[list(NAN_CODES)].tolist() == list(NAN_CODES)


def test_e4m3fn_midpoints_go_to_even():
    values = reference.e4m3fn_decode(np.arange(0x7F, dtype=np.uint8))
    lo = np.arange(0x7E)
    mid = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(
        np.float32)
    # The midpoints need one more bit than E4M3 has: exact in f32.
    assert (mid.astype(np.float64) ==
            (values[:-1].astype(np.float64) + values[1:]) / 2).all()
    even = np.where(lo % 2 == 0, lo, lo + 1)
    assert reference.e4m3fn_encode(mid).tolist() == even.tolist()
    assert reference.e4m3fn_encode(-mid).tolist() == (even | 0x80).tolist()
    # Just off the midpoint: the nearer code, whatever its parity.
    below = np.nextafter(mid, np.float32(0))
    above = np.nextafter(mid, np.float32(np.inf))
    assert reference.e4m3fn_encode(below).tolist() == lo.tolist()
    assert reference.e4m3fn_encode(above).tolist() == (lo + 1).tolist()


def test_e4m3fn_brute_force_nearest():
    # Random f32 values in range against a nearest-value search in float64.
    rng = np.random.default_rng(7)
    x = np.concatenate([
        rng.uniform(-448, 448, 4000),
        rng.uniform(-1, 1, 4000) * 2.0**-6,
        rng.uniform(-1, 1, 2000) * 2.0**-9,
    ]).astype(np.float32)
    codes = reference.e4m3fn_encode(x)
    table = np.array([e4m3fn_value(c) for c in range(0x7F)])
    for value, code in zip(x.tolist(), codes.tolist()):
        distance = np.abs(table - abs(value))
        best = np.flatnonzero(distance == distance.min())
        want = best[0] if len(best) == 1 else best[best % 2 == 0][0]
        want |= 0x80 if np.signbit(value) else 0
        assert code == want, (value, hex(code), hex(want))


def test_e4m3fn_signed_zero_and_extremes():
    tiny = np.float32([-0.0, -1e-9, -2.0**-10, -np.float32(1e-45),
                       -2.0**-149])
    assert reference.e4m3fn_encode(tiny).tolist() == [0x80] * len(tiny)
    assert reference.e4m3fn_encode(np.float32([0.0, 2.0**-10])).tolist() == [
        0x00, 0x00]
    assert reference.e4m3fn_encode(np.float32([448.0, -448.0])).tolist() == [
        0x7E, 0xFE]
    # 464 is halfway to the (non-existent) next value: saturates, no NaN.
    assert reference.e4m3fn_encode(np.float32([464.0, 1e30])).tolist() == [
        0x7E, 0x7E]


def sylvester(dim):
    """H[k, j] = (-1)^popcount(k & j)."""
    k = np.arange(dim)[:, None] & np.arange(dim)[None, :]
    parity = np.array([bin(v).count("1") % 2 for v in k.reshape(-1)])
    return np.where(parity.reshape(dim, dim) == 1, -1, 1).astype(np.float32)


@pytest.mark.parametrize("dim", [1, 2, 4, 8, 16, 128])
def test_hadamard_one_hot_is_a_sign_row(dim):
    rows = reference.hadamard(np.eye(dim, dtype=np.float32))
    assert rows.dtype == np.float32
    assert (rows == sylvester(dim)).all()
    assert (np.abs(rows) == 1).all()


@pytest.mark.parametrize("dim", [2, 8, 64, 128])
def test_hadamard_twice_is_d_times_x(rng, dim):
    x = rng.integers(-8, 9, (3, dim)).astype(np.float32)
    twice = reference.hadamard(reference.hadamard(x))
    assert (twice == dim * x).all()
    # The stages are exact here, so the transform is the Sylvester product.
    assert (reference.hadamard(x) == x @ sylvester(dim)).all()


def test_hadamard_rejects_other_d():
    with pytest.raises(ValueError):
        reference.hadamard(np.zeros(6, np.float32))


def absmax_scale(y):
    a = max(np.float32(np.abs(y).max()), np.float32(1e-4))
    return np.float32(a * (np.float32(1) / np.float32(448)))


@pytest.mark.parametrize("rotate", ["none", "hadamard"])
@pytest.mark.parametrize("etype", ["bf16", "f16", "f32"])
def test_pow2_scale_is_the_next_power_of_two(rng, rotate, etype):
    rows = (rng.standard_normal((64, 128)) *
            np.exp2(rng.integers(-12, 12, (64, 1)))).astype(np.float32)
    # Widened from the element type, as the dense output holds them.
    rows = kpool.to_f32(kpool.from_f32(rows, etype), etype)
    _, s_abs = reference.cache_entry(rows, etype, rotate=rotate)
    codes, s_pow2 = reference.cache_entry(rows, etype, rotate=rotate,
                                          scale="pow2")
    assert s_abs.dtype == np.float32 and s_pow2.dtype == np.float32
    assert codes.dtype == np.uint8 and codes.shape == rows.shape
    mantissa, _ = np.frexp(s_pow2)
    assert (mantissa == 0.5).all()          # a power of two
    assert (s_pow2 >= s_abs).all()
    assert (s_pow2 < 2 * s_abs).all()       # the smallest one
    if rotate == "none":
        for row, s in zip(rows, s_abs):
            assert s == absmax_scale(row)


def test_absmax_codes_reach_448_and_decode_close(rng):
    rows = rng.standard_normal((16, 64)).astype(np.float32)
    codes, s = reference.cache_entry(rows, "f32", rotate="none")
    assert (s == np.array([absmax_scale(r) for r in rows])).all()
    # The largest magnitude of each row maps to +-448.
    assert (np.abs(reference.e4m3fn_decode(codes)).max(axis=1) == 448).all()
    back = reference.e4m3fn_decode(codes) * s[:, None]
    assert (np.abs(back - rows) <= np.abs(rows) / 16 + s[:, None] * 2**-9
            ).all()


def test_zero_row_scale_floor():
    zero = np.zeros(128, np.float32)
    floor = np.float32(np.float32(1e-4) * (np.float32(1) / np.float32(448)))
    for rotate in ("none", "hadamard"):
        codes, s = reference.cache_entry(zero, "bf16", rotate=rotate)
        assert s == floor and s.dtype == np.float32
        assert (codes == 0).all()
        codes, s = reference.cache_entry(zero, "bf16", rotate=rotate,
                                         scale="pow2")
        assert s == np.float32(2.0**-22)  # 2^-23 < 1e-4/448 <= 2^-22
        assert (codes == 0).all()
    codes, _ = reference.cache_entry(-zero, "f32", rotate="none")
    assert (codes == 0x80).all()


def test_element_entry_is_the_rotated_row():
    x = np.float32([1, 2, 3, 4])
    values, s = reference.cache_entry(x, "f32", rotate="hadamard",
                                      entry="element")
    assert s is None and values.dtype == np.float32
    c = np.float32(1 / np.sqrt(4.0))
    assert values.tolist() == (np.float32([10, -2, -4, 0]) * c).tolist()
    values, _ = reference.cache_entry(x, "bf16", rotate="none",
                                      entry="element")
    assert values.dtype == np.uint16
    assert values.tolist() == kpool.from_f32(x, "bf16").tolist()


def test_store_cache_placement_and_guards():
    # One allocation of 5 pages: page_size * D code bytes, then page_size
    # f32 scales, the page stride padded past page_size * (D + 4).
    page_size, dim, pages, stride = 4, 8, 5, 4 * (8 + 4) + 16
    buf = np.zeros(pages * stride, np.uint8)
    keys = np.lib.stride_tricks.as_strided(
        buf, (pages, page_size, dim), (stride, dim, 1))
    scales = np.lib.stride_tricks.as_strided(
        buf[page_size * dim:].view(np.float32), (pages, page_size),
        (stride, 4))
    table = np.array([[3, 0, -1], [1, 7, 2]], np.int32)  # -1: padding
    entry = np.arange(1, dim + 1, dtype=np.uint8)

    assert reference.store_cache(keys, scales, table, 0, 5, entry,
                                 np.float32(0.5))
    assert keys[0, 1].tolist() == entry.tolist() and scales[0, 1] == 0.5
    assert reference.store_cache(keys, scales, table, 0, 2, entry + 10,
                                 np.float32(2))
    assert keys[3, 2].tolist() == (entry + 10).tolist() and scales[3, 2] == 2
    before = buf.copy()
    assert not reference.store_cache(keys, scales, table, 0, 9, entry, 1.0)
    assert not reference.store_cache(keys, scales, table, 0, 12, entry, 1.0)
    assert not reference.store_cache(keys, scales, table, 1, 4, entry, 1.0)
    assert not reference.store_cache(keys, scales, table, 2, 0, entry, 1.0)
    assert (buf == before).all()
    # Only the two entries changed, nothing in the padding.
    expected = np.zeros_like(buf)
    for page, row, codes, scale in [(0, 1, entry, 0.5), (3, 2, entry + 10, 2)]:
        base = page * stride
        expected[base + row * dim:base + (row + 1) * dim] = codes
        at = base + page_size * dim + 4 * row
        expected[at:at + 4] = np.float32([scale]).view(np.uint8)
    assert (buf == expected).all()


def test_store_cache_element_entry_without_scales():
    keys = np.zeros((2, 2, 4), np.uint16)
    table = np.array([[1, 0]], np.uint32)
    values = np.uint16([1, 2, 3, 4])
    assert reference.store_cache(keys, None, table, 0, 1, values)
    assert keys[1, 1].tolist() == [1, 2, 3, 4]
    assert keys.sum() == 10
