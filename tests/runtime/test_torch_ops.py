"""The torch custom ops on the CPU: fake (meta) implementations under FakeTensorMode,
the in-place op declared as mutating, gradients flowing through the fake kernels, wrapper errors."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import cukiln.torch as ct  # noqa: E402
from cukiln import rope_api, rope_torch  # noqa: E402


def test_ops_are_registered_and_in_place_rope_declares_its_mutation():
    rope_inplace = torch.ops.cukiln.rope_.default._schema
    assert rope_inplace.arguments[0].alias_info is not None and rope_inplace.arguments[0].alias_info.is_write
    assert torch.ops.cukiln.rope.default._schema.arguments[0].alias_info is None
    assert len(torch.ops.cukiln.decode_attention.default._schema.returns) == 2


def test_fake_rope_keeps_shape_dtype_and_layout_of_a_transposed_view():
    with FakeTensorMode():
        x = torch.empty(2, 32, 512, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)  # (b, s, h, d)
        freqs = torch.empty(512, 1, 1, 128, device="cuda")
        y = ct.rope(x, freqs=freqs, layout="bshd")
        assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
        assert y.stride() == torch.empty_like(x).stride()
        assert ct.rope(x, base=10000.0, layout="bshd", inplace=True) is x


def test_gradients_flow_to_x_through_the_backward_op_with_the_direction_flipped(monkeypatch):
    """Fake tensors on the CPU device: a CPU build of torch cannot run the autograd engine on CUDA ones,
    and the fake kernels do not look at the device. The GPU tests check the gradients' values."""
    with FakeTensorMode():
        x = torch.empty(64, 2, 4, 64, requires_grad=True)
        freqs = torch.empty(64, 64, requires_grad=True)
        (grad_x,) = torch.autograd.grad(ct.rope(x, freqs=freqs, offsets=3).sum(), x)
        assert grad_x.shape == x.shape
        assert torch.autograd.grad(ct.rope(x, freqs=freqs).sum(), freqs, allow_unused=True) == (None,)
        calls = []
        real = rope_torch._rope_op
        monkeypatch.setattr(rope_torch, "_rope_op",
                            lambda grad, *arguments: calls.append(arguments) or real(grad, *arguments))
        torch.autograd.grad(ct.rope(x, freqs=freqs, interleaved=True, backward=False).sum(), x)
    # the forward's op calls come first (its autograd kernel re-enters the op below autograd), the backward's last
    assert calls[0][-1] is False and calls[-1][-1] is True, "the backward of a forward rotation is the backward kernel"
    assert calls[-1][rope_api.RUNTIME.index["interleaved"] - 1] is True, \
        "with the forward's other arguments (interleaved)"


@pytest.mark.parametrize("shape", [(3, 32, 128), (3, 1, 32, 128), (3, 32, 1, 128)])
def test_fake_decode_attention_returns_q_shaped_output_and_fp32_lse(shape):
    with FakeTensorMode():  # CPU-device fakes: a CPU build of torch cannot slice CUDA ones
        q = torch.empty(*shape, dtype=torch.bfloat16)
        k = torch.empty(3, 8, 4096, 128, dtype=torch.bfloat16)[:, :, :1000]
        lens = torch.empty(3, dtype=torch.int32)
        out, lse = ct.decode_attention(q, k, k, lens, return_lse=True)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert lse.shape == (3, 32) and lse.dtype == torch.float32
        assert ct.decode_attention(q, k, k, 1000, kv_start=5).shape == q.shape


def test_traced_decode_attention_refuses_a_query_that_requires_grad():
    """Traced, the fake kernel runs instead of decode_attention, so the op's autograd kernel refuses."""
    with FakeTensorMode():
        q = torch.empty(3, 32, 128, requires_grad=True)
        k = torch.empty(3, 8, 4096, 128)
        with pytest.raises(RuntimeError, match="q requires grad, but autograd does not see cukiln::decode_attention"):
            ct.decode_attention(q, k, k, 1000)
        with torch.no_grad():
            assert ct.decode_attention(q, k, k, 1000).shape == q.shape


def test_wrappers_reject_out_and_bad_lengths():
    x = torch.empty(4, 1, 1, 8)
    with pytest.raises(ValueError, match="out"):
        ct.rope(x, base=1e4, out=x)
    with pytest.raises(ValueError, match="out"):
        ct.decode_attention(x, x, x, 1, out=x)
    with pytest.raises(TypeError, match="kv_lens"):
        ct.decode_attention(x, x, x, None)


def test_a_compiled_call_with_a_bad_argument_raises_the_wrappers_message_and_writes_nothing():
    # the wrapper is one node of torch.compile's graph: its check runs while torch traces the call, and torch
    # raises its own error type around the wrapper's message
    x = torch.randn(4, 1, 1, 8)
    before = x.clone()
    for fn, message in ((lambda t: ct.rope(t, base=1e4, out=t), "use cukiln.rope for out="),
                        (lambda t: ct.decode_attention(t, t, t, None), "kv_lens: expected an int")):
        with pytest.raises(Exception, match=message):
            torch.compile(fn, backend="eager", fullgraph=True)(x)
    assert torch.equal(x, before)


def test_a_backward_after_its_positions_changed_in_place_raises(monkeypatch):
    """The eager autograd path on the CPU, with the float64 reference standing in for the kernel."""
    from cukiln import reference

    def reference_rope(runtime, args, inplace):
        at = runtime.index
        return reference.rope(args[0], base=args[at["base"]], positions=args[at["positions"]],
                              backward=args[at["backward"]]).to(args[0].dtype)

    monkeypatch.setattr(rope_torch, "_run_eager", reference_rope)
    x = torch.randn(8, 1, 2, 16, dtype=torch.float64, requires_grad=True)
    positions = torch.arange(8, dtype=torch.int32)
    y = ct.rope(x, base=10000.0, positions=positions)
    grad = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, grad, retain_graph=True)
    assert torch.allclose(gx, reference.rope(grad, base=10000.0, positions=positions, backward=True))
    positions.add_(1000)  # a reused positions buffer, rewritten before the backward
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(y, x, grad)


# op -> the arguments it writes (declared Tensor(x!) in its schema); every other argument is read only
MUTATED = {"rope": set(), "rope_": {"x"}, "rope_qk": set(), "rope_qk_": {"q", "k"}, "decode_attention": set(),
           "kv_append": {"k_cache", "v_cache"}, "decode_step": {"k_cache", "v_cache", "kv_lens"}}


@pytest.mark.parametrize("op", sorted(MUTATED))
def test_every_op_declares_exactly_what_it_writes_and_returns_fresh_tensors(op):
    schema = getattr(torch.ops.cukiln, op).default._schema
    written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    assert written == MUTATED[op]
    assert all(r.alias_info is None for r in schema.returns), "a result aliasing an argument"


def test_fake_decode_step_and_kv_append_shapes():
    with FakeTensorMode():
        q = torch.empty(3, 32, 128, dtype=torch.bfloat16)
        kv = torch.empty(3, 8, 128, dtype=torch.bfloat16)
        caches = [torch.empty(3, 8, 64, 128, dtype=torch.bfloat16) for _ in range(2)]
        lens = torch.empty(3, dtype=torch.int32)
        out, lse = torch.ops.cukiln.decode_step(q, kv, kv, *caches, lens, "bhsd", None, 0, None, None, None, None,
                                                None, None, 1e4, 1.0, 1.0, False, None, 0, None, None, 1e-6, None,
                                                None, None, False)
        assert (out.shape, out.dtype, lse.shape, lse.dtype) == (q.shape, q.dtype, (3, 32), torch.float32)
        q_rot = torch.ops.cukiln.kv_append(q, kv, kv, *caches, lens, 0, "bhsd", None, 0, None, None, None, None,
                                           None, None, 1e4, 1.0, 1.0, False, None, 0, None, None, 1e-6)
        assert (q_rot.shape, q_rot.dtype) == (q.shape, q.dtype)
