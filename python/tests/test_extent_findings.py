"""Run-time extents that contradict the op (docs/semantics.md, revision 3,
"Extents that contradict the op at run time"): host validation rejects the
call in the words kpool.status_error gives the Extent finding the kernels
record for it (operand << 8 | dimension << 16 | expectation << 20 |
actual << 24 | expected << 44 | 11; the kernels' side is run by
test/Integration/CPU/extent-findings.mlir and test/AOT/aot-extents.test).
Kernel sets always check shapes, so these calls never reach the kernels.
(The metadata lengths are checked by the Python layer before either.)"""

import numpy as np
import pytest

import kpool

D, K = 8, 2
K_, GATE, APE, TAIL, POOLED = 1, 2, 3, 8, 9
HEAD_DIM, KPOOL, KEYS_AND_GATES, RING_WINDOW, TOKEN_ROWS = 1, 2, 3, 4, 5


def word(operand, dim, expectation, actual, expected):
    return (11 | operand << 8 | dim << 16 | expectation << 20 |
            actual << 24 | expected << 44)


def decoded(w):
    return kpool.status_error(w).rsplit(" (found by the kernels", 1)[0]


@pytest.fixture(scope="module")
def ks():
    return kpool.KernelSet("f32", D, K)


def rows(n, width=D):
    return np.arange(n * width, dtype=np.float32).reshape(n, width) / 7


IRO = np.array([0, 3, 6], np.uint32)
CACHE = np.array([0, 1], np.uint32)
SLOTS = np.array([1, 0], np.uint32)


@pytest.mark.parametrize("case,w", [
    ("k", word(K_, 1, HEAD_DIM, 16, D)),
    ("ape", word(APE, 0, KPOOL, 3, K)),
    ("gate", word(GATE, 0, TOKEN_ROWS, 5, 6)),
    ("pooled", word(POOLED, 1, HEAD_DIM, 4, D)),
])
@pytest.mark.parametrize("validate", [True, False])
def test_compress(ks, case, w, validate):
    k = rows(6, 16 if case == "k" else D)
    gate = rows(5 if case == "gate" else 6, k.shape[1])
    ape = np.zeros((3 if case == "ape" else K, D), np.float32)
    pooled = np.full((4, 4 if case == "pooled" else D), -1, np.float32)
    pro = np.array([0, 1, 3], np.uint32)
    with pytest.raises(kpool.KPoolError) as host:
        ks.compress(k, gate, ape, IRO, pro, CACHE, out=pooled,
                    validate=validate)
    assert str(host.value) == "compress: " + decoded(w)
    assert (pooled == -1).all()


@pytest.mark.parametrize("case,w", [
    ("pairs", word(TAIL, 1, KEYS_AND_GATES, 3, 2)),
    ("window", word(TAIL, 2, RING_WINDOW, 1, K)),
])
def test_seed_tail(ks, case, w):
    shape = (2, 3, K, D) if case == "pairs" else (2, 2, 1, D)
    tail = np.full(shape, 5, np.float32)
    with pytest.raises(kpool.KPoolError) as host:
        ks.seed_tail(tail, rows(6), rows(6), IRO, CACHE, SLOTS)
    assert str(host.value) == "seed_tail: " + decoded(w)
    assert (tail == 5).all()


def test_ring_close(ks):
    tail = np.full((2, 2, K, D), 5, np.float32)
    with pytest.raises(kpool.KPoolError) as host:
        ks.ring_close(tail, rows(6), rows(6), np.zeros((K, 4), np.float32),
                      IRO, CACHE, SLOTS)
    assert str(host.value) == "ring_close: " + decoded(
        word(APE, 1, HEAD_DIM, 4, D))


def test_saturated_extent():
    """Extents past 2^20 - 1 are recorded as 2^20 - 1 and read "or more"."""
    assert decoded(word(K_, 1, HEAD_DIM, 2**20 - 1, 8)) == (
        "'k' dimension 1 is 1048575 or more at run time, expected 8 "
        "(head_dim)")


def test_unknown_operand():
    assert "extent finding the kernels do not record" in kpool.status_error(
        11 | 99 << 8)
