"""The torch custom ops on the GPU: values, gradients, opcheck, torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
import cukiln.torch as ct  # noqa: E402
from cukiln.tools.decode.checks import DECODE_FP32_UNITS  # noqa: E402
from tests.checks import assert_matches_reference, rope_op_args  # noqa: E402

pytestmark = pytest.mark.gpu


def _inputs():
    x = torch.randn(64, 2, 4, 64, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(80, 64, device="cuda") * 50
    return x, freqs


def test_rope_op_matches_cukiln_and_its_gradient_is_the_backward_kernel():
    x, freqs = _inputs()
    x.requires_grad_(True)
    y = ct.rope(x, freqs=freqs, offsets=7)
    assert torch.equal(y, cukiln.rope(x.detach(), freqs=freqs, offsets=7))
    grad = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, grad)
    assert torch.equal(gx, cukiln.rope(grad, freqs=freqs, offsets=7, backward=True))


def test_in_place_op_rotates_x():
    x, freqs = _inputs()
    expected = cukiln.rope(x, freqs=freqs)
    assert ct.rope(x, freqs=freqs, inplace=True) is x and torch.equal(x, expected)


def test_opcheck_passes_for_every_op():
    x, freqs = _inputs()
    args = (x, *rope_op_args(freqs=freqs, offset=0))
    torch.library.opcheck(torch.ops.cukiln.rope.default, args)
    torch.library.opcheck(torch.ops.cukiln.rope_.default, (x.clone(),) + args[1:])
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 300, 128, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.cukiln.decode_attention.default,
                          (q, k, k, None, 200, "bhsd", None, 0, None, None, None))


def test_compiled_fullgraph_matches_eager():
    x, freqs = _inputs()
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 300, 128, device="cuda", dtype=torch.bfloat16)
    lens = torch.tensor([300, 17], device="cuda", dtype=torch.int32)

    def step(x, q):
        return ct.rope(x, freqs=freqs) * 2, ct.decode_attention(q, k, k, lens)

    compiled = torch.compile(step, fullgraph=True)
    got, want = compiled(x, q), step(x, q)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    ref = cukiln.reference.decode_attention(q, k, k, lens)
    assert_matches_reference(got[1], ref, "compiled decode", fp32_units=64)


def test_a_compiled_call_whose_numbers_change_matches_eager_at_every_value():
    # a plain number is a constant of the op a compiled graph calls (runtime/specialize.py); a changed one recompiles
    # the function, an int then as a symbol (one graph for the values after: more values here than torch.compile's
    # recompile limit), a float as its new value
    x, _ = _inputs()
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 300, 128, device="cuda", dtype=torch.bfloat16)
    k_new, v_new = torch.randn(2, 2, 128, device="cuda", dtype=torch.bfloat16), torch.randn(2, 2, 128, device="cuda",
                                                                                          dtype=torch.bfloat16)
    decode = torch.compile(lambda q, n: ct.decode_attention(q, k, k, n), fullgraph=True)
    rope = torch.compile(lambda x, n, base: ct.rope(x, base=base, offsets=n), fullgraph=True)
    append = torch.compile(lambda q, k_cache, v_cache, n: ct.kv_append(q, k_new, v_new, k_cache, v_cache, n,
                                                                      base=1e4), fullgraph=True)
    for i, n in enumerate((300, 17, 200, 17, 1, 64, 65, 128, 129, 250, 299)):
        base = (1e4, 5e5)[i % 2]
        got = decode(q, n)
        assert torch.equal(got, ct.decode_attention(q, k, k, n)), n
        # the eager call runs the plans the compiled one does: the float64 reference is the independent check
        assert_matches_reference(got, cukiln.reference.decode_attention(q, k, k, n), f"compiled decode at {n}",
                                 fp32_units=DECODE_FP32_UNITS)
        got = rope(x, n, base)
        assert torch.equal(got, ct.rope(x, base=base, offsets=n)), (n, base)
        assert_matches_reference(got, cukiln.reference.rope(x, base=base, offsets=n), f"compiled rope at {n}")
        caches, want_caches = (k.clone(), k.clone()), (k.clone(), k.clone())
        got = append(q, *caches, n - 1)
        want = ct.kv_append(q, k_new, v_new, *want_caches, n - 1, base=1e4)
        assert torch.equal(got, want) and torch.equal(caches[0], want_caches[0]) and torch.equal(caches[1],
                                                                                               want_caches[1]), n


def test_eager_direct_calls_match_the_op_and_positions_pass_through_it():
    x, freqs = _inputs()
    positions = torch.randint(0, 80, (64,), device="cuda", dtype=torch.int32)
    direct = ct.rope(x, freqs=freqs, positions=positions)  # no grad wanted: the kernel is called directly
    via_op = torch.ops.cukiln.rope(x, *rope_op_args(freqs=freqs, positions=positions))
    assert torch.equal(direct, via_op)
    x.requires_grad_(True)
    y = ct.rope(x, freqs=freqs, positions=positions)  # eager autograd: the kernels called directly
    y_op = torch.ops.cukiln.rope(x, *rope_op_args(freqs=freqs, positions=positions))  # the op's registered autograd
    assert torch.equal(y.detach(), direct) and torch.equal(y_op.detach(), direct)
    grad = torch.randn_like(direct)
    want = cukiln.rope(grad, freqs=freqs, positions=positions, backward=True)
    assert torch.equal(torch.autograd.grad(y, x, grad)[0], want)
    assert torch.equal(torch.autograd.grad(y_op, x, grad)[0], want)
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 300, 128, device="cuda", dtype=torch.bfloat16)
    lens = torch.tensor([300, 17], device="cuda", dtype=torch.int32)
    out, lse = ct.decode_attention(q, k, k, lens, return_lse=True)
    op_out, op_lse = torch.ops.cukiln.decode_attention(q, k, k, lens, 0, "bhsd", None, 0, None, None, None)
    assert torch.equal(out, op_out) and torch.equal(lse, op_lse)
