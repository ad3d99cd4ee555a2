"""The public calls end to end on the CPU, with the launch recorded instead of made: cukiln.rope, rope_qk and
decode_attention (and the torch wrappers' eager path) must hand the kernel exactly the parameter values that
plan_call plans for the same arguments, with this call's pointers, on a plan-cache miss and on a hit. This is
the plumbing the GPU tests exercise too, checked where CI can run it: every argument passed positionally on the
hot path reaches the planner in its place."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import calls, decode_api, decode_step_api, kv_append_api, loader, overrides, rope_api, tensors  # noqa: E402
from cukiln.tensors import TensorInfo  # noqa: E402


class _Recorder:
    """Stands in for launch.kernel: each bound kernel records the values it is called with."""

    def __init__(self):
        self.launches = []

    def __call__(self, device, module, symbol, fmt, grid, block, *rest):
        def launch(values, stream):
            self.launches.append((symbol, tuple(values)))

        launch.symbol = symbol
        return launch


def stub_device(setattr, kernel) -> None:
    """CPU tensors taken as device 0's, an sm_90 of 132 multiprocessors, ``kernel`` in place of launch.kernel, fresh
    plan caches; ``setattr`` does the patching (monkeypatch.setattr in tests; a simulation of the call path passed
    the builtin)."""
    real = tensors.from_torch

    def from_torch(t, name, accepts=tuple(tensors.ITEMSIZE), *, cuda=True):
        info = real(t, name, accepts, cuda=False)
        return TensorInfo(info.ptr, info.shape, info.strides, info.dtype, 0)

    fake_torch = types.SimpleNamespace(**{n: getattr(torch, n) for n in dir(torch) if not n.startswith("__")})
    fake_torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0,
                                          _increment_version=torch._C._increment_version)
    setattr(calls, "from_torch", from_torch)
    setattr(calls, "_torch", fake_torch)
    setattr(calls, "kernel", kernel)
    setattr(rope_api, "from_torch", from_torch)
    # a ws plan's tensor maps: each 128 bytes of the cache's pointer, encoded without a driver
    setattr(decode_api, "tensor_map", lambda dtype, ptr, *rest, **kw: ptr.to_bytes(8, "little") * 16)
    for name, value in (("arch", lambda d: "sm_90"), ("tuning_target", lambda d: "sm_90-h100-80gb-hbm3"),
                        ("sm_count", lambda d: 132),
                        ("max_shared_per_block", lambda d: 227 * 1024), ("resident_blocks", lambda *a: 2),
                        ("active_clusters", lambda *a: 1)):
        setattr(loader.KERNELS, name, value)
    for runtime in calls.RUNTIMES.values():
        setattr(runtime, "plans", type(runtime.plans)())


@pytest.fixture
def recorded(monkeypatch):
    """The device stubbed (stub_device), launches recorded."""
    recorder = _Recorder()
    stub_device(monkeypatch.setattr, recorder)
    return recorder


def _fields(plan, values) -> dict:
    return dict(zip(plan.field_names, values))


def test_rope_hands_the_kernel_the_planned_values_on_a_miss_and_a_hit(recorded, monkeypatch):
    kw = dict(base=10000.0, mscale=1.25, rotary_dim=64, rotary_offset=32, layout="bshd")
    kept = []
    put = rope_api.RUNTIME.plans.put
    monkeypatch.setattr(rope_api.RUNTIME.plans, "put", lambda key, value: (kept.append(key), put(key, value)))
    for _ in range(2):  # a miss, then a hit with other tensors of the same metadata
        x = torch.randn(2, 5, 4, 128, dtype=torch.bfloat16)
        out = torch.empty_like(x)
        cukiln.rope(x, out=out, **kw)
        plan, _ = rope_api.plan_call(x, out=out, **kw)
        symbol, values = recorded.launches[-1]
        assert symbol == plan.symbol and values == plan.values
        fields = _fields(plan, values)
        assert fields["mscale"] == 1.25 and fields["rotary_offset"] == 32
        assert fields["x"] == x.data_ptr() + 32 * 2 and fields["out"] == out.data_ptr() + 32 * 2
    assert len(recorded.launches) == 2
    assert len(kept) == 1, "the second call hit the plan the first kept"


def test_rope_qk_one_launch_with_the_cache_halves_and_k(recorded):
    qkv = torch.randn(16, 48 * 128, dtype=torch.bfloat16)
    q, k = qkv[:, :4096].view(16, 32, 128), qkv[:, 4096:5120].view(16, 8, 128)
    cache = torch.randn(4096, 128)
    kw = dict(cos_sin_cache=cache, positions=torch.arange(16), layout="thd", mscale=0.5)
    for _ in range(2):
        got = cukiln.rope_qk(q, k, inplace=True, **kw)
        assert got[0] is q and got[1] is k
        plan, _ = rope_api.plan_call(q, k=k, inplace=True, **kw)
        symbol, values = recorded.launches[-1]
        assert symbol == plan.symbol and symbol.endswith("_qk") and values == plan.values
        fields = _fields(plan, values)
        assert (fields["k"], fields["k_out"]) == (k.data_ptr(), k.data_ptr())
        assert (fields["cos"], fields["sin"]) == (cache.data_ptr(), cache.data_ptr() + 64 * 4)
        assert fields["mscale"] == 0.5 and (fields["heads"], fields["heads_k"]) == (32, 8)
    assert len(recorded.launches) == 2


def test_rope_qk_of_packed_sequences_launches_q_then_k(recorded):
    q, k = torch.randn(30, 4, 64, dtype=torch.float16), torch.randn(30, 2, 64, dtype=torch.float16)
    cu = torch.tensor([0, 10, 30], dtype=torch.int32)
    q_out, k_out = cukiln.rope_qk(q, k, base=500000.0, layout="thd", cu_seqlens=cu, max_seqlen=20)
    (q_symbol, q_values), (k_symbol, k_values) = recorded.launches
    assert not q_symbol.endswith("_qk") and not k_symbol.endswith("_qk")
    plan, _ = rope_api.plan_call(q, k=k, base=500000.0, layout="thd", cu_seqlens=cu, max_seqlen=20)
    assert _fields(plan, q_values)["x"] == q.data_ptr() and _fields(plan, q_values)["out"] == q_out.data_ptr()
    assert _fields(plan.then, k_values)["x"] == k.data_ptr() and _fields(plan.then, k_values)["out"] == k_out.data_ptr()


def test_the_torch_wrappers_eager_path_reaches_the_same_kernel_values(recorded):
    import cukiln.torch as ct

    x = torch.randn(6, 2, 4, 64, dtype=torch.float16)
    kw = dict(inv_freq=torch.rand(32), rope_scale=0.5, mscale=2.0)
    y = ct.rope(x, **kw)
    plan, _ = rope_api.plan_call(x, out=y, **kw)
    assert recorded.launches[-1] == (plan.symbol, plan.values)
    q, k = torch.randn(6, 2, 4, 64, dtype=torch.float16), torch.randn(6, 2, 1, 64, dtype=torch.float16)
    ct.rope_qk(q, k, inplace=True, **kw)
    plan, _ = rope_api.plan_call(q, k=k, inplace=True, **kw)
    assert recorded.launches[-1] == (plan.symbol, plan.values)


def test_decode_attention_hands_the_kernel_the_planned_values(recorded):
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    cache_k = torch.randn(2, 2, 256, 128, dtype=torch.bfloat16)
    cache_v = torch.randn(2, 2, 256, 128, dtype=torch.bfloat16)
    for length in (100, 100, 37):  # a miss, a hit, a new length (same plan shape, refilled)
        out = torch.empty_like(q)
        cukiln.decode_attention(q, cache_k, cache_v, length, softcap=30.0, out=out)
        plan = decode_api.plan_call(q, cache_k, cache_v, length, softcap=30.0, out=out)
        assert plan.combine is None, "one kernel: this shape merges its splits in a cluster, or has one"
        symbol, values = recorded.launches[-1]
        assert symbol == plan.attention.symbol
        assert values == decode_api.launch_values(plan, out=out.data_ptr(), lse=0)[0]  # with ws's maps, if ws
        assert dict(zip(plan.attention.field_names, values))["softcap"] == 30.0


def test_kv_append_hands_the_kernel_the_planned_values_with_and_without_new_lengths(recorded):
    qkv = torch.randn(3, 48 * 128, dtype=torch.bfloat16)
    q, k, v = (qkv[:, a:b].view(3, -1, 128) for a, b in ((0, 4096), (4096, 5120), (5120, 6144)))
    caches = [torch.zeros(3, 8, 64, 128, dtype=torch.bfloat16) for _ in range(2)]
    lens = torch.tensor([0, 5, 63], dtype=torch.int32)  # taken as a device tensor by the stub
    for lens_out in (None, torch.empty(3, dtype=torch.int32), None):  # a miss, a miss, a hit
        out = cukiln.kv_append(q, k, v, *caches, lens, base=1e4, kv_lens_out=lens_out)
        plan = kv_append_api.plan_call(q, k, v, *caches, lens, base=1e4, kv_lens_out=lens_out, out=out)
        symbol, values = recorded.launches[-1]
        assert symbol == plan.symbol and values == plan.values
        fields = _fields(plan, values)
        assert (fields["q_out"], fields["k_cache"], fields["kv_lens"]) == (out.data_ptr(), caches[0].data_ptr(),
                                                                           lens.data_ptr())
        assert fields["kv_lens_out"] == (0 if lens_out is None else lens_out.data_ptr())
    assert len(recorded.launches) == 3


def test_decode_step_validates_the_attention_before_the_append_launches(recorded):
    qkv = torch.randn(2, 48 * 128, dtype=torch.bfloat16)
    q, k, v = (qkv[:, a:b].view(2, -1, 128) for a, b in ((0, 4096), (4096, 5120), (5120, 6144)))
    caches = [torch.zeros(2, 8, 64, 128, dtype=torch.bfloat16) for _ in range(2)]
    with pytest.raises(ValueError, match="num_splits"):
        cukiln.decode_step(q, k, v, *caches, 7, base=1e4, num_splits=0)
    with pytest.raises(ValueError, match="advance_lens"):
        cukiln.decode_step(q, k, v, *caches, 7, base=1e4, advance_lens=True)
    with pytest.raises(ValueError, match="softcap"):
        cukiln.decode_step(q, k, v, *caches, 7, base=1e4, softcap=-1.0)
    assert recorded.launches == [], "a step with a bad attention argument launched its append"
    with overrides.forced("decode_step_launch", "separate"):  # the append's launch apart, to read its values
        out = cukiln.decode_step(q, k, v, *caches, 7, base=1e4)
    (append, append_values), (attention, _) = recorded.launches[:2]
    assert append.startswith("kv_append_") and attention.startswith("decode_")
    plan = kv_append_api.plan_call(q, k, v, *caches, 7, base=1e4)
    # an int length reaches both launches as a device copy of its host value, checked on the host first
    fields = _fields(plan, append_values)
    assert fields["kv_len_value"] == 0 and fields["kv_lens"] != 0 and out.shape == q.shape


def test_a_plan_cache_hit_allocates_only_the_outputs_it_returns(recorded):
    """Each public call, its plan cached: the tensors it allocates are the outputs it hands back, nothing else."""
    allocated = []
    fake = calls._torch  # the stub's: what a plan's replay allocates with
    for name in ("empty", "empty_like", "empty_strided"):
        def counting(*args, _real=getattr(torch, name), **kwargs):
            allocated.append(1)
            return _real(*args, **kwargs)

        setattr(fake, name, counting)
    x = torch.randn(4, 2, 8, 64, dtype=torch.bfloat16)
    qkv = torch.randn(2, 48 * 128, dtype=torch.bfloat16)
    q, k, v = (qkv[:, a:b].view(2, -1, 128) for a, b in ((0, 4096), (4096, 5120), (5120, 6144)))
    caches = [torch.zeros(2, 8, 64, 128, dtype=torch.bfloat16) for _ in range(2)]
    q_out, pos = torch.empty_like(q), torch.arange(2)
    made = {  # call -> outputs it allocates
        "rope in place": (lambda: cukiln.rope(x, base=1e4, inplace=True), 0),
        "rope, new out": (lambda: cukiln.rope(x, base=1e4), 1),
        "rope_qk in place": (lambda: cukiln.rope_qk(q, k, base=1e4, layout="thd", positions=pos, inplace=True), 0),
        "rope_qk, new outs": (lambda: cukiln.rope_qk(q, k, base=1e4, layout="thd", positions=pos), 2),
        "decode_attention, out=": (lambda: cukiln.decode_attention(q, *caches, 9, out=q_out), 0),
        "decode_attention, new out and lse": (lambda: cukiln.decode_attention(q, *caches, 9, return_lse=True), 2),
        "kv_append in place": (lambda: cukiln.kv_append(q, k, v, *caches, 5, base=1e4, inplace=True), 0),
        "kv_append, new out": (lambda: cukiln.kv_append(q, k, v, *caches, 5, base=1e4), 1),
    }
    for name, (call, outputs) in made.items():
        call()  # plans (a miss may allocate more)
        allocated.clear()
        call()
        assert len(allocated) == outputs, f"{name}: {len(allocated)} allocations on a hit, {outputs} outputs"


def test_a_plan_cache_hit_asks_the_device_nothing(recorded, monkeypatch):
    """Each public call, its plan cached: no query of the device's properties, occupancy, context or functions
    (the planner's questions), only the launch."""
    asked = []
    # binding a kernel asks the context and the function, as launch.Kernel does (the recorder alone would not)
    monkeypatch.setattr(loader.KERNELS, "context", lambda device: (0x2000, 1))
    monkeypatch.setattr(loader.KERNELS, "function", lambda device, module, symbol, shared=0: 0x1000)

    def binding(device, module, symbol, fmt, grid, block, *rest):
        loader.KERNELS.context(device)
        loader.KERNELS.function(device, module, symbol, rest[0] if rest else 0)
        return recorded(device, module, symbol, fmt, grid, block, *rest)

    monkeypatch.setattr(calls, "kernel", binding)
    for name in ("arch", "tuning_target", "sm_count", "max_shared_per_block", "resident_blocks", "active_clusters",
                 "context", "function"):
        real = getattr(loader.KERNELS, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            asked.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(loader.KERNELS, name, counting)
    monkeypatch.setattr(decode_api.RUNTIME, "plans", type(decode_api.RUNTIME.plans)())  # earlier tests': a miss
    x = torch.randn(4, 2, 8, 64, dtype=torch.bfloat16)
    qkv = torch.randn(2, 48 * 128, dtype=torch.bfloat16)
    q, k, v = (qkv[:, a:b].view(2, -1, 128) for a, b in ((0, 4096), (4096, 5120), (5120, 6144)))
    caches = [torch.zeros(2, 8, 64, 128, dtype=torch.bfloat16) for _ in range(2)]
    q_out, pos = torch.empty_like(q), torch.arange(2)
    made = {
        "rope": lambda: cukiln.rope(x, base=1e4, inplace=True),
        "rope_qk": lambda: cukiln.rope_qk(q, k, base=1e4, layout="thd", positions=pos, inplace=True),
        "decode_attention": lambda: cukiln.decode_attention(q, *caches, 9, out=q_out),
        "kv_append": lambda: cukiln.kv_append(q, k, v, *caches, 5, base=1e4, inplace=True),
    }
    for name, call in made.items():
        call()  # plans: a miss asks the device about the launch, and binds its kernels
        assert asked, f"{name}: the miss asked nothing (the counters are not in its way)"
        assert "context" in asked and "function" in asked, f"{name}: the miss bound no kernel ({asked})"
        asked.clear()
        call()
        assert asked == [], f"{name}: a plan-cache hit asked the device {asked}"


@pytest.mark.parametrize("pipeline", ["ws", "ws_deep"])
def test_a_ws_plan_launches_with_the_tensor_maps_of_each_calls_caches(pipeline, recorded, monkeypatch):
    from cukiln import overrides

    encoded = []

    def fake_tensor_map(dtype, ptr, dims, strides_bytes, box, swizzled=True, *, l2_promotion):
        encoded.append(ptr)
        return ptr.to_bytes(8, "little") * 16

    monkeypatch.setattr(decode_api, "tensor_map", fake_tensor_map)
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    caches = [(torch.randn(2, 2, 256, 128, dtype=torch.bfloat16), torch.randn(2, 2, 256, 128, dtype=torch.bfloat16))
              for _ in range(2)]
    for k, v in caches + caches:  # two misses of the maps, then two hits; one plan throughout
        out = torch.empty_like(q)
        cukiln.decode_attention(q, k, v, 100, out=out, num_splits=1)  # one pass: no workspace to allocate
        plan = decode_api.plan_call(q, k, v, 100, out=out, num_splits=1)
        assert plan.pipeline == pipeline
        symbol, values = recorded.launches[-1]
        assert symbol == plan.attention.symbol == f"decode_bf16_d128_s3_v8_{pipeline}"
        maps = tuple(p.to_bytes(8, "little") * 16 for p in (k.data_ptr(), v.data_ptr()))
        assert values[:2] == maps
        assert values[2:] == plan.values(out=out.data_ptr(), lse=0)[0][2:]
        assert values == decode_api.launch_values(plan, out=out.data_ptr(), lse=0)[0]
    # the cached plan encoded each cache's maps once (each launch_values call above encodes its own two)
    assert len(encoded) == 2 * 2 + 2 * 4


@pytest.mark.parametrize("pipeline", ["auto", "deep"])  # the planner's (ws on the stub's sm_90), and deep
def test_batch_invariant_launches_the_rows_own_split_rule(recorded, monkeypatch, pipeline):
    from cukiln import overrides
    from cukiln.decode_plan import invariant_splits

    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    for capacity in (900, 3000):  # one pass; two splits, merged in a cluster
        k, v = (torch.randn(2, 2, capacity, 128, dtype=torch.bfloat16) for _ in range(2))
        out = torch.empty_like(q)
        cukiln.decode_attention(q, k, v, capacity - 5, out=out, batch_invariant=True)
        plan = decode_api.plan_call(q, k, v, capacity - 5, out=out, batch_invariant=True)
        splits = invariant_splits(capacity)
        name = "ws" if pipeline == "auto" else pipeline
        symbol, values = recorded.launches[-1]
        fields = dict(zip(plan.attention.field_names, values))
        assert symbol == plan.attention.symbol == f"decode_bf16_d128_s3_v8_{name}"
        assert fields["batch_invariant"] == 1 and fields["num_splits"] == splits
        assert plan.attention.cluster == splits and plan.combine is None
        assert values == decode_api.launch_values(plan, out=out.data_ptr(), lse=0)[0]


@pytest.mark.parametrize("angles, offset, fused", [
    ("base", 0, "decode_step_bf16_d128_half_base"),  # 16-byte rows: the append's width, the fused one's
    ("base", 4, None),  # a rotated span 8 bytes in: the append rotates 4 at a time, where base angles' bits differ
    ("cos_sin_cache", 4, "decode_step_bf16_d128_half_any"),  # a table's bits do not depend on the width
    ("cos_sin_cache", 0, "decode_step_bf16_d128_half_any"),  # nor with the append wider than the fused rotation
])
def test_a_step_fuses_only_where_the_fused_rotation_gives_the_appends_bits(recorded, angles, offset, fused):
    from cukiln import decode_step_api

    q = torch.randn(2, 32, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 8, 128, dtype=torch.bfloat16) for _ in range(2))
    caches = [torch.zeros(2, 8, 64, 128, dtype=torch.bfloat16) for _ in range(2)]
    lens = torch.tensor([3, 9], dtype=torch.int32)
    kw = {"base": 1e4} if angles == "base" else {"cos_sin_cache": torch.rand(80, 96)}
    step = decode_step_api.plan_call(q, k, v, *caches, lens, rotary_dim=96, rotary_offset=offset, **kw)
    assert step.append.key[3] == (8 if offset == 0 else 4)
    assert (None if step.fused is None else step.fused.symbol) == fused
    if fused is None:  # forcing the fused launch there names why it cannot
        with overrides.forced("decode_step_launch", "fused"):
            with pytest.raises(ValueError, match="rotates 4 elements at a time, where the fused kernel for base"):
                decode_step_api.plan_call(q, k, v, *caches, lens, rotary_dim=96, rotary_offset=offset, **kw)
