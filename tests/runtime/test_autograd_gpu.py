"""What autograd sees of cukiln's writes on the GPU: in-place rope with a gradient (eager and compiled), the
ops' gradients under torch.compile, version counters bumped by every write into a caller's tensor, the
non-differentiable ops refusing tensors that require grad, and negated views refused even on a cache hit."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import native  # noqa: E402
import cukiln.torch as ct  # noqa: E402
from tests.checks import rope_op_args  # noqa: E402

pytestmark = pytest.mark.gpu

MODIFIED = "modified by an inplace operation"


def _rope_inputs(rotary_dim=64):
    x = torch.randn(64, 2, 4, 128, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(80, rotary_dim, device="cuda") * 50
    return x, freqs


def _decode_inputs():
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 300, 128, device="cuda", dtype=torch.bfloat16)
    return q, k, torch.randn_like(k)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_in_place_rope_with_a_gradient_gives_the_backward_kernel_and_keeps_the_tail(compiled):
    x0, freqs = _rope_inputs(rotary_dim=64)  # partial rotary: the tail's gradient passes through
    leaf = x0.clone().requires_grad_(True)

    def step(t):
        y = t * 1  # a non-leaf: a leaf that requires grad cannot be written in place
        return ct.rope(y, freqs=freqs, offsets=5, inplace=True)

    fn = torch.compile(step, fullgraph=True) if compiled else step
    y = fn(leaf)
    assert torch.equal(y.detach(), cukiln.rope(x0, freqs=freqs, offsets=5))
    grad = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, leaf, grad)
    assert torch.equal(gx, cukiln.rope(grad, freqs=freqs, offsets=5, backward=True))


def test_in_place_rope_of_a_leaf_that_requires_grad_is_refused_as_torch_refuses_it():
    x, freqs = _rope_inputs()
    leaf = x.clone().requires_grad_(True)
    for target in (leaf, leaf[:, :1]):  # the leaf, and a view of it
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            ct.rope(target, freqs=freqs, inplace=True)
    assert torch.equal(leaf.detach(), x), "a refused call wrote x"


def test_compiled_rope_gradient_is_the_backward_kernel():
    x, freqs = _rope_inputs()
    x.requires_grad_(True)
    compiled = torch.compile(lambda t: ct.rope(t, freqs=freqs, interleaved=True) * 3, fullgraph=True)
    grad = torch.randn_like(x)
    (gx,) = torch.autograd.grad(compiled(x), x, grad)
    assert torch.equal(gx, cukiln.rope(grad * 3, freqs=freqs, interleaved=True, backward=True))


def test_opcheck_of_the_allocating_op_with_a_gradient():
    x, freqs = _rope_inputs()
    args = (x.requires_grad_(True), *rope_op_args(freqs=freqs, offset=0))
    torch.library.opcheck(torch.ops.cukiln.rope.default, args)


@pytest.mark.parametrize("write", ["cukiln.rope in place", "cukiln.rope out=", "ct.rope in place",
                                   "op cukiln::rope_", "cukiln.decode_attention out="])
def test_every_write_into_a_callers_tensor_bumps_its_version(write):
    """A backward that saved the tensor before the write raises, as after torch's own in-place ops."""
    x, freqs = _rope_inputs()
    q, k, v = _decode_inputs()
    target = {"cukiln.decode_attention out=": torch.empty_like(q), "cukiln.rope out=": torch.empty_like(x)}.get(write, x)
    w = torch.ones((), device="cuda", dtype=target.dtype, requires_grad=True)
    loss = (target * w).sum()  # saves target for w's gradient

    def write_once():
        if write == "cukiln.rope in place":
            cukiln.rope(x, freqs=freqs, inplace=True)
        elif write == "cukiln.rope out=":
            cukiln.rope(x, freqs=freqs, out=target)
        elif write == "ct.rope in place":
            ct.rope(x, freqs=freqs, inplace=True)
        elif write == "op cukiln::rope_":
            torch.ops.cukiln.rope_(x, *rope_op_args(freqs=freqs, offset=0))
        else:
            cukiln.decode_attention(q, k, v, 300, out=target)

    variant = {"cukiln.rope out=": "rope#out", "cukiln.decode_attention out=": "decode_attention#out#no_lse"}.get(
        write, "rope_")  # the plan the write reaches
    for attempt in range(2):  # the plan's miss (where no test before made it), then a hit: each write bumps
        before = target._version
        served = native.module().python_count(variant) if native.module() is not None else None
        write_once()
        assert target._version > before
        if attempt == 1 and served is not None:
            assert native.module().python_count(variant) == served, f"{write}: the second write was a hit"
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


def test_non_differentiable_ops_refuse_tensors_that_require_grad():
    x, freqs = _rope_inputs()
    q, k, v = _decode_inputs()
    x.requires_grad_(True)
    with pytest.raises(RuntimeError, match=r"x requires grad, but autograd does not see cukiln::rope_"):
        torch.ops.cukiln.rope_(x * 1, *rope_op_args(freqs=freqs, offset=0))
    for grad_q, grad_k in ((True, False), (False, True)):
        with pytest.raises(RuntimeError, match=("q" if grad_q else "k_cache") + " requires grad"):
            ct.decode_attention(q.clone().requires_grad_(grad_q), k.clone().requires_grad_(grad_k), v, 300)
    with torch.no_grad():
        out = ct.decode_attention(q.clone().requires_grad_(True), k, v, 300)
    assert torch.equal(out, cukiln.decode_attention(q, k, v, 300))


def test_negated_views_are_refused_even_when_the_plain_tensor_is_cached():
    x, freqs = _rope_inputs()
    negated = torch._neg_view(x)  # what .conj().imag of a complex tensor gives, with x's strides
    cukiln.rope(x, freqs=freqs)  # caches the plans for these shapes, strides and alignment: allocating
    cukiln.rope(x.clone(), freqs=freqs, inplace=True)  # and in place, the form of the first refused call
    snapshot = x.clone()
    served = native.module().python_count("rope_") if native.module() is not None else None
    with pytest.raises(ValueError, match="negated view"):
        cukiln.rope(negated, freqs=freqs, inplace=True)
    if served is not None:  # the key tells a negated view apart: Python took the call, and refused it
        assert native.module().python_count("rope_") == served + 1
    with pytest.raises(ValueError, match="negated view"):
        cukiln.rope(x, freqs=torch._neg_view(freqs))
    assert torch.equal(x, snapshot), "a refused call wrote x"


def test_cukiln_rope_runs_inside_a_users_autograd_function_and_refuses_outside():
    x, freqs = _rope_inputs()
    x.requires_grad_(True)

    class Rope(torch.autograd.Function):  # how a framework wraps the raw kernels itself
        @staticmethod
        def forward(ctx, t):
            return cukiln.rope(t, freqs=freqs)

        @staticmethod
        def backward(ctx, grad):
            return cukiln.rope(grad, freqs=freqs, backward=True)

    grad = torch.randn_like(x)
    (gx,) = torch.autograd.grad(Rope.apply(x), x, grad)
    assert torch.equal(gx, cukiln.rope(grad, freqs=freqs, backward=True))
    with pytest.raises(RuntimeError, match="requires grad"):  # outside it, the gradient would be lost
        cukiln.rope(x, freqs=freqs)


@pytest.mark.parametrize("grad_of", ["q", "cos_sin_cache", "out"])
def test_a_cached_step_still_refuses_a_tensor_that_requires_grad_and_writes_nothing(grad_of):
    # the native callers hand such a call back (hot_path.cpp's fast_call) where the public function no longer tests
    # each tensor itself: a key already planned must not launch it
    q, k, v = _decode_inputs()
    k_new, v_new = k[:, :, 0].clone(), v[:, :, 0].clone()
    lens = torch.full((2,), 100, dtype=torch.int32, device="cuda")
    cache = torch.rand(300, 128, device="cuda")
    tensors = {"q": q, "cos_sin_cache": cache, "out": torch.empty_like(q)}

    def step(**changed):
        given = {**tensors, **changed}
        return cukiln.decode_step(given["q"], k_new, v_new, k, v, lens, positions=lens,
                                  cos_sin_cache=given["cos_sin_cache"], out=given["out"])

    step()  # the key planned
    snapshot = k.clone(), v.clone()
    wanting = tensors[grad_of].clone().requires_grad_(True)
    with pytest.raises(RuntimeError, match=f"{grad_of} requires grad, but autograd does not see cukiln.decode_step"):
        step(**{grad_of: wanting})
    assert torch.equal(k, snapshot[0]) and torch.equal(v, snapshot[1]), "a refused step wrote the caches"
    with torch.no_grad():  # grad mode off: nothing to refuse, and the native plan serves it
        served = native.module().python_count("decode_step#out") if native.module() is not None else None
        step(**{grad_of: wanting})
        if served is not None:
            assert native.module().python_count("decode_step#out") == served
    if grad_of != "out":  # the op through autograd, which refuses it by the op's name
        with pytest.raises(RuntimeError, match=f"{grad_of} requires grad, but autograd does not see cukiln::"):
            ct.decode_step(**{"q": q, "cos_sin_cache": cache, grad_of: wanting}, k_new=k_new, v_new=v_new,
                           k_cache=k, v_cache=v, kv_lens=lens, positions=lens)
