"""Shared helpers of the kpool Python tests.

Run with Debian's interpreter (it has numpy and pytest):

    KPOOL_CAPI_LIB=<build>/lib/libKPoolRuntime.so PYTHONPATH=python \\
        /usr/bin/python3 -m pytest -q python/tests
"""

import numpy as np
import pytest

import kpool

ETYPES = ["bf16", "f16", "f32"]

#: Kernels vs the numpy reference (different exp): ulps of the element type.
#: Keys compared this way are drawn positive, so that no cancellation in the
#: weighted sum amplifies the exp difference into many ulps of a small
#: result (test_ops.py checks signed keys with a bound relative to the sum of
#: |weight * key|; bit-identity checks use signed keys).
ULPS = {"bf16": 1, "f16": 1, "f32": 4}


def random_inputs(rng, rows, dim, kpool_, etype, signed=False):
    """Keys, gates and ape as the spec's tests want them: a non-zero ape and
    large gates, so that the softmax discriminates between members. Keys are
    positive unless `signed` (see ULPS)."""
    if signed:
        k = rng.standard_normal((rows, dim))
    else:
        k = rng.uniform(0.25, 2.0, (rows, dim))
    k = kpool.from_f32(k.astype(np.float32), etype)
    gate = kpool.from_f32(
        (rng.standard_normal((rows, dim)) * 4).astype(np.float32), etype)
    ape = (rng.standard_normal((kpool_, dim)) * 2).astype(np.float32)
    return k, gate, ape


def assert_ulps(actual, expected, etype, limit=None):
    """`actual` within `limit` (default ULPS[etype]) ulps of `expected`."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype
    limit = ULPS[etype] if limit is None else limit
    ulps = kpool.ulp_distance(actual, expected, etype)
    worst = int(ulps.max(initial=0))
    assert worst <= limit, f"{etype}: {worst} ulps apart (limit {limit})"


def assert_bits(actual, expected):
    """Bit-for-bit equality (NaN-safe, -0 != +0)."""
    actual = np.ascontiguousarray(actual)
    expected = np.ascontiguousarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype
    same = actual.view(np.uint8) == expected.view(np.uint8)
    assert same.all(), f"{np.count_nonzero(~same)} bytes differ"


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)
