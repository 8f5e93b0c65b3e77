"""The numpy reference and the element-type helpers on cases with known
answers (the kernels are checked against the reference elsewhere)."""

import numpy as np

import kpool
from kpool import reference


def test_bf16_round_to_nearest_even():
    one = 0x3F80
    values = np.array([1.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8,
                       1.0 + 2.0**-8 + 2.0**-20, -2.5, np.inf, -0.0],
                      dtype=np.float32)
    bits = kpool.f32_to_bf16(values)
    # Ties go to even: 1 + 2^-8 -> 1, 1 + 3*2^-8 -> 1 + 2^-6.
    assert bits.tolist() == [one, one, one + 2, one + 1, 0xC020, 0x7F80,
                             0x8000]
    assert np.isnan(kpool.bf16_to_f32(kpool.f32_to_bf16(
        np.array([np.nan], np.float32))))[0]
    assert kpool.bf16_to_f32(bits[:1]).tolist() == [1.0]


def test_ulp_distance():
    a = np.array([1.0, 0.0, -0.0], np.float32)
    b = np.nextafter(a, np.float32(2))
    assert kpool.ulp_distance(a, b, "f32").tolist() == [1, 1, 1]
    assert kpool.ulp_distance(np.float32([-1e-45]), np.float32([1e-45]),
                              "f32").tolist() == [2]
    assert kpool.ulp_distance(np.uint16([0x3F80]), np.uint16([0x3F83]),
                              "bf16").tolist() == [3]


def test_pool_function_known_values():
    keys = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    ape = np.zeros((2, 2), np.float32)
    # Equal scores: the mean.
    out = reference.pool_function(keys, np.zeros_like(keys), ape)
    assert out.tolist() == [2.0, 3.0]
    # A large score difference on channel 0 only: member 1 wins there.
    gates = np.array([[0.0, 0.0], [200.0, 0.0]], np.float32)
    out = reference.pool_function(keys, gates, ape)
    assert out.tolist() == [3.0, 3.0]
    # ape indexes members: the same, moved from the gates to ape.
    out = reference.pool_function(keys, np.zeros_like(keys), gates)
    assert out.tolist() == [3.0, 3.0]
    # kpool 1: every pool is its key.
    k = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert reference.pool_sequence(k, k, np.zeros((1, 2), np.float32)
                                   ).tolist() == k.tolist()


def test_reference_guards():
    k = np.ones((8, 2), np.float32)
    ape = np.zeros((4, 2), np.float32)
    # Request 1 reaches past k's rows: no tokens, no pools.
    assert reference.pool_counts([0, 4, 9], [0, 0], 4, num_rows=8) == [1, 0]
    tail = np.full((2, 2, 4, 2), 5.0, np.float32)
    reference.seed_tail(tail, k, k, [0, 3, 6], [0, 0], [1, 2])
    assert (tail[0] == 5).all() and (tail[1, :, :3] == 1).all()
    pooled, closed = reference.ring_close(tail, k, k, ape, [0, 3, 6], [1, 2],
                                          [1, 0], num_requests=1)
    assert closed.tolist() == [0, -1]


def test_pool_function_subnormal_weights():
    """Issue 24's finding: a member with key 3e38 and a score 88 below the
    other's weighs exp(-88) ~ 6e-39, a subnormal, and its term is ~1.8.
    The CPU kernels flush it (the default rule), the GPU kernels keep it."""
    keys = np.array([[1.0], [3e38]], np.float32)
    gates = np.array([[0.0], [-88.0]], np.float32)
    ape = np.zeros((2, 1), np.float32)
    flushed = reference.pool_function(keys, gates, ape)
    kept = reference.pool_function(keys, gates, ape, subnormal_weights="keep")
    assert flushed.tolist() == [1.0]
    assert abs(float(kept[0]) - (1 + np.exp(-88.0) * 3e38)) < 1e-6
    assert reference.SUBNORMAL_WEIGHTS == {"cpu": "flush", "cuda": "keep"}
    # Exactly the weights below 2^-126 go: 87.3365 below the max is kept
    # (exp = 2^-126 * 1.0000), 87.3366 below is not.
    gates = np.array([[0.0, 0.0], [-87.33654, -87.33655]], np.float32)
    keys = np.array([[0.0, 0.0], [2.0**126, 2.0**126]], np.float32)
    out = reference.pool_function(keys, gates, np.zeros((2, 2), np.float32),
                                  "f32")
    assert 0.99 < float(out[0]) < 1.01 and float(out[1]) == 0.0
    try:
        reference.pool_function(keys, gates, np.zeros((2, 2), np.float32),
                                subnormal_weights="ftz")
    except ValueError as e:
        assert "subnormal_weights" in str(e)
    else:
        assert False, "an unknown rule was accepted"
