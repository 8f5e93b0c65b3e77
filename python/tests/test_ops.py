"""The four ops on numpy arrays against the numpy reference."""

import numpy as np
import pytest

import kpool
from conftest import ETYPES, assert_bits, assert_ulps, random_inputs

D = 32
K = 4

# A ragged batch (cache length, tokens): a prefill, a chunk that starts and
# ends inside pools, an empty request, a call shorter than a pool, and two
# requests past 2^16 positions (pool ids past 2^14 and 2^16).
BATCH = [(0, 13), (6, 11), (9, 0), (5, 2), (70001, 9), (4 * 65537 + 3, 6)]


def batch_metadata(batch):
    iro = np.concatenate([[0], np.cumsum([n for _, n in batch])])
    cache = np.array([c for c, _ in batch])
    return iro.astype(np.uint32), cache.astype(np.uint32)


def test_pool_offsets_known_counts():
    iro = [0, 9, 14, 15, 26]
    cache = [0, 3, 2, 70001]
    assert kpool.pool_offsets(iro, cache, 4).tolist() == [0, 2, 3, 3, 5]
    assert kpool.pool_offsets(iro, cache, 1).tolist() == [0, 9, 14, 15, 26]
    # kpool 3: pools 0..2 | 1..2 (positions 3..7) -> 1 | none | 23334..23336
    assert kpool.pool_offsets(iro, cache, 3).tolist() == [0, 3, 4, 4, 7]
    out = np.full(5, -1, dtype=np.int32)
    got = kpool.pool_offsets(np.array(iro, np.int64), cache, 4, out=out)
    assert got is out and out.tolist() == [0, 2, 3, 3, 5]
    assert kpool.reference.pool_offsets(iro, cache, 4).tolist() == [
        0, 2, 3, 3, 5]


@pytest.mark.parametrize("etype", ETYPES)
def test_compress(rng, etype):
    iro, cache = batch_metadata(BATCH)
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, etype)
    pro = kpool.pool_offsets(iro, cache, K)
    assert pro.tolist() == kpool.reference.pool_offsets(iro, cache,
                                                        K).tolist()
    pooled = kpool.compress(k, gate, ape, iro, pro, cache)
    expected = kpool.reference.compress(k, gate, ape, iro, pro, cache)
    assert pooled.shape == (int(pro[-1]), D) and pooled.dtype == k.dtype
    assert_ulps(pooled, expected, etype)
    # pool_row_offsets computed when not given; a caller's output.
    out = np.zeros_like(pooled)
    again = kpool.compress(k, gate, ape, iro, None, cache, out=out)
    assert again is out
    assert_bits(out, pooled)


def test_compress_signed_f32_keys(rng):
    """f32 with keys of both signs: the weighted sum cancels, so the kernels
    and numpy (different exp) are compared against a bound relative to the
    sum of |weight * key| rather than the result."""
    t = 64 * K
    k = rng.standard_normal((t, D)).astype(np.float32)
    gate = (rng.standard_normal((t, D)) * 4).astype(np.float32)
    ape = (rng.standard_normal((K, D)) * 2).astype(np.float32)
    pooled = kpool.compress(k, gate, ape, [0, t], None, [0])
    z = gate.reshape(-1, K, D).astype(np.float64) + ape
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    exact = (w * k.reshape(-1, K, D)).sum(axis=1)
    scale = (w * np.abs(k.reshape(-1, K, D))).sum(axis=1)
    err = np.abs(pooled - exact)
    assert (err <= 8 * np.finfo(np.float32).eps * scale).all()


@pytest.mark.parametrize("etype", ETYPES)
def test_compress_subnormal_weights(rng, etype):
    """Revision 3's subnormal weights (issue 24, finding 5): members 80 to
    106 below a pool's max with keys up to 3e38 (65504 in f16). The CPU
    kernels flush every weight below 2^-126 and no other: they equal the
    numpy reference with that rule within the usual ulps, and the exact
    float64 function with those weights zero within the contract's bound in
    ulps of the magnitude S; keeping them would be far off."""
    pools = 64
    huge = 65504.0 if etype == "f16" else 3e38
    k = np.zeros((pools * K, D), np.float32)
    gate = np.zeros((pools * K, D), np.float32)
    i = np.arange(pools * D).reshape(pools, D)
    gap = 80 + 26.0 * i / (pools * D)
    gap[0, 0] = 88.0  # the finding's case
    big = np.where((i // 3) % 2 == 0, huge, -huge)
    big[0, 0] = huge
    for j in range(pools):
        k[j * K] = np.where(i[j] % 2 == 0, 1.0, 0.0)
        k[j * K + 1] = big[j]
        k[j * K + 2:j * K + K] = 1.0
        gate[j * K + 1] = -gap[j]
        gate[j * K + 2:j * K + K] = -120.0
    ape = np.zeros((K, D), np.float32)
    kb, gb = kpool.from_f32(k, etype), kpool.from_f32(gate, etype)
    pooled = kpool.compress(kb, gb, ape, [0, pools * K], None, [0])
    expected = kpool.reference.compress(kb, gb, ape, [0, pools * K],
                                        [0, pools], [0])
    # f32: the kernels' exp is up to 0.05 |x| ulps off near x = -87
    # (lib/Dialect/KPool/Utils/Numerics.cpp), numpy's within one.
    assert_ulps(pooled, expected, etype, 8 if etype == "f32" else None)
    # Against the exact function (float64), weights below 2^-126 zero.
    kk = kpool.to_f32(kb, etype).astype(np.float64).reshape(pools, K, D)
    z = kpool.to_f32(gb, etype).reshape(pools, K, D)
    x32 = z - z.max(axis=1, keepdims=True)  # float32, as the kernels
    w = np.exp(x32.astype(np.float64))
    w_kept = w.copy()
    w[x32 < np.float32(-87.33654022216796875)] = 0
    exact = (w * kk).sum(1) / w.sum(1)
    mag = (w * np.abs(kk)).sum(1) / w.sum(1)
    kept = (w_kept * kk).sum(1) / w_kept.sum(1)
    mant = {"bf16": 7, "f16": 10, "f32": 23}[etype]
    min_exp = -14 if etype == "f16" else -126
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.maximum(mag, 1e-300))),
                             min_exp) - mant)
    got = kpool.to_f32(pooled, etype).astype(np.float64)
    bound = 4 + 6 * np.abs(z).max(axis=1) if etype == "f32" else 1.0
    err = np.abs(got - exact) / ulp
    assert (err <= bound).all(), f"{etype}: {err.max()} ulps of S"
    assert float(got[0, 0]) == 1.0  # the finding: flushed, exact 1
    if etype != "f16":
        # The rules differ on these inputs: keeping is off by far more.
        assert (np.abs(kept - exact) / ulp > 64).sum() > pools


@pytest.mark.parametrize("etype", ETYPES)
def test_seed_tail(rng, etype):
    iro, cache = batch_metadata(BATCH)
    k, gate, _ = random_inputs(rng, int(iro[-1]), D, K, etype)
    slots = np.array([7, 2, 0, 5, 3, 1], dtype=np.uint32)
    sentinel = kpool.from_f32(np.full((8, 2, K, D), -3.0, np.float32), etype)
    tail = sentinel.copy()
    got = kpool.seed_tail(tail, k, gate, iro, cache, slots)
    assert got is tail
    expected = kpool.reference.seed_tail(sentinel.copy(), k, gate, iro, cache,
                                         slots)
    assert_bits(tail, expected)
    # Slots 4 and 6 belong to no request: untouched.
    assert_bits(tail[[4, 6]], sentinel[[4, 6]])
    # num_requests = 2: only the first two requests write.
    tail = sentinel.copy()
    kpool.seed_tail(tail, k, gate, iro, cache, slots, 2)
    expected = kpool.reference.seed_tail(sentinel.copy(), k, gate, iro, cache,
                                         slots, 2)
    assert_bits(tail, expected)


@pytest.mark.parametrize("etype", ETYPES)
def test_ring_close(rng, etype):
    iro, cache = batch_metadata(BATCH)
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, etype)
    tail_k, tail_g, _ = random_inputs(rng, 8 * K, D, K, etype)
    tail = np.stack([tail_k.reshape(8, K, D), tail_g.reshape(8, K, D)], 1)
    slots = [4, 0, 6, 2, 7, 1]
    pooled, closed = kpool.ring_close(tail, k, gate, ape, iro, cache, slots)
    ref_pooled, ref_closed = kpool.reference.ring_close(
        tail, k, gate, ape, iro, cache, slots)
    # (6, 11) closes pool 1; (70001, 9) pool 17500; (4*65537+3, 6) pool
    # 65537; the others close nothing.
    assert closed.tolist() == [-1, 1, -1, -1, 17500, 65537]
    assert closed.tolist() == ref_closed.tolist()
    assert_ulps(pooled, ref_pooled, etype)
    zero = np.zeros(D, dtype=k.dtype)
    for b in (0, 2, 3):
        assert_bits(pooled[b], zero)
    # Padding rows past num_requests: -1 and zeros, whatever was there.
    pooled2 = np.full_like(pooled, 7)
    closed2 = np.full(len(cache), 9, dtype=np.int32)
    kpool.ring_close(tail, k, gate, ape, iro, cache, slots, 2, pooled=pooled2,
                     closed_pool=closed2)
    assert closed2.tolist() == [-1, 1, -1, -1, -1, -1]
    assert_bits(pooled2[1], pooled[1])
    assert_bits(pooled2[2:], np.zeros((4, D), dtype=k.dtype))


@pytest.mark.parametrize("etype", ETYPES)
@pytest.mark.parametrize("num_requests", [None, 3])
def test_step_matches_the_four_ops(rng, etype, num_requests):
    """KernelSet.step (kpool.step, one kernel) returns what ring_close,
    pool_offsets, compress and seed_tail return, bit for bit, and leaves
    the ring as they do."""
    iro, cache = batch_metadata(BATCH)
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, etype)
    tail_k, tail_g, _ = random_inputs(rng, 8 * K, D, K, etype)
    tail = np.stack([tail_k.reshape(8, K, D), tail_g.reshape(8, K, D)], 1)
    slots = [4, 0, 6, 2, 7, 1]
    ks = kpool.kernel_set(etype, D, K)
    ring = tail.copy()
    closed, ids = ks.ring_close(ring, k, gate, ape, iro, cache, slots,
                                num_requests)
    pro = ks.pool_offsets(iro, cache)
    pooled = ks.compress(k, gate, ape, iro, pro, cache)
    ks.seed_tail(ring, k, gate, iro, cache, slots, num_requests)

    fused_ring = tail.copy()
    f_closed, f_ids, f_pro, f_pooled = ks.step(
        fused_ring, k, gate, ape, iro, cache, slots, num_requests)
    assert f_ids.tolist() == ids.tolist()
    assert f_pro.tolist() == pro.tolist()
    assert_bits(f_closed, closed)
    # The pooled output is a capacity: floor(T / K) + B rows.
    assert f_pooled.shape == (int(iro[-1]) // K + len(cache), D)
    assert_bits(f_pooled[:int(pro[-1])], pooled)
    assert_bits(f_pooled[int(pro[-1]):], np.zeros_like(f_pooled[int(pro[-1]):]))
    assert_bits(fused_ring, ring)
    with pytest.raises(kpool.KPoolError,
                       match=r"^step: request 0: its pools reach past the 2 "
                             r"rows of 'pooled' \(requests 0\.\.0 complete 3 "
                             r"pool\(s\), the call completes 7\)$"):
        ks.step(fused_ring, k, gate, ape, iro, cache, slots,
                pooled=np.zeros((2, D), dtype=k.dtype))


def test_ring_close_matches_compress_bitwise(rng):
    """A pool closed from ring members is bit-identical to the same pool
    built by compress from the whole sequence."""
    k, gate, ape = random_inputs(rng, 3 * K, D, K, "bf16")
    whole = kpool.compress(k, gate, ape, [0, 3 * K], None, [0])
    for held in range(1, K):
        tail = np.zeros((1, 2, K, D), dtype=k.dtype)
        # The ring holds members 0..held-1 of pool 1; this call brings the
        # rest, from position K + held.
        tail[0, 0, :held] = k[K:K + held]
        tail[0, 1, :held] = gate[K:K + held]
        rows = slice(K + held, 3 * K)
        pooled, closed = kpool.ring_close(tail, k[rows], gate[rows], ape,
                                          [0, 3 * K - K - held], [K + held],
                                          [0])
        assert closed.tolist() == [1]
        assert_bits(pooled[0], whole[1])


@pytest.mark.parametrize("kpool_", [1, 3])
@pytest.mark.parametrize("etype", ["bf16", "f32"])
def test_kpool_1_and_3(rng, etype, kpool_):
    iro, cache = batch_metadata(BATCH)
    dim = 24
    k, gate, ape = random_inputs(rng, int(iro[-1]), dim, kpool_, etype)
    pro = kpool.pool_offsets(iro, cache, kpool_)
    assert pro.tolist() == kpool.reference.pool_offsets(iro, cache,
                                                        kpool_).tolist()
    pooled = kpool.compress(k, gate, ape, iro, pro, cache)
    assert_ulps(pooled, kpool.reference.compress(k, gate, ape, iro, pro,
                                                 cache), etype)
    slots = np.arange(len(cache))[::-1].copy()
    tail_k, tail_g, _ = random_inputs(rng, 6 * kpool_, dim, kpool_, etype)
    tail = np.stack([tail_k.reshape(6, kpool_, dim),
                     tail_g.reshape(6, kpool_, dim)], 1)
    before = tail.copy()
    got, closed = kpool.ring_close(tail, k, gate, ape, iro, cache, slots)
    ref, ref_closed = kpool.reference.ring_close(tail, k, gate, ape, iro,
                                                 cache, slots)
    assert closed.tolist() == ref_closed.tolist()
    assert_ulps(got, ref, etype)
    kpool.seed_tail(tail, k, gate, iro, cache, slots)
    kpool.reference.seed_tail(before, k, gate, iro, cache, slots)
    assert_bits(tail, before)
    if kpool_ == 1:
        # Every token is its own pool: the ring is never used.
        assert pro[-1] == iro[-1]
        assert (closed == -1).all()


def test_strided_views(rng):
    """Slices, column-major and padded views give the same bits as dense
    arrays: strides are passed in elements, nothing is copied."""
    etype = "bf16"
    iro, cache = batch_metadata(BATCH)
    t = int(iro[-1])
    k, gate, ape = random_inputs(rng, t, D, K, etype)
    slots = [4, 0, 6, 2, 7, 1]
    tail_k, tail_g, _ = random_inputs(rng, 8 * K, D, K, etype)
    tail = np.stack([tail_k.reshape(8, K, D), tail_g.reshape(8, K, D)], 1)

    dense_pooled = kpool.compress(k, gate, ape, iro, None, cache)
    dense_ring = kpool.ring_close(tail, k, gate, ape, iro, cache, slots)
    dense_tail = kpool.seed_tail(tail.copy(), k, gate, iro, cache, slots)

    # k: every other column of a wider array; gate: column-major; ape:
    # transposed storage; outputs: rows of larger arrays.
    wide = np.zeros((t, 2 * D), dtype=k.dtype)
    wide[:, ::2] = k
    k_view = wide[:, ::2]
    gate_view = np.asfortranarray(gate)
    ape_view = np.ascontiguousarray(ape.T).T
    out_big = np.zeros((2 * len(dense_pooled), D + 3), dtype=k.dtype)
    out_view = out_big[::2, 1:D + 1]
    assert not k_view.flags.c_contiguous and not out_view.flags.c_contiguous
    pooled = kpool.compress(k_view, gate_view, ape_view, iro, None, cache,
                            out=out_view)
    assert pooled is out_view
    assert_bits(out_view, dense_pooled)

    # The ring aliased into cache pages: a slot's stride is padded.
    pages = np.zeros((8, 2 * K * D + 40), dtype=k.dtype)
    ring = pages[:, :2 * K * D].reshape(8, 2, K, D)
    assert np.shares_memory(ring, pages) and ring.strides[0] == pages.strides[0]
    ring[...] = tail
    got = kpool.ring_close(ring, k_view, gate_view, ape_view, iro, cache,
                           slots)
    assert_bits(got[0], dense_ring[0])
    assert got[1].tolist() == dense_ring[1].tolist()
    kpool.seed_tail(ring, k_view, gate_view, iro, cache, slots)
    assert_bits(ring, dense_tail)
    assert not pages[:, 2 * K * D:].any()  # the padding is never written

    # Metadata as strided int32 views.
    iro_big = np.zeros(2 * len(iro), dtype=np.int32)
    iro_big[::2] = iro
    assert_bits(kpool.compress(k, gate, ape, iro_big[::2], None, cache),
                dense_pooled)


def test_reversed_rows_view(rng):
    """Negative strides are strides too."""
    iro, cache = batch_metadata(BATCH)
    t = int(iro[-1])
    k, gate, ape = random_inputs(rng, t, D, K, "f16")
    expected = kpool.compress(k, gate, ape, iro, None, cache)
    k_rev = np.ascontiguousarray(k[::-1])[::-1]
    assert k_rev.strides[0] < 0
    assert_bits(kpool.compress(k_rev, gate, ape, iro, None, cache), expected)


def test_rejects_strides_that_are_not_whole_elements():
    buf = np.zeros(4 * 64 * D + 16, dtype=np.uint8)
    # Rows 4*D + 2 bytes apart: not a whole number of f32 elements.
    k = np.ndarray((8, D), dtype=np.float32, buffer=buf,
                   strides=(4 * D + 2, 4))
    gate = np.zeros((8, D), np.float32)
    ape = np.zeros((K, D), np.float32)
    with pytest.raises(kpool.KPoolError,
                       match=r"compress: 'k' has a stride of 130 bytes in "
                             r"dimension 0, not a whole number of 4-byte"):
        kpool.compress(k, gate, ape, [0, 8], None, [0])
    # A start address that is not element-aligned.
    k = np.ndarray((8, D), dtype=np.float32, buffer=buf, offset=2)
    with pytest.raises(kpool.KPoolError, match="not aligned"):
        kpool.compress(k, gate, ape, [0, 8], None, [0])


def test_rejects_wrong_dtypes():
    k = np.zeros((8, D), np.float32)
    ape = np.zeros((K, D), np.float32)
    ks = kpool.KernelSet("bf16", D, K)
    with pytest.raises(TypeError, match="'k' must have dtype uint16"):
        ks.compress(k, k.astype(np.uint16), ape, [0, 8], None, [0])
    with pytest.raises(TypeError, match="'ape' must have dtype float32"):
        kpool.compress(k, k, ape.astype(np.float64), [0, 8], None, [0])
    with pytest.raises(TypeError, match="dtype int64"):
        kpool.compress(k.astype(np.int64), k, ape, [0, 8], None, [0])
    with pytest.raises(TypeError, match="must hold integers"):
        kpool.compress(k, k, ape, [0.0, 8.0], None, [0])


def test_kernel_set_config():
    ks = kpool.KernelSet(np.float16, 24, 3, vector_size=8)
    assert (ks.element_type, ks.head_dim, ks.kpool) == ("f16", 24, 3)
    assert ks.dtype == np.float16
    with pytest.raises(kpool.KPoolError, match=r"kernel set: 'head_dim' = 0 "
                                               r"is not in \[1, "):
        kpool.KernelSet("f32", 0, 4)
    with pytest.raises(TypeError, match="not an element type"):
        kpool.KernelSet(np.float64, 8, 4)


def test_code_options_give_the_same_bits(rng):
    """OpenMP threads and scalar channel loops compute the same function."""
    iro, cache = batch_metadata(BATCH)
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, "f32", signed=True)
    default = kpool.compress(k, gate, ape, iro, None, cache)
    assert_bits(kpool.compress(k, gate, ape, iro, None, cache, openmp=True),
                default)
    assert_bits(kpool.compress(k, gate, ape, iro, None, cache,
                               vector_size=0), default)


class _DLPackOnly:
    """A host array seen only through the DLPack protocol, as a PyTorch CPU
    tensor is."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_host_arrays(rng):
    """The ops take any host array exposing __dlpack__ without a copy, for
    inputs and for outputs written in place; device arrays get an error."""
    iro, cache = batch_metadata(BATCH)
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, "bf16")
    pro = kpool.pool_offsets(iro, cache, K)
    expected = kpool.compress(k, gate, ape, iro, pro, cache)
    out = np.zeros_like(expected)
    result = _DLPackOnly(out)
    got = kpool.compress(_DLPackOnly(k), _DLPackOnly(gate), _DLPackOnly(ape),
                         _DLPackOnly(iro), _DLPackOnly(pro),
                         _DLPackOnly(cache), out=result)
    assert_bits(out, expected)  # written through the alias, no copy
    assert got is result        # the caller's object comes back
    tail_k, tail_g, _ = random_inputs(rng, 8 * K, D, K, "bf16")
    tail = np.stack([tail_k.reshape(8, K, D), tail_g.reshape(8, K, D)], 1)
    ring = tail.copy()
    slots = np.array([4, 0, 6, 2, 7, 1], dtype=np.uint32)
    kpool.seed_tail(_DLPackOnly(ring), k, gate, iro, cache, _DLPackOnly(slots))
    want = tail.copy()
    kpool.seed_tail(want, k, gate, iro, cache, slots)
    assert_bits(ring, want)

    class Device:
        __cuda_array_interface__ = {"shape": (4, D), "typestr": "<u2",
                                    "data": (0, False), "version": 3}
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: an operand of type Device lives on "
                             r"device memory \(__cuda_array_interface__\)"):
        kpool.compress(Device(), gate, ape, iro, pro, cache)
