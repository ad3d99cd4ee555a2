"""cukiln.decode_step: one decode step of an attention layer, the new token appended and attended to: kv_append
(RoPE on the new query and key, the rotated key and the value written into the caches at each row's length), then
decode_attention over each row's keys including the new one. Two launches back to back; on GPUs with programmatic
launches (sm_90 on) the attention is scheduled while the append runs and waits for its writes.
"""

from __future__ import annotations

from .decode_api import plan_call as plan_decode_call
from .decode_api import run_decode
from .kv_append_api import run_kv_append
from .plan_cache import PlanCache

# The decode calls whose arguments were validated before any append (by their metadata): a step validates both
# launches before it writes anything, and a repeated step skips the attention's separate validation.
_VALIDATED = PlanCache()
_torch = None


def decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, positions=None,
                freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, rope_scale=1.0,
                mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0, scale=None, softcap=None,
                num_splits=None, advance_lens=False, out=None, return_lse=False):
    """Append each row's new token to the caches (rotated by RoPE, at slot kv_lens[i]) and attend to keys
    [kv_start[i], kv_lens[i] + 1) with the rotated query: the attention output [b, h_q, d] (and its log-sum-exp
    with ``return_lse``).

    q: [b, h_q, d] (one new token a row), k_new, v_new: [b, h_kv, d], caches and lengths as cukiln.kv_append and
    cukiln.decode_attention take them. The RoPE arguments are kv_append's, with its ``scale`` named ``rope_scale``
    here; ``scale`` (default 1/sqrt(d)), ``softcap``, ``num_splits``, ``out`` and ``return_lse`` are
    decode_attention's. kv_lens: an int32 [b] tensor on the device (what a captured CUDA graph wants), an int32
    CPU tensor (checked, then copied over) or an int. ``advance_lens=True`` adds 1 to kv_lens after the step (on the
    device for a device tensor: a graph replays step after step with no host work; in place for a CPU tensor; an
    int cannot be advanced). Every argument of both launches is validated before anything is written; lengths on
    the device are not read back (a row that does not fit writes nothing and gets NaN, as both ops report it).
    """
    global _torch
    torch = _torch
    if torch is None:
        import torch

        _torch = torch
    if q.ndim != 3:
        raise ValueError(f"q: expected [b, h_q, d] (one new token a row), got shape {list(q.shape)}")
    device_lens = isinstance(kv_lens, torch.Tensor) and kv_lens.device.type != "cpu"
    if advance_lens and not isinstance(kv_lens, torch.Tensor):
        raise ValueError("advance_lens: kv_lens is an int, which cannot be advanced in place; give an int32 tensor")
    if device_lens:
        lens_after = torch.empty_like(kv_lens)  # written by the append: kv_lens + 1
    elif isinstance(kv_lens, torch.Tensor):
        lens_after = kv_lens + 1  # host values: checked by both ops, copied over by each
    else:
        lens_after = kv_lens + 1 if type(kv_lens) is int else kv_lens
    _validate_attention(q, k_cache, v_cache, lens_after, kv_layout, kv_start, scale, softcap, num_splits, out,
                        return_lse)
    q_rot = run_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions,
                          lens_after if device_lens else None, freqs, cos, sin, cos_sin_cache, inv_freq, base,
                          rope_scale, mscale, interleaved, rotary_dim, rotary_offset, False, None)
    result = run_decode(q_rot, k_cache, v_cache, lens_after, kv_layout, kv_start, scale, softcap, num_splits, out,
                        return_lse)
    if advance_lens and device_lens:
        kv_lens.copy_(lens_after)
    elif advance_lens:
        kv_lens.add_(1)
    return result


def _validate_attention(q, k_cache, v_cache, lens, kv_layout, kv_start, scale, softcap, num_splits, out,
                        return_lse) -> None:
    """The attention's own validation, before the append writes anything (once per call metadata)."""
    torch = _torch
    try:
        key = tuple((t.shape, t.stride(), t.dtype, t.get_device()) if isinstance(t, torch.Tensor) else t
                    for t in (q, k_cache, v_cache, lens, kv_start, out)) + (kv_layout, scale, softcap, num_splits,
                                                                             return_lse)
        if isinstance(lens, torch.Tensor) and lens.device.type == "cpu":
            key = None  # host values: checked on every call
        elif _VALIDATED.get(key):
            return
    except TypeError:  # unhashable arguments: the validation explains
        key = None
    plan_decode_call(q, k_cache, v_cache, lens, kv_layout=kv_layout, kv_start=kv_start, scale=scale, softcap=softcap,
                     num_splits=num_splits, out=out, return_lse=return_lse)
    if key is not None:
        _VALIDATED.put(key, True)


def reference_decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None,
                          positions=None, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None,
                          rope_scale=1.0, mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0, scale=None,
                          softcap=None, num_splits=None, advance_lens=False, out=None, return_lse=False):
    """float64 decode_step: the float64 kv_append (writing the caches), then the float64 decode attention over each
    row's keys including the new one. ``num_splits`` is ignored (it changes no result)."""
    import torch

    from . import reference
    from .kv_append_api import reference_kv_append

    q_rot = reference_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout=kv_layout, kv_start=kv_start,
                                positions=positions, freqs=freqs, cos=cos, sin=sin, cos_sin_cache=cos_sin_cache,
                                inv_freq=inv_freq, base=base, scale=rope_scale, mscale=mscale,
                                interleaved=interleaved, rotary_dim=rotary_dim, rotary_offset=rotary_offset)
    lens_after = torch.as_tensor(kv_lens).to(torch.int32) + 1
    # the attention reads the rotated query as the append stores it, in q's dtype (as the rotated keys in the cache)
    result = reference.decode_attention(q_rot.to(q.dtype), k_cache, v_cache, lens_after.to(q.device), kv_layout=kv_layout,
                                        kv_start=kv_start, scale=scale, softcap=softcap, out=out,
                                        return_lse=return_lse)
    if advance_lens:
        kv_lens.add_(1)
    return result
