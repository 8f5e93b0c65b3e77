"""Bad metadata raises KPoolError naming the request and the field, and
changes nothing: no output, no ring slot, no store."""

import os

import numpy as np
import pytest

import kpool
from conftest import assert_bits, random_inputs

D = 16
K = 4


@pytest.fixture
def call(rng):
    """A valid two-request call: (cache 2, 7 tokens) in slot 3 and (cache 0,
    5 tokens) in slot 1 of 4."""
    k, gate, ape = random_inputs(rng, 12, D, K, "bf16")
    tail_k, tail_g, _ = random_inputs(rng, 4 * K, D, K, "bf16")
    tail = np.stack([tail_k.reshape(4, K, D), tail_g.reshape(4, K, D)], 1)
    return dict(k=k, gate=gate, ape=ape, iro=[0, 7, 12], cache=[2, 0],
                slots=[3, 1], tail=tail)


def test_compress_overlong_rows(call):
    out = np.full((3, D), 0x7FC1, dtype=np.uint16)  # sentinel
    before = out.copy()
    with pytest.raises(kpool.KPoolError,
                       match=r"^compress: request 1: input_row_offsets\[2\] "
                             r"= 13 reaches past the 12 rows of 'k'$"):
        kpool.compress(call["k"], call["gate"], call["ape"], [0, 7, 13],
                       [0, 1, 3], call["cache"], out=out)
    assert_bits(out, before)


def test_compress_reversed_rows(call):
    with pytest.raises(kpool.KPoolError,
                       match=r"request 0: input_row_offsets\[1\] = 9 is "
                             r"below input_row_offsets\[0\] = 10 \(rows "
                             r"reversed\)"):
        kpool.compress(call["k"], call["gate"], call["ape"], [10, 9, 12],
                       None, call["cache"])


def test_compress_bad_pool_rows(call):
    out = np.full((3, D), 0x7FC1, dtype=np.uint16)
    before = out.copy()
    with pytest.raises(kpool.KPoolError,
                       match=r"request 0: pool_row_offsets\[1\] - "
                             r"pool_row_offsets\[0\] = 2, but the request "
                             r"completes 1 pool\(s\)"):
        kpool.compress(call["k"], call["gate"], call["ape"], call["iro"],
                       [0, 2, 3], call["cache"], out=out)
    # Too few pooled rows for the pools the requests complete.
    with pytest.raises(kpool.KPoolError,
                       match=r"pool_row_offsets\[2\] = 2 is past the 1 rows "
                             r"of 'pooled'"):
        kpool.compress(call["k"], call["gate"], call["ape"], call["iro"],
                       None, call["cache"], out=out[:1])
    assert_bits(out, before)


def test_seed_tail_bad_slot(call):
    tail = call["tail"].copy()
    with pytest.raises(kpool.KPoolError,
                       match=r"^seed_tail: request 1: slot_idx\[1\] = 4 is "
                             r"not below max_slots = 4$"):
        kpool.seed_tail(tail, call["k"], call["gate"], call["iro"],
                        call["cache"], [3, 4])
    with pytest.raises(kpool.KPoolError,
                       match=r"request 1: slot_idx\[1\] = 3 is also the slot "
                             r"of request 0"):
        kpool.seed_tail(tail, call["k"], call["gate"], call["iro"],
                        call["cache"], [3, 3])
    # No ring slot changed, not even request 0's.
    assert_bits(tail, call["tail"])


def test_ring_close_bad_metadata(call):
    pooled = np.full((2, D), 5, dtype=np.uint16)
    closed = np.full(2, 9, dtype=np.int32)
    with pytest.raises(kpool.KPoolError,
                       match=r"ring_close: num_requests = 3 is outside "
                             r"\[0, 2\]"):
        kpool.ring_close(call["tail"], call["k"], call["gate"], call["ape"],
                         call["iro"], call["cache"], call["slots"], 3,
                         pooled=pooled, closed_pool=closed)
    with pytest.raises(kpool.KPoolError,
                       match=r"ring_close: request 0: input_row_offsets\[1\]"
                             r" = 13 reaches past the 12 rows of 'k'"):
        kpool.ring_close(call["tail"], call["k"], call["gate"], call["ape"],
                         [0, 13, 13], call["cache"], call["slots"],
                         pooled=pooled, closed_pool=closed)
    assert (pooled == 5).all() and (closed == 9).all()


def test_shapes(call):
    with pytest.raises(kpool.KPoolError,
                       match=r"'ape' dimension 1 is 8, expected 16 "
                             r"\(head_dim\)"):
        ks = kpool.KernelSet("bf16", D, K)
        ks.compress(call["k"], call["gate"], call["ape"][:, :8], call["iro"],
                    None, call["cache"])
    with pytest.raises(kpool.KPoolError,
                       match=r"'input_row_offsets' dimension 0 is 2, "
                             r"expected 3 \(one more than cache_lengths\)"):
        kpool.compress(call["k"], call["gate"], call["ape"], [0, 12], None,
                       call["cache"])
    with pytest.raises(kpool.KPoolError,
                       match=r"'gate' dimension 0 is 11, expected 12 "
                             r"\(the rows of 'k'\)"):
        kpool.compress(call["k"], call["gate"][:11], call["ape"],
                       call["iro"], None, call["cache"])


def test_metadata_values(call):
    with pytest.raises(kpool.KPoolError,
                       match=r"compress: cache_lengths\[1\] = -1 is negative"):
        kpool.compress(call["k"], call["gate"], call["ape"], call["iro"],
                       None, np.array([2, -1], np.int32))
    with pytest.raises(kpool.KPoolError,
                       match=r"input_row_offsets\[2\] = 4294967296 is not an "
                             r"unsigned 32-bit value"):
        kpool.compress(call["k"], call["gate"], call["ape"],
                       [0, 7, 2**32], None, call["cache"])


def test_validate_false_leaves_it_to_the_guards(call):
    """With host validation off, the kernels' own guards still keep bad
    requests in their lane: an overlong request brings no tokens, an
    out-of-range slot touches no ring slot; the good request is computed as
    usual."""
    tail = call["tail"].copy()
    iro = [0, 7, 13]  # request 1 overlong
    kpool.seed_tail(tail, call["k"], call["gate"], iro, call["cache"], [3, 9],
                    validate=False)
    expected = kpool.reference.seed_tail(call["tail"].copy(), call["k"],
                                         call["gate"], iro, call["cache"],
                                         [3, 9])
    assert_bits(tail, expected)
    assert_bits(tail[:3], call["tail"][:3])  # only slot 3 (request 0) moved
    out = np.full((3, D), 0x7FC1, dtype=np.uint16)
    kpool.compress(call["k"], call["gate"], call["ape"], iro, [0, 1, 3],
                   call["cache"], out=out, validate=False)
    # Request 1 completes nothing: its rows keep the sentinel.
    assert (out[1:] == 0x7FC1).all()
    good = kpool.compress(call["k"], call["gate"], call["ape"], call["iro"],
                          None, call["cache"])
    assert_bits(out[0], good[0])


def test_store_step_error_changes_nothing(rng, call):
    """A failing step leaves tokens, pools and the ring as they were: the
    same later calls produce the same bits as in a store that never saw
    it."""
    k, gate, ape = call["k"], call["gate"], call["ape"]
    stores = [kpool.PoolStore(ape, 4, "bf16") for _ in range(2)]
    for store in stores:
        store.step(k[:5], gate[:5], [0, 3, 5], [3, 1])
    with pytest.raises(kpool.KPoolError,
                       match=r"request 1: slot_idx\[1\] = 7 is not below "
                             r"max_slots = 4"):
        stores[0].step(k[5:9], gate[5:9], [0, 2, 4], [3, 7])
    with pytest.raises(kpool.KPoolError,
                       match=r"request 1: input_row_offsets\[2\] = 5 "
                             r"reaches past the 4 rows of 'k'"):
        stores[0].step(k[5:9], gate[5:9], [0, 2, 5], [3, 1])
    with pytest.raises(kpool.KPoolError, match="'input_row_offsets' must "
                                               "have 3 entries"):
        stores[0].step(k[5:9], gate[5:9], [0, 4], [3, 1])
    assert stores[0].tokens(3) == 3 and stores[0].tokens(1) == 2
    results = [store.step(k[5:12], gate[5:12], [0, 3, 7], [3, 1])
               for store in stores]
    assert results[0] == results[1]
    for slot in (3, 1):
        assert_bits(stores[0].pools(slot), stores[1].pools(slot))
    with pytest.raises(kpool.KPoolError, match=r"slot 4 is not in \[0, "
                                               r"max_slots = 4\)"):
        stores[0].reset(4)


def test_cuda_target_without_kernels():
    # A configuration in no kernel pack, with the JIT off: an error that
    # says how to get it (in a process of its own: the JIT is on here).
    import subprocess
    import sys
    env = dict(os.environ, KPOOL_JIT_LIBRARY="", KPOOL_KERNEL_PACKS="")
    code = ("import kpool\n"
            "try:\n"
            f"    kpool.KernelSet('bf16', {D}, {K}, target='cuda')\n"
            "except kpool.KPoolError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.startswith(
        f"no kernels for bf16, head_dim {D}, kpool {K} on the CUDA target: "
        "none are registered (no kernel pack is loaded), and no compiler is "
        "available (the JIT is off (KPOOL_JIT_LIBRARY is set and empty)); "
        "build a kernel pack with `kpool-aot --pack --target=cuda "
        f"--config=bf16:{D}:{K} -o pack.o`"), out
    assert "kpool.load_kernel_pack" in out
    with pytest.raises(kpool.KPoolError,
                       match=r"^kernel set: target must be one of 'cpu', "
                             r"'cuda', got 'tpu'$"):
        kpool.kernel_set("bf16", D, K, target="tpu")
    assert kpool.kernel_set("bf16", D, K, target="cpu").target == "cpu"


def test_kernel_abi_table():
    from kpool import _capi
    table = _capi.kernels()
    assert list(table) == ["compress", "seed_tail", "ring_close",
                           "pool_offsets", "step", "compress_cache",
                           "ring_close_cache", "step_cache"]
    ring = table["ring_close"]
    assert ring.capi_function == "kpoolRingClose"
    assert [o.name for o in ring.operands if o.role == "output"] == [
        "pooled", "closed_pool"]
    scalar = ring.operands[-3]
    assert (scalar.name, scalar.role, scalar.rank, scalar.kind) == (
        "num_requests", "scalar", 0, "i32")
    # The *_cache kernels: their op's plain kernel plus the cache group.
    cache = table["ring_close_cache"]
    assert cache.base == "ring_close"
    assert [o.name for o in cache.operands] == (
        [o.name for o in ring.operands if o.role == "output"]
        + ["cache_keys", "cache_scales"]
        + [o.name for o in ring.operands if o.role in ("input", "scalar")]
        + ["block_table", "status", "stream"])
    # Every kernel ends with the per-call context: the status word, then
    # the caller's stream.
    for kernel in table.values():
        word = kernel.operands[-2]
        assert (word.name, word.role, word.rank, word.kind) == (
            "status", "context", 1, "u64")
        last = kernel.operands[-1]
        assert (last.name, last.role, last.rank, last.kind) == (
            "stream", "context", 0, "stream")
