"""Run-time extents that contradict the op (docs/semantics.md, revision 3,
"Extents that contradict the op at run time"): host validation rejects the
call naming the operand and the dimension as kpool.status_error names the
Extent finding the kernels record for it ((operand id << 4 | dimension) << 8
| 11, kpool/ABI/StatusWord.h), and adds the values. The kernels' side is run
by test/Integration/CPU/extent-findings.mlir and test/AOT/aot-extents.test;
kernel sets always check shapes, so these calls never reach the kernels,
validated or not."""

import numpy as np
import pytest

import kpool
from kpool import _capi

D, K = 8, 2


def operand_ids():
    """The kernels' operand ids: each name's place among the table's
    distinct operand names, first appearance first."""
    ids = {}
    for kernel in _capi.kernels().values():
        for operand in kernel.operands:
            ids.setdefault(operand.name, len(ids))
    return ids


IDS = operand_ids()


def word(name, dim):
    return ((IDS[name] << 4 | dim) << 8) | 11


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


def same_words(op, host, name, dim):
    """`host` (the host's message) names `name` and `dim` in the words of
    the kernels' word for them."""
    kernels = decoded(word(name, dim))
    said = f"'{name}' dimension {dim}"
    assert kernels.startswith(said + " contradicts the op"), kernels
    assert host.startswith(f"{op}: {said} is "), host


@pytest.mark.parametrize("case,name,dim,values", [
    ("k", "k", 1, "16, expected 8 (head_dim)"),
    ("ape", "ape", 0, "3, expected 2 (kpool)"),
    ("gate", "gate", 0, "5, expected 6 (the rows of 'k')"),
    ("pooled", "pooled", 1, "4, expected 8 (head_dim)"),
])
@pytest.mark.parametrize("validate", [True, False])
def test_compress(ks, case, name, dim, values, validate):
    k = rows(6, 16 if case == "k" else D)
    gate = rows(5 if case == "gate" else 6, k.shape[1])
    ape = np.zeros((3 if case == "ape" else K, D), np.float32)
    pooled = np.full((4, 4 if case == "pooled" else D), -1, np.float32)
    pro = np.array([0, 1, 3], np.uint32)
    with pytest.raises(kpool.KPoolError) as host:
        ks.compress(k, gate, ape, IRO, pro, CACHE, out=pooled,
                    validate=validate)
    assert str(host.value) == f"compress: '{name}' dimension {dim} is {values}"
    same_words("compress", str(host.value), name, dim)
    assert (pooled == -1).all()


@pytest.mark.parametrize("case,dim,values", [
    ("pairs", 1, "3, expected 2 (keys and gates)"),
    ("window", 2, "1, expected at least 2 (kpool)"),
])
def test_seed_tail(ks, case, dim, values):
    shape = (2, 3, K, D) if case == "pairs" else (2, 2, 1, D)
    tail = np.full(shape, 5, np.float32)
    with pytest.raises(kpool.KPoolError) as host:
        ks.seed_tail(tail, rows(6), rows(6), IRO, CACHE, SLOTS)
    assert str(host.value) == f"seed_tail: 'tail' dimension {dim} is {values}"
    same_words("seed_tail", str(host.value), "tail", dim)
    assert (tail == 5).all()


def test_ring_close(ks):
    tail = np.full((2, 2, K, D), 5, np.float32)
    with pytest.raises(kpool.KPoolError) as host:
        ks.ring_close(tail, rows(6), rows(6), np.zeros((K, 4), np.float32),
                      IRO, CACHE, SLOTS)
    assert str(host.value) == ("ring_close: 'ape' dimension 1 is 4, "
                               "expected 8 (head_dim)")
    same_words("ring_close", str(host.value), "ape", 1)


def test_every_operand_the_kernels_name_decodes():
    """Every operand the lowering's checks name (ExtentChecks) has an id in
    the table and decodes to its own name."""
    for name in ("k", "gate", "ape", "input_row_offsets", "pool_row_offsets",
                 "slot_idx", "tail", "pooled", "closed", "closed_pool",
                 "cache_keys"):
        for dim in range(4):
            assert decoded(word(name, dim)).startswith(
                f"'{name}' dimension {dim} contradicts"), (name, dim)
