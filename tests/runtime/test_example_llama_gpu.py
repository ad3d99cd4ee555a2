"""cukiln as a drop-in: a small Llama-style attention block whose RoPE and decode step run on cukiln.

The block (RMSNorm, q/k/v projections with GQA, rotary embedding from HF-style cos/sin caches, causal
attention, output projection, residual; tied-embedding logits for generation) is written once and
takes its two kernels from a backend:

- ``CUKILN``: ``cukiln.torch.rope`` (differentiable through cukiln's backward kernel) and
  ``cukiln.torch.decode_attention`` over a fixed-capacity KV cache, read as a slice of its buffer;
- ``REFERENCE``: ``cukiln.reference.rope`` (its backward is the reference's exact vector-Jacobian
  product) and ``cukiln.reference.decode_attention``, in float64, cast back to the block's dtype.

Training: the cukiln block in fp32 against the same block in float64 with the reference kernels.
Generation: 16 greedy tokens per row from prompts of different lengths, the KV cache growing in steps;
both paths run the block in bf16 and differ only in the two kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

import cukiln.reference as reference  # noqa: E402
import cukiln.torch as ct  # noqa: E402

pytestmark = pytest.mark.gpu

VOCAB, HIDDEN, HEADS_Q, HEADS_KV, HEAD_DIM = 48, 256, 8, 2, 64
MAX_POSITIONS, CACHE_CAPACITY, CACHE_STEP = 256, 64, 16
TRAINABLE = ("embed", "norm", "wq", "wk", "wv", "wo")


@dataclass
class Weights:
    embed: torch.Tensor  # [VOCAB, HIDDEN], tied with the output
    norm: torch.Tensor  # [HIDDEN]
    wq: torch.Tensor  # [HIDDEN, HEADS_Q * HEAD_DIM]
    wk: torch.Tensor  # [HIDDEN, HEADS_KV * HEAD_DIM]
    wv: torch.Tensor
    wo: torch.Tensor  # [HEADS_Q * HEAD_DIM, HIDDEN]
    cos: torch.Tensor  # [MAX_POSITIONS, HEAD_DIM] fp32, HF layout (the half-split pair angle repeated)
    sin: torch.Tensor

    @staticmethod
    def random(seed: int) -> "Weights":
        g = torch.Generator(device="cuda").manual_seed(seed)

        def rand(*shape, std):
            return torch.randn(*shape, generator=g, device="cuda") * std

        inv_freq = 10000.0 ** (-torch.arange(0, HEAD_DIM, 2, device="cuda", dtype=torch.float64) / HEAD_DIM)
        angles = torch.arange(MAX_POSITIONS, device="cuda", dtype=torch.float64)[:, None] * inv_freq
        angles = torch.cat((angles, angles), dim=-1)
        return Weights(embed=rand(VOCAB, HIDDEN, std=1.0), norm=1.0 + rand(HIDDEN, std=0.1),
                       wq=rand(HIDDEN, HEADS_Q * HEAD_DIM, std=HIDDEN ** -0.5),
                       wk=rand(HIDDEN, HEADS_KV * HEAD_DIM, std=HIDDEN ** -0.5),
                       wv=rand(HIDDEN, HEADS_KV * HEAD_DIM, std=HIDDEN ** -0.5),
                       wo=rand(HEADS_Q * HEAD_DIM, HIDDEN, std=(HEADS_Q * HEAD_DIM) ** -0.5),
                       cos=angles.cos().float(), sin=angles.sin().float())

    def to(self, dtype) -> "Weights":
        """Trainable copies in ``dtype`` (the rotary caches stay fp32, as the kernels read them)."""
        return Weights(**{n: getattr(self, n).to(dtype).clone().requires_grad_(True) for n in TRAINABLE},
                       cos=self.cos, sin=self.sin)

    def trainable(self) -> list[torch.Tensor]:
        return [getattr(self, n) for n in TRAINABLE]


class _ReferenceRope(torch.autograd.Function):
    """The float64 reference rope with its own backward (reference.rope(backward=True))."""

    @staticmethod
    def forward(ctx, x, cos, sin, positions):
        ctx.save_for_backward(cos, sin, positions)
        return reference.rope(x, cos=cos, sin=sin, positions=positions, layout="bshd").to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        cos, sin, positions = ctx.saved_tensors
        g = reference.rope(grad, cos=cos, sin=sin, positions=positions, layout="bshd", backward=True)
        return g.to(grad.dtype), None, None, None


@dataclass(frozen=True)
class Backend:
    name: str
    rope: object  # (x [b, s, h, d], cos, sin, positions [b, s] int32) -> rotated x
    decode: object  # (q [b, h_q, d], k_cache, v_cache, kv_lens int32 [b]) -> [b, h_q, d]


CUKILN = Backend(
    "cukiln",
    rope=lambda x, cos, sin, positions: ct.rope(x, cos=cos, sin=sin, positions=positions, layout="bshd"),
    decode=lambda q, k, v, lens: ct.decode_attention(q, k, v, lens))
REFERENCE = Backend(
    "reference",
    rope=_ReferenceRope.apply,
    decode=lambda q, k, v, lens: reference.decode_attention(q, k, v, lens).to(q.dtype))


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def project(w: Weights, backend: Backend, x, positions):
    """x [b, s, HIDDEN] at int32 positions [b, s] -> rotated q [b, s, h_q, d], rotated k and v [b, s, h_kv, d]."""
    b, s, _ = x.shape
    h = rms_norm(x, w.norm)
    q = (h @ w.wq).view(b, s, HEADS_Q, HEAD_DIM)
    k = (h @ w.wk).view(b, s, HEADS_KV, HEAD_DIM)
    v = (h @ w.wv).view(b, s, HEADS_KV, HEAD_DIM)
    return backend.rope(q, w.cos, w.sin, positions), backend.rope(k, w.cos, w.sin, positions), v


def attention_block(w: Weights, backend: Backend, x, positions):
    """x [b, s, HIDDEN] at int32 positions [b, s] -> (x + attention(x) [b, s, HIDDEN], k and v [b, s, h_kv, d])."""
    b, s, _ = x.shape
    q, k, v = project(w, backend, x, positions)
    attended = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True)
    return x + attended.transpose(1, 2).reshape(b, s, HEADS_Q * HEAD_DIM) @ w.wo, k, v


def _training_step(w: Weights, backend: Backend, tokens, target):
    b, s = tokens.shape
    positions = torch.arange(s, device="cuda", dtype=torch.int32).repeat(b, 1)
    y, _, _ = attention_block(w, backend, w.embed[tokens], positions)
    loss = (y - target.to(y.dtype)).pow(2).mean()
    return loss, torch.autograd.grad(loss, w.trainable())


def test_training_step_matches_the_float64_reference():
    weights = Weights.random(seed=1)
    g = torch.Generator(device="cuda").manual_seed(2)
    tokens = torch.randint(0, VOCAB, (3, 40), generator=g, device="cuda")
    target = torch.randn(3, 40, HIDDEN, generator=g, device="cuda")

    loss, grads = _training_step(weights.to(torch.float32), CUKILN, tokens, target)
    ref_loss, ref_grads = _training_step(weights.to(torch.float64), REFERENCE, tokens, target)

    assert math.isclose(loss.item(), ref_loss.item(), rel_tol=1e-5)
    for name, got, want in zip(TRAINABLE, grads, ref_grads):
        err = (got.double() - want).abs().max().item() / want.abs().max().item()
        assert err < 1e-4, f"grad of {name}: max error {err:.2e} of its largest entry"
    # The rotation matters to the gradient: without it the block's wq/wk gradients are far off.
    no_rope = Backend("none", rope=lambda x, cos, sin, positions: x, decode=None)
    _, plain = _training_step(weights.to(torch.float64), no_rope, tokens, target)
    wq = TRAINABLE.index("wq")
    assert (plain[wq] - ref_grads[wq]).abs().max() > 100 * (grads[wq].double() - ref_grads[wq]).abs().max()


class KVCache:
    """Fixed-capacity K/V buffers [b, h_kv, CACHE_CAPACITY, d]; attention reads the slice [:, :, :T] with
    T the filled length rounded up to CACHE_STEP (a cache grown in steps), never a copy."""

    def __init__(self, batch: int, dtype) -> None:
        shape = (batch, HEADS_KV, CACHE_CAPACITY, HEAD_DIM)
        self.k = torch.full(shape, float("nan"), device="cuda", dtype=dtype)  # unfilled slots must not be read
        self.v = torch.full(shape, float("nan"), device="cuda", dtype=dtype)

    def write(self, row: int, start: int, k, v) -> None:
        """k, v [n, h_kv, d] at positions start..start+n of ``row``."""
        self.k[row, :, start:start + k.shape[0]] = k.transpose(0, 1)
        self.v[row, :, start:start + v.shape[0]] = v.transpose(0, 1)

    def views(self, lengths: list[int]):
        filled = -(-max(lengths) // CACHE_STEP) * CACHE_STEP
        return self.k[:, :, :filled], self.v[:, :, :filled]


def _logits(w: Weights, h):
    return rms_norm(h, w.norm) @ w.embed.t()


def _generate(w: Weights, backend: Backend, prompts: list[list[int]], steps: int):
    """Greedy generation: prefill each prompt, then ``steps`` one-token decode steps for all rows at once."""
    batch = len(prompts)
    cache = KVCache(batch, w.wq.dtype)
    lengths, last_logits = [], []
    for row, prompt in enumerate(prompts):
        tokens = torch.tensor([prompt], device="cuda")
        positions = torch.arange(len(prompt), device="cuda", dtype=torch.int32)[None]
        y, k, v = attention_block(w, backend, w.embed[tokens], positions)
        cache.write(row, 0, k[0], v[0])
        lengths.append(len(prompt))
        last_logits.append(_logits(w, y[0, -1]))
    logits = torch.stack(last_logits)
    generated, all_logits = [], []
    for _ in range(steps):
        token = logits.argmax(-1)
        generated.append(token)
        all_logits.append(logits.float())
        positions = torch.tensor(lengths, device="cuda", dtype=torch.int32)[:, None]  # [b, 1]
        x = w.embed[token][:, None]  # [b, 1, HIDDEN]
        q, k, v = project(w, backend, x, positions)
        for row in range(batch):
            cache.write(row, lengths[row], k[row], v[row])
        lengths = [n + 1 for n in lengths]
        k_view, v_view = cache.views(lengths)
        kv_lens = torch.tensor(lengths, device="cuda", dtype=torch.int32)
        attended = backend.decode(q[:, 0], k_view, v_view, kv_lens)  # [b, h_q, d]
        y = x[:, 0] + attended.reshape(batch, HEADS_Q * HEAD_DIM) @ w.wo
        logits = _logits(w, y)
    return torch.stack(generated, 1), torch.stack(all_logits, 1)


@torch.no_grad()
def test_greedy_decode_with_a_growing_kv_cache_gives_the_reference_tokens():
    w = Weights.random(seed=3).to(torch.bfloat16)
    prompts = [[5, 17, 3, 40, 22, 9, 31], [11, 2, 2, 8], [47, 30, 12, 1, 0, 19, 25, 33, 6, 14]]
    tokens, logits = _generate(w, CUKILN, prompts, steps=16)
    ref_tokens, ref_logits = _generate(w, REFERENCE, prompts, steps=16)

    assert tokens.shape == (3, 16)
    assert torch.equal(tokens, ref_tokens), f"cukiln {tokens.tolist()}\nreference {ref_tokens.tolist()}"
    # The tokens agree because the logits do, not by luck of wide margins.
    assert (logits - ref_logits).abs().max().item() < 0.05 * ref_logits.abs().max().item()
    assert len({tuple(row) for row in tokens.tolist()}) == 3, "rows generated identical text: a weak test"
