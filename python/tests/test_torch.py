"""The ops on PyTorch CPU tensors, and the kpool.torch custom ops.

Skipped when torch is not installed (CI does not install it; on Debian,
``apt-get install python3-torch``). Every result is compared bit for bit
with the same call on numpy arrays.
"""

import numpy as np
import pytest

import kpool
from conftest import ETYPES, assert_bits, random_inputs

torch = pytest.importorskip("torch")
import kpool.torch  # noqa: E402  (registers torch.ops.kpool.*)

D = 32
K = 4
BATCH = [(0, 13), (6, 11), (9, 0), (5, 2), (70001, 9)]
SLOTS = [4, 0, 6, 2, 7]
TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16,
                "f32": torch.float32}


def metadata():
    iro = np.concatenate([[0], np.cumsum([n for _, n in BATCH])])
    # int32: torch 1.13 has no uint32 (the ops take both).
    return iro.astype(np.int32), np.array([c for c, _ in BATCH], np.int32)


def to_torch(a, etype=None):
    """A torch tensor sharing `a`'s memory; uint16 bf16 bit patterns become
    a torch.bfloat16 tensor."""
    if etype == "bf16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def bits(t):
    """A tensor's elements as numpy (bf16 as uint16 bit patterns)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def zeros(shape, etype):
    return torch.zeros(shape, dtype=TORCH_DTYPES[etype])


def ring(rng, etype, slots=8):
    tail_k, tail_g, _ = random_inputs(rng, slots * K, D, K, etype)
    return np.stack([tail_k.reshape(slots, K, D), tail_g.reshape(slots, K, D)],
                    1)


def step_case(rng, etype):
    """A ragged step's numpy operands and ring, and their torch twins
    (k, gate, ape, input_row_offsets, cache_lengths, slot_idx)."""
    iro, cache = metadata()
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, etype, signed=True)
    tail = ring(rng, etype)
    twins = (to_torch(k, etype), to_torch(gate, etype), torch.from_numpy(ape),
             torch.from_numpy(iro), torch.from_numpy(cache),
             torch.tensor(SLOTS, dtype=torch.int32))
    return iro, cache, k, gate, ape, tail, twins


@pytest.mark.parametrize("etype", ETYPES)
def test_compress_and_pool_offsets(rng, etype):
    iro, cache = metadata()
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, etype, signed=True)
    pro = kpool.pool_offsets(iro, cache, K)
    expected = kpool.compress(k, gate, ape, iro, pro, cache)

    t_pro = torch.full((len(cache) + 1,), -1, dtype=torch.int32)
    got = kpool.pool_offsets(torch.from_numpy(iro.astype(np.int64)),
                             torch.from_numpy(cache), K, out=t_pro)
    assert t_pro.tolist() == pro.tolist()
    assert got.ctypes.data == t_pro.data_ptr()   # an alias, not a copy
    out = zeros(expected.shape, etype)
    got = kpool.compress(to_torch(k, etype), to_torch(gate, etype),
                         torch.from_numpy(ape), torch.from_numpy(iro),
                         t_pro, torch.from_numpy(cache), out=out)
    assert_bits(bits(out), expected)             # written in place
    assert got.ctypes.data == out.data_ptr()
    # Allocated outputs are numpy arrays; pool_row_offsets computed.
    assert_bits(kpool.compress(to_torch(k, etype), to_torch(gate, etype),
                               torch.from_numpy(ape), iro.tolist(), None,
                               torch.from_numpy(cache)), expected)


@pytest.mark.parametrize("etype", ETYPES)
def test_ring_close_seed_tail_step(rng, etype):
    iro, cache, k, gate, ape, tail, twins = step_case(rng, etype)
    ks = kpool.kernel_set(etype, D, K)
    tk, tg, ta, t_iro, t_cache, t_slots = twins

    pooled, closed = kpool.ring_close(tail, k, gate, ape, iro, cache, SLOTS)
    t_pooled, t_closed = zeros(pooled.shape, etype), torch.zeros(
        len(cache), dtype=torch.int32)
    kpool.ring_close(to_torch(tail.copy(), etype), tk, tg, ta, t_iro, t_cache,
                     t_slots, pooled=t_pooled, closed_pool=t_closed)
    assert_bits(bits(t_pooled), pooled)
    assert t_closed.tolist() == closed.tolist()

    seeded = kpool.seed_tail(tail.copy(), k, gate, iro, cache, SLOTS)
    t_tail = to_torch(tail.copy(), etype)
    kpool.seed_tail(t_tail, tk, tg, t_iro, t_cache, t_slots)
    assert_bits(bits(t_tail), seeded)

    fused = tail.copy()
    expected = ks.step(fused, k, gate, ape, iro, cache, SLOTS)
    t_tail = to_torch(tail.copy(), etype)
    outs = dict(closed=zeros((len(cache), D), etype),
                closed_pool=torch.zeros(len(cache), dtype=torch.int32),
                pool_row_offsets=torch.zeros(len(cache) + 1,
                                             dtype=torch.int32),
                pooled=zeros(expected[3].shape, etype))
    got = ks.step(t_tail, tk, tg, ta, t_iro, t_cache, t_slots, **outs)
    assert_bits(bits(t_tail), fused)
    for name, want, have in zip(outs, expected, got):
        assert have.ctypes.data == outs[name].data_ptr(), name
        assert_bits(bits(outs[name]).view(want.dtype), want)


def test_strided_views(rng):
    """Non-contiguous torch views (every other column, column-major,
    transposed storage, rows of a larger tensor, a ring aliased into
    padded pages) give the same bits as dense numpy arrays."""
    etype = "bf16"
    iro, cache = metadata()
    t = int(iro[-1])
    k, gate, ape = random_inputs(rng, t, D, K, etype, signed=True)
    tail = ring(rng, etype)
    dense_pooled = kpool.compress(k, gate, ape, iro, None, cache)
    dense_ring = kpool.ring_close(tail, k, gate, ape, iro, cache, SLOTS)
    dense_tail = kpool.seed_tail(tail.copy(), k, gate, iro, cache, SLOTS)

    wide = torch.zeros(t, 2 * D, dtype=torch.bfloat16)
    wide[:, ::2] = to_torch(k, etype)
    k_view = wide[:, ::2]
    gate_view = to_torch(gate, etype).t().contiguous().t()
    ape_view = torch.from_numpy(ape).t().contiguous().t()
    out_big = torch.zeros(2 * len(dense_pooled), D + 3, dtype=torch.bfloat16)
    out_view = out_big[::2, 1:D + 1]
    assert not (k_view.is_contiguous() or gate_view.is_contiguous()
                or out_view.is_contiguous())
    iro_big = torch.zeros(2 * len(iro), dtype=torch.int32)
    iro_big[::2] = torch.from_numpy(iro)
    kpool.compress(k_view, gate_view, ape_view, iro_big[::2], None,
                   torch.from_numpy(cache), out=out_view)
    assert_bits(bits(out_view), dense_pooled)
    assert not bits(out_big[1::2]).any() and not bits(out_big[:, 0]).any()

    pages = torch.zeros(8, 2 * K * D + 40, dtype=torch.bfloat16)
    ring_view = pages[:, :2 * K * D].view(8, 2, K, D)
    ring_view.copy_(to_torch(tail, etype))
    pooled, closed = kpool.ring_close(ring_view, k_view, gate_view, ape_view,
                                      torch.from_numpy(iro),
                                      torch.from_numpy(cache), SLOTS)
    assert_bits(pooled, dense_ring[0])
    assert closed.tolist() == dense_ring[1].tolist()
    kpool.seed_tail(ring_view, k_view, gate_view, torch.from_numpy(iro),
                    torch.from_numpy(cache), SLOTS)
    assert_bits(bits(ring_view), dense_tail)
    assert not bits(pages[:, 2 * K * D:]).any()   # padding never written


def test_pool_store_loop(rng):
    """A PoolStore fed torch tensors (chunked prefill then decode, two
    slots) holds the pools of a store fed the same numpy arrays."""
    etype = "f16"
    k, gate, ape = random_inputs(rng, 40, D, K, etype, signed=True)
    calls = [([0, 7, 10], [3, 0]), ([0, 1, 2], [3, 0]), ([0, 6, 11], [3, 0]),
             ([0, 1], [0])]
    with kpool.PoolStore(ape, max_slots=4, dtype=etype) as a, \
            kpool.PoolStore(torch.from_numpy(ape), max_slots=4,
                            dtype=etype) as b:
        row = 0
        for iro, slots in calls:
            rows = slice(row, row + iro[-1])
            row += iro[-1]
            want = a.step(k[rows], gate[rows], iro, slots)
            got = b.step(to_torch(k[rows]), to_torch(gate[rows]),
                         torch.tensor(iro), torch.tensor(slots))
            assert got == want
        for slot in (3, 0):
            assert b.tokens(slot) == a.tokens(slot)
            assert_bits(b.pools(slot), a.pools(slot))
        # Each request's rows as separate tensors.
        a.step_requests([(3, k[:2], gate[:2])])
        b.step_requests([(3, to_torch(k[:2]), to_torch(gate[:2]))])
        assert_bits(b.pools(3), a.pools(3))


def test_bf16_tensor_views_are_not_copies():
    t = torch.arange(12, dtype=torch.float32).view(3, 4).to(torch.bfloat16)
    a = kpool.runtime._host_array("op", t[:, 1::2])
    assert a.dtype == np.uint16 and a.shape == (3, 2)
    assert a.ctypes.data == t.data_ptr() + 2 and a.strides == (8, 4)
    assert_bits(a, kpool.f32_to_bf16(np.arange(12, dtype=np.float32)
                                     .reshape(3, 4)[:, 1::2]))
    a[0, 0] = kpool.f32_to_bf16(np.float32(-2.0))
    assert t[0, 1].item() == -2.0


def test_tensors_that_need_a_grad_are_refused():
    k = torch.zeros(8, D, requires_grad=True)
    with pytest.raises(RuntimeError, match="require"):
        kpool.compress(k, k, np.zeros((K, D), np.float32), [0, 8], None, [0])


# --- kpool.torch: the custom ops --------------------------------------------

def test_custom_ops_alias_annotations():
    def written(op):
        schema = getattr(torch.ops.kpool, op).default._schema
        return {a.name for a in schema.arguments
                if a.alias_info is not None and a.alias_info.is_write}
    assert written("compress") == {"pooled"}
    assert written("seed_tail") == {"tail"}
    assert written("step") == {"tail"}
    assert written("ring_close") == set()
    assert written("pool_offsets") == set()


@pytest.mark.parametrize("etype", ETYPES)
def test_custom_ops_match_the_numpy_api(rng, etype):
    iro, cache, k, gate, ape, tail, twins = step_case(rng, etype)
    ks = kpool.kernel_set(etype, D, K)
    tk, tg, ta, t_iro, t_cache, t_slots = twins
    ops = torch.ops.kpool

    pro = kpool.pool_offsets(iro, cache, K)
    t_pro = ops.pool_offsets(t_iro, t_cache, K)
    assert t_pro.dtype == torch.int32 and t_pro.tolist() == pro.tolist()

    expected = kpool.compress(k, gate, ape, iro, pro, cache)
    capacity = zeros((len(expected) + 3, D), etype)
    assert ops.compress(tk, tg, ta, t_iro, t_pro, t_cache, capacity) is None
    assert_bits(bits(capacity[:len(expected)]), expected)
    assert not bits(capacity[len(expected):]).any()

    pooled, closed = kpool.ring_close(tail, k, gate, ape, iro, cache, SLOTS)
    t_pooled, t_closed = ops.ring_close(to_torch(tail, etype), tk, tg, ta,
                                        t_iro, t_cache, t_slots)
    assert_bits(bits(t_pooled), pooled)
    assert t_closed.dtype == torch.int32
    assert t_closed.tolist() == closed.tolist()
    _, two = ops.ring_close(to_torch(tail, etype), tk, tg, ta, t_iro, t_cache,
                            t_slots, 2)
    assert two.tolist()[2:] == [-1] * (len(cache) - 2)

    seeded = kpool.seed_tail(tail.copy(), k, gate, iro, cache, SLOTS)
    t_tail = to_torch(tail.copy(), etype)
    ops.seed_tail(t_tail, tk, tg, t_iro, t_cache, t_slots)
    assert_bits(bits(t_tail), seeded)

    fused = tail.copy()
    want = ks.step(fused, k, gate, ape, iro, cache, SLOTS)
    t_tail = to_torch(tail.copy(), etype)
    got = ops.step(t_tail, tk, tg, ta, t_iro, t_cache, t_slots)
    assert_bits(bits(t_tail), fused)
    assert [g.dtype for g in got] == [TORCH_DTYPES[etype], torch.int32,
                                      torch.int32, TORCH_DTYPES[etype]]
    for w, g in zip(want, got):
        assert_bits(bits(g).view(w.dtype), w)


def _meta_operands(etype, tokens=14, batch=3, slots=8):
    m = (lambda *shape, dtype=torch.int32:
         torch.empty(shape, dtype=dtype, device="meta"))
    e = TORCH_DTYPES[etype]
    return dict(tail=m(slots, 2, K, D, dtype=e), k=m(tokens, D, dtype=e),
                gate=m(tokens, D, dtype=e), ape=m(K, D, dtype=torch.float32),
                iro=m(batch + 1), cache=m(batch), slots=m(batch))


@pytest.mark.parametrize("etype", ETYPES)
def test_custom_ops_on_meta_tensors(etype):
    """Meta tensors: outputs of the right shapes and dtypes, nothing
    computed (their sizes never depend on metadata values)."""
    o = _meta_operands(etype)
    e = TORCH_DTYPES[etype]
    ops = torch.ops.kpool
    got = ops.step(o["tail"], o["k"], o["gate"], o["ape"], o["iro"],
                   o["cache"], o["slots"])
    assert [(tuple(g.shape), g.dtype, g.device.type) for g in got] == [
        ((3, D), e, "meta"), ((3,), torch.int32, "meta"),
        ((4,), torch.int32, "meta"), ((14 // K + 3, D), e, "meta")]
    pooled, closed = ops.ring_close(o["tail"], o["k"], o["gate"], o["ape"],
                                    o["iro"], o["cache"], o["slots"])
    assert (tuple(pooled.shape), pooled.dtype) == ((3, D), e)
    assert (tuple(closed.shape), closed.dtype) == ((3,), torch.int32)
    assert tuple(ops.pool_offsets(o["iro"], o["cache"], K).shape) == (4,)
    assert ops.compress(o["k"], o["gate"], o["ape"], o["iro"], o["iro"],
                        o["cache"], torch.empty(7, D, dtype=e,
                                                device="meta")) is None
    ops.seed_tail(o["tail"], o["k"], o["gate"], o["iro"], o["cache"],
                  o["slots"])


def test_custom_ops_trace_with_fake_tensors():
    """FakeTensorMode (what torch.compile traces with) and make_fx run the
    Meta implementations: a graph of kpool.step, nothing computed."""
    subclasses = pytest.importorskip("torch._subclasses")
    proxy = pytest.importorskip("torch.fx.experimental.proxy_tensor")
    with subclasses.FakeTensorMode():
        e = torch.bfloat16
        closed, _, pro, pooled = torch.ops.kpool.step(
            torch.empty(8, 2, K, D, dtype=e), torch.empty(9, D, dtype=e),
            torch.empty(9, D, dtype=e), torch.empty(K, D),
            torch.empty(3, dtype=torch.int32),
            torch.empty(2, dtype=torch.int32),
            torch.empty(2, dtype=torch.int32))
        assert tuple(pooled.shape) == (9 // K + 2, D)
        assert tuple(pro.shape) == (3,) and tuple(closed.shape) == (2, D)

    def decode(tail, k, gate, ape, iro, cache, slots):
        return torch.ops.kpool.step(tail, k, gate, ape, iro, cache, slots)[3]

    o = {n: torch.zeros(v.shape, dtype=v.dtype)
         for n, v in _meta_operands("f32").items()}
    graph = proxy.make_fx(decode, tracing_mode="fake")(
        o["tail"], o["k"], o["gate"], o["ape"], o["iro"], o["cache"],
        o["slots"])
    assert "kpool.step" in graph.code
