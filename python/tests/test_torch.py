"""The ops on PyTorch CPU tensors, and the kpool.torch custom ops.

Skipped when torch is not installed (on Debian, ``apt-get install
python3-torch``; scripts/setup.sh installs it). The operands are torch
tensors of torch's own types (bf16 as torch.bfloat16, metadata int32 or
lists), the results torch tensors of the same types; every result is
compared bit for bit with the same call on numpy arrays. Between the two,
values move through float32 (exact for bf16, f16 and f32): torch's bf16 is
never reinterpreted as integers.
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
    """A torch tensor of element type `etype` (or of `a`'s own type) with
    the values of `a` (kpool's numpy storage: bf16 as uint16 patterns)."""
    if etype is None:
        return torch.from_numpy(np.ascontiguousarray(a))
    return torch.from_numpy(kpool.to_f32(a, etype)).to(TORCH_DTYPES[etype])


def to_numpy(t, etype=None):
    """A torch tensor's values in kpool's numpy storage of `etype` (bf16 as
    uint16 patterns; metadata and f16/f32 as they are)."""
    if etype is None:
        return t.numpy()
    return kpool.from_f32(t.float().numpy(), etype)


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
    twins = (to_torch(k, etype), to_torch(gate, etype), to_torch(ape),
             to_torch(iro), to_torch(cache),
             torch.tensor(SLOTS, dtype=torch.int32))
    return iro, cache, k, gate, ape, tail, twins


@pytest.mark.parametrize("etype", ETYPES)
def test_compress_and_pool_offsets(rng, etype):
    iro, cache = metadata()
    k, gate, ape = random_inputs(rng, int(iro[-1]), D, K, etype, signed=True)
    pro = kpool.pool_offsets(iro, cache, K)
    expected = kpool.compress(k, gate, ape, iro, pro, cache)

    t_pro = torch.full((len(cache) + 1,), -1, dtype=torch.int32)
    got = kpool.pool_offsets(to_torch(iro.astype(np.int64)), to_torch(cache),
                             K, out=t_pro)
    assert t_pro.tolist() == pro.tolist()
    assert got is t_pro                          # the caller's tensor
    out = zeros(expected.shape, etype)
    got = kpool.compress(to_torch(k, etype), to_torch(gate, etype),
                         to_torch(ape), to_torch(iro), t_pro,
                         to_torch(cache), out=out)
    assert_bits(to_numpy(out, etype), expected)  # written in place
    assert got is out
    # Allocated outputs are torch tensors of the keys' type;
    # pool_row_offsets computed.
    got = kpool.compress(to_torch(k, etype), to_torch(gate, etype),
                         to_torch(ape), iro.tolist(), None, to_torch(cache))
    assert isinstance(got, torch.Tensor) and got.dtype == TORCH_DTYPES[etype]
    assert_bits(to_numpy(got, etype), expected)
    allocated = kpool.pool_offsets(to_torch(iro), to_torch(cache), K)
    assert allocated.dtype == torch.int32
    assert allocated.tolist() == pro.tolist()


@pytest.mark.parametrize("etype", ETYPES)
def test_ring_close_seed_tail_step(rng, etype):
    iro, cache, k, gate, ape, tail, twins = step_case(rng, etype)
    ks = kpool.kernel_set(TORCH_DTYPES[etype], D, K)   # a framework dtype
    tk, tg, ta, t_iro, t_cache, t_slots = twins

    pooled, closed = kpool.ring_close(tail, k, gate, ape, iro, cache, SLOTS)
    t_pooled, t_closed = zeros(pooled.shape, etype), torch.zeros(
        len(cache), dtype=torch.int32)
    kpool.ring_close(to_torch(tail, etype), tk, tg, ta, t_iro, t_cache,
                     t_slots, pooled=t_pooled, closed_pool=t_closed)
    assert_bits(to_numpy(t_pooled, etype), pooled)
    assert t_closed.tolist() == closed.tolist()

    seeded = kpool.seed_tail(tail.copy(), k, gate, iro, cache, SLOTS)
    t_tail = to_torch(tail, etype)
    assert kpool.seed_tail(t_tail, tk, tg, t_iro, t_cache, t_slots) is t_tail
    assert_bits(to_numpy(t_tail, etype), seeded)

    fused = tail.copy()
    expected = ks.step(fused, k, gate, ape, iro, cache, SLOTS)
    t_tail = to_torch(tail, etype)
    outs = dict(closed=zeros((len(cache), D), etype),
                closed_pool=torch.zeros(len(cache), dtype=torch.int32),
                pool_row_offsets=torch.zeros(len(cache) + 1,
                                             dtype=torch.int32),
                pooled=zeros(expected[3].shape, etype))
    got = ks.step(t_tail, tk, tg, ta, t_iro, t_cache, t_slots, **outs)
    assert_bits(to_numpy(t_tail, etype), fused)
    for name, want, have in zip(outs, expected, got):
        assert have is outs[name], name
        is_rows = have.dtype == TORCH_DTYPES[etype]
        assert_bits(to_numpy(have, etype if is_rows else None)
                    .view(want.dtype), want)
    # The module-level step allocates torch outputs (kpool.step).
    t_tail = to_torch(tail, etype)
    got = kpool.step(t_tail, tk, tg, ta, t_iro, t_cache, t_slots)
    assert [g.dtype for g in got] == [TORCH_DTYPES[etype], torch.int32,
                                      torch.int32, TORCH_DTYPES[etype]]
    assert_bits(to_numpy(got[3], etype), expected[3])
    assert_bits(to_numpy(t_tail, etype), fused)


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
    ape_view = to_torch(ape).t().contiguous().t()
    out_big = torch.zeros(2 * len(dense_pooled), D + 3, dtype=torch.bfloat16)
    out_view = out_big[::2, 1:D + 1]
    assert not (k_view.is_contiguous() or gate_view.is_contiguous()
                or out_view.is_contiguous())
    iro_big = torch.zeros(2 * len(iro), dtype=torch.int32)
    iro_big[::2] = to_torch(iro)
    kpool.compress(k_view, gate_view, ape_view, iro_big[::2], None,
                   to_torch(cache), pooled=out_view)
    assert_bits(to_numpy(out_view, etype), dense_pooled)
    assert not out_big[1::2].any() and not out_big[:, 0].any()

    pages = torch.zeros(8, 2 * K * D + 40, dtype=torch.bfloat16)
    ring_view = pages[:, :2 * K * D].view(8, 2, K, D)
    ring_view.copy_(to_torch(tail, etype))
    pooled, closed = kpool.ring_close(ring_view, k_view, gate_view, ape_view,
                                      to_torch(iro), to_torch(cache), SLOTS)
    assert pooled.dtype == torch.bfloat16
    assert_bits(to_numpy(pooled, etype), dense_ring[0])
    assert closed.tolist() == dense_ring[1].tolist()
    kpool.seed_tail(ring_view, k_view, gate_view, to_torch(iro),
                    to_torch(cache), SLOTS)
    assert_bits(to_numpy(ring_view, etype), dense_tail)
    assert not pages[:, 2 * K * D:].any()   # padding never written


def test_pool_store_loop(rng):
    """A PoolStore fed torch tensors (chunked prefill then decode, two
    slots) holds the pools of a store fed the same numpy arrays."""
    etype = "f16"
    k, gate, ape = random_inputs(rng, 40, D, K, etype, signed=True)
    calls = [([0, 7, 10], [3, 0]), ([0, 1, 2], [3, 0]), ([0, 6, 11], [3, 0]),
             ([0, 1], [0])]
    with kpool.PoolStore(ape, max_slots=4, dtype=etype) as a, \
            kpool.PoolStore(to_torch(ape), max_slots=4,
                            dtype=torch.float16) as b:
        row = 0
        for iro, slots in calls:
            rows = slice(row, row + iro[-1])
            row += iro[-1]
            want = a.step(k[rows], gate[rows], iro, slots)
            got = b.step(to_torch(k[rows], etype), to_torch(gate[rows], etype),
                         torch.tensor(iro), torch.tensor(slots))
            assert got == want
        for slot in (3, 0):
            assert b.tokens(slot) == a.tokens(slot)
            assert_bits(b.pools(slot), a.pools(slot))
        # Each request's rows as separate tensors.
        a.step_requests([(3, k[:2], gate[:2])])
        b.step_requests([(3, to_torch(k[:2], etype),
                          to_torch(gate[:2], etype))])
        assert_bits(b.pools(3), a.pools(3))


def test_bf16_tensor_views_are_not_copies():
    t = torch.arange(12, dtype=torch.float32).view(3, 4).to(torch.bfloat16)
    a = kpool.interop.host_array("op", "x", t[:, 1::2])
    assert a.dtype == np.uint16 and a.shape == (3, 2)
    assert a.ctypes.data == t.data_ptr() + 2 and a.strides == (8, 4)
    assert_bits(a, kpool.f32_to_bf16(np.arange(12, dtype=np.float32)
                                     .reshape(3, 4)[:, 1::2]))
    a[0, 0] = kpool.f32_to_bf16(np.float32(-2.0))
    assert t[0, 1].item() == -2.0


def test_framework_errors_name_the_operand():
    """A tensor that requires grad, or a meta tensor, gets kpool's message
    naming the operand, not the framework's."""
    ape = torch.zeros(K, D)
    k = torch.zeros(8, D, requires_grad=True)
    with pytest.raises(kpool.KPoolError,
                       match=r"compress: 'k' requires grad; kpool's ops are "
                             r"not differentiable: pass k.detach\(\)"):
        kpool.compress(k, k.detach(), ape, [0, 8], None, [0])
    meta = torch.zeros(8, D, device="meta")
    with pytest.raises(kpool.KPoolError,
                       match=r"compress: 'gate' is a meta tensor"):
        kpool.compress(torch.zeros(8, D), meta, ape, [0, 8], None, [0])


def test_types_as_torch_spells_them():
    """Element types by torch's names; wrong dtypes named as torch names
    them."""
    ks = kpool.KernelSet(torch.bfloat16, D, K)
    assert ks.element_type == "bf16" and kpool.KernelSet("bfloat16", D,
                                                         K).kpool == K
    k = torch.zeros(8, D, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"compress: 'gate' must have dtype "
                                        r"torch.bfloat16, got torch.float32"):
        ks.compress(k, torch.zeros(8, D), torch.zeros(K, D), [0, 8], None,
                    [0])
    with pytest.raises(TypeError, match=r"'ape' must have dtype "
                                        r"torch.float32, got torch.float64"):
        ks.compress(k, k, torch.zeros(K, D, dtype=torch.float64), [0, 8],
                    None, [0])
    with pytest.raises(TypeError, match="not an element type"):
        kpool.KernelSet(torch.int8, D, K)


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
    assert written("step_cache") == {"tail", "cache_keys", "cache_scales"}


def test_custom_ops_use_the_module_functions_names():
    """The ops' schemas: the module functions' operands, names and order."""
    import inspect
    for op in ("compress", "seed_tail", "ring_close", "step"):
        schema = getattr(torch.ops.kpool, op).default._schema
        names = [a.name for a in schema.arguments]
        params = list(inspect.signature(getattr(kpool, op)).parameters)
        assert names == params[:len(names)] or names == [
            n for n in params if n in names], (op, names, params)


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
    assert ops.compress(tk, tg, ta, t_iro, t_pro, t_cache,
                        pooled=capacity) is capacity
    assert_bits(to_numpy(capacity[:len(expected)], etype), expected)
    assert not capacity[len(expected):].any()

    pooled, closed = kpool.ring_close(tail, k, gate, ape, iro, cache, SLOTS)
    t_pooled, t_closed = ops.ring_close(to_torch(tail, etype), tk, tg, ta,
                                        t_iro, t_cache, t_slots)
    assert_bits(to_numpy(t_pooled, etype), pooled)
    assert t_closed.dtype == torch.int32
    assert t_closed.tolist() == closed.tolist()
    _, two = ops.ring_close(to_torch(tail, etype), tk, tg, ta, t_iro, t_cache,
                            t_slots, 2)
    assert two.tolist()[2:] == [-1] * (len(cache) - 2)
    # Lists, as the module functions take them.
    _, listed = ops.ring_close(to_torch(tail, etype), tk, tg, ta,
                               iro.tolist(), cache.tolist(), SLOTS)
    assert listed.tolist() == closed.tolist()

    seeded = kpool.seed_tail(tail.copy(), k, gate, iro, cache, SLOTS)
    t_tail = to_torch(tail, etype)
    ops.seed_tail(t_tail, tk, tg, t_iro, t_cache, t_slots)
    assert_bits(to_numpy(t_tail, etype), seeded)

    fused = tail.copy()
    want = ks.step(fused, k, gate, ape, iro, cache, SLOTS)
    t_tail = to_torch(tail, etype)
    got = ops.step(t_tail, tk, tg, ta, t_iro, t_cache, t_slots)
    assert_bits(to_numpy(t_tail, etype), fused)
    assert [g.dtype for g in got] == [TORCH_DTYPES[etype], torch.int32,
                                      torch.int32, TORCH_DTYPES[etype]]
    for w, g in zip(want, got):
        rows = g.dtype == TORCH_DTYPES[etype]
        assert_bits(to_numpy(g, etype if rows else None).view(w.dtype), w)


def test_custom_cache_op_matches_the_kernel_set(rng):
    """torch.ops.kpool.step_cache: the step with the FP8 pool cache, as
    KernelSet.step with the cache group."""
    etype = "bf16"
    iro = np.array([0, 13, 24, 26], np.int32)
    cache = np.array([0, 6, 3], np.int32)
    slots = [4, 0, 6]
    k, gate, ape = random_inputs(rng, 26, D, K, etype, signed=True)
    tail = ring(rng, etype)
    table = np.arange(24, dtype=np.int32).reshape(3, 8)[::-1].copy()
    table[:, 6:] = -1
    keys = np.zeros((24, 4, D), np.uint8)
    scales = np.zeros((24, 4), np.float32)
    ks = kpool.kernel_set(etype, D, K, cache="fp8", rotate="hadamard")
    fused = tail.copy()
    ks.step(fused, k, gate, ape, iro, cache, slots, block_table=table,
            cache_keys=keys, cache_scales=scales)
    t_keys, t_scales = to_torch(np.zeros_like(keys)), to_torch(
        np.zeros_like(scales))
    t_tail = to_torch(tail, etype)
    torch.ops.kpool.step_cache(
        t_tail, to_torch(k, etype), to_torch(gate, etype), to_torch(ape),
        to_torch(iro), to_torch(cache), slots, block_table=to_torch(table),
        cache_keys=t_keys, cache_scales=t_scales, rotate="hadamard")
    assert keys.any()
    assert_bits(to_numpy(t_keys), keys)
    assert_bits(to_numpy(t_scales), scales)
    assert_bits(to_numpy(t_tail, etype), fused)


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
    given = torch.empty(7, D, dtype=e, device="meta")
    assert ops.compress(o["k"], o["gate"], o["ape"], o["iro"], o["iro"],
                        o["cache"], pooled=given) is given
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
