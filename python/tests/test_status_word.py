"""The status word (docs/semantics.md, "The status word"): every op's
kernels record the smallest (request << 8 | finding) their guards meet in a
caller's uint64, 0 when nothing is wrong; kpool.status_error decodes it.
Each case runs unvalidated (the kernels' guards alone) and is checked
against what host validation says of the same call."""

import numpy as np
import pytest

import kpool

D, K = 8, 2


@pytest.fixture(scope="module")
def ks():
    return kpool.KernelSet("f32", D, K)


@pytest.fixture(scope="module")
def cached():
    return kpool.KernelSet("f32", D, K, cache="fp8", rotate="hadamard")


def rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, D)).astype(np.float32)


def word():
    return np.zeros(1, dtype=np.uint64)


def code(request, finding):
    return request << 8 | finding


def run_both(call):
    """Runs `call(validate, status)` unvalidated with a status word, and
    validated; returns (word, host error message or None)."""
    st = word()
    call(False, st)
    try:
        call(True, word())
        host = None
    except kpool.KPoolError as e:
        host = str(e)
    return int(st[0]), host


def test_good_calls_leave_zero(ks):
    k = rows(12)
    iro = np.array([0, 5, 12], np.uint32)
    cache = np.array([1, 0], np.uint32)
    st = word()
    pro = ks.pool_offsets(iro, cache, status=st)
    ks.compress(k, k, np.zeros((K, D), np.float32), iro, pro, cache,
                status=st)
    tail = np.zeros((3, 2, K, D), np.float32)
    slots = np.array([2, 0], np.uint32)
    ks.ring_close(tail, k, k, np.zeros((K, D), np.float32), iro, cache,
                  slots, status=st)
    ks.seed_tail(tail, k, k, iro, cache, slots, status=st)
    ks.step(tail, k, k, np.zeros((K, D), np.float32), iro, cache, slots,
            status=st)
    assert int(st[0]) == 0
    assert kpool.status_error(st) is None


@pytest.mark.parametrize("case", [
    # (iro, pro, finding, request, host message)
    ([0, 4, 2, 8], [0, 2, 2, 5], 1, 1, "rows reversed"),
    ([0, 4, 8, 13], [0, 2, 4, 6], 2, 2, "reaches past the 12 rows"),
    ([0, 4, 8, 12], [0, 2, 3, 5], 4, 1, "completes 2 pool(s)"),
    ([0, 4, 8, 12], [0, 2, 4, 6], 5, 2, "is past the 5 rows of 'pooled'"),
])
def test_compress_findings(ks, case):
    iro, pro, finding, request, host_says = case
    k = rows(12)
    cache = np.zeros(3, np.uint32)
    out = np.zeros((5, D), np.float32)

    def call(validate, st):
        ks.compress(k, k, np.zeros((K, D), np.float32),
                    np.array(iro, np.uint32), np.array(pro, np.uint32), cache,
                    out=out, validate=validate, status=st)
    got, host = run_both(call)
    assert got == code(request, finding)
    assert host is not None and host_says in host
    message = kpool.status_error(got)
    assert message.startswith(f"request {request}: ")
    assert f"status word {hex(got)}" in message


def test_ring_findings(ks):
    k = rows(6)
    tail = np.zeros((2, 2, K, D), np.float32)
    iro = np.array([0, 2, 4, 6], np.uint32)
    cache = np.array([1, 1, 1], np.uint32)
    # Request 1's slot is past the ring; request 2's rows are reversed:
    # request 1 is the smaller code.
    for op in ("seed_tail", "ring_close", "step"):
        def call(validate, st, op=op, slots=(0, 5, 1)):
            bad = np.array([0, 2, 4, 1], np.uint32)
            getattr(ks, op)(tail.copy(), k, k,
                            *(() if op == "seed_tail"
                              else (np.zeros((K, D), np.float32),)),
                            bad, cache, np.array(slots, np.uint32),
                            validate=validate, status=st)
        got, host = run_both(call)
        assert got == code(1, 3), op
        assert host is not None
        assert kpool.status_error(got).startswith(
            "request 1: slot_idx[1] is not below max_slots"), op
        # num_requests outside [0, B]: request 0, finding 10.
        st = word()
        getattr(ks, op)(tail.copy(), k, k,
                        *(() if op == "seed_tail"
                          else (np.zeros((K, D), np.float32),)),
                        iro, cache, np.array([0, 1, 0], np.uint32), -1,
                        validate=False, status=st)
        assert int(st[0]) == code(0, 10), op
        assert kpool.status_error(st).startswith("num_requests is outside")


def test_step_capacity(ks):
    k = rows(8)
    tail = np.zeros((2, 2, K, D), np.float32)
    st = word()
    ks.step(tail, k, k, np.zeros((K, D), np.float32),
            np.array([0, 4, 8], np.uint32), np.zeros(2, np.uint32),
            np.array([0, 1], np.uint32), pooled=np.zeros((3, D), np.float32),
            validate=False, status=st)
    # Request 0 completes pools 0-1 (rows 0, 1), request 1 rows 2, 3: the
    # capacity of 3 rows is too small from request 1 on.
    assert int(st[0]) == code(1, 6)


@pytest.mark.parametrize("entry,finding", [(0xFFFFFFFF, 8), (9, 9)])
def test_cache_table_findings(cached, entry, finding):
    k = rows(8)
    iro = np.array([0, 4, 8], np.uint32)
    cache = np.zeros(2, np.uint32)
    page_size = 2
    keys = np.zeros((4, page_size, D), np.uint8)
    scales = np.zeros((4, page_size), np.float32)
    # Each request completes pools 0 and 1 (4 tokens, kpool 2), both on
    # page index 0 of its row: request 1's is bad.
    table = np.array([[0, 1], [entry, 2]], np.uint32)

    def call(validate, st):
        cached.compress(k, k, np.zeros((K, D), np.float32), iro, None, cache,
                        validate=validate, status=st, block_table=table,
                        cache_keys=keys.copy(), cache_scales=scales.copy())
    got, host = run_both(call)
    assert got == code(1, finding)
    assert host is not None and "request 1" in host
    assert kpool.status_error(got).startswith("request 1: a pool goes to")


def test_smallest_code_wins(ks):
    # Requests 1 and 3 both bad: the word holds request 1's, whatever order
    # the rows ran in (OpenMP threads).
    threads = kpool.KernelSet("f32", D, K, openmp=True)
    k = rows(16)
    iro = np.array([0, 4, 2, 8, 3, 16], np.uint32)
    cache = np.zeros(5, np.uint32)
    for kernels in (ks, threads):
        st = word()
        kernels.compress(k, k, np.zeros((K, D), np.float32), iro,
                         np.array([0, 2, 2, 5, 5, 9], np.uint32), cache,
                         out=np.zeros((9, D), np.float32), validate=False,
                         status=st)
        assert int(st[0]) == code(1, 1)
        # A word already holding a smaller code keeps it.
        st[0] = code(0, 2)
        kernels.compress(k, k, np.zeros((K, D), np.float32), iro,
                         np.array([0, 2, 2, 5, 5, 9], np.uint32), cache,
                         out=np.zeros((9, D), np.float32), validate=False,
                         status=st)
        assert int(st[0]) == code(0, 2)


def test_bad_status_operand(ks):
    k = rows(4)
    for bad, what in ((np.zeros(1, np.uint32), "uint64"),
                      (np.zeros(0, np.uint64), "at least one")):
        with pytest.raises(kpool.KPoolError, match=what):
            ks.compress(k, k, np.zeros((K, D), np.float32),
                        np.array([0, 4], np.uint32), None,
                        np.zeros(1, np.uint32), status=bad)
    assert kpool.status_error(0) is None
    assert "holds no finding" in kpool.status_error(0x1ff)


def test_extent_finding_names_operand_and_dimension():
    """Finding 11 carries the operand (its id: the place of its name among
    the table's distinct operand names, first appearance first) and the
    dimension in place of a request."""
    from kpool import _capi
    ids = {}
    for kernel in _capi.kernels().values():
        for operand in kernel.operands:
            ids.setdefault(operand.name, len(ids))
    assert ids["pooled"] == 0 and ids["k"] == 1

    def extent(name, dim):
        return ((ids[name] << 4 | dim) << 8) | 11

    msg = kpool.status_error(extent("gate", 1))
    assert msg.startswith("'gate' dimension 1 contradicts"), msg
    assert "status word 0x" + format(extent("gate", 1), "x") in msg
    assert "'block_table' has the wrong rank" in kpool.status_error(
        extent("block_table", 15))
    assert "'tail' has elements but no data pointer" in kpool.status_error(
        extent("tail", 14))
    assert kpool.status_error((len(ids) << 4 | 0) << 8 | 11).startswith(
        f"operand {len(ids)} dimension 0")


def test_status_operand_edge_cases(ks):
    k = rows(4)
    args = (k, k, np.zeros((K, D), np.float32), np.array([0, 4], np.uint32),
            None, np.zeros(1, np.uint32))
    raw = np.zeros(3, np.uint64)
    misaligned = raw.view(np.uint8)[4:12].view(np.uint64)
    for bad, match in ((misaligned, "not 8-byte aligned"), (True, "positive"),
                       (0, "positive"),
                       (np.zeros(1, np.uint64)[:0], "at least one")):
        with pytest.raises(kpool.KPoolError, match=match):
            ks.compress(*args, status=bad)
    # An address works too; the word is element 0 of a longer array.
    st = np.zeros(4, np.uint64)
    ks.compress(k, k, np.zeros((K, D), np.float32), np.array([0, 2, 1],
                np.uint32), np.array([0, 1, 1], np.uint32),
                np.zeros(2, np.uint32), out=np.zeros((2, D), np.float32),
                validate=False, status=st.ctypes.data)
    assert int(st[0]) == code(1, 1) and not st[1:].any()
