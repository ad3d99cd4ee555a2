"""``cukiln.Rotary``: RoPE's angle arguments as one value, taken by every op that rotates (rope, rope_qk, kv_append,
decode_step) as ``rotary=``.

A model's rotary embedding is fixed once (its table or frequencies, its pairing, the span it rotates, its scaling);
the positions are each call's. ``Rotary`` holds the fixed part: the angle source (exactly one of ``freqs``, ``cos``
and ``sin``, ``cos_sin_cache``, ``inv_freq``, ``base``), ``scale`` (positions times it, for inv_freq and base),
``mscale`` (cos and sin times it), ``interleaved`` (pairs (2i, 2i + 1) rather than (i, i + d/2)), ``rotary_dim`` and
``rotary_offset`` (the span rotated), and M-RoPE's ``mrope_section`` and ``mrope_interleaved`` (rope and rope_qk
only). Each field means what the loose argument of the same name means (cukiln.rope's docstring); the loose
arguments stay, as a convenience that builds the same call, and a call gives one form or the other.
``Rotary(**cukiln.rope_recipe(...))`` turns a model config's rope parameters into one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .schema import Arg


@dataclass(frozen=True)
class Rotary:
    freqs: object = None
    cos: object = None
    sin: object = None
    cos_sin_cache: object = None
    inv_freq: object = None
    base: float | None = None
    scale: float = 1.0
    mscale: float = 1.0
    interleaved: bool = False
    rotary_dim: int | None = None
    rotary_offset: int = 0
    mrope_section: tuple | None = None
    mrope_interleaved: bool = False


FIELDS = tuple(f.name for f in fields(Rotary))
_DEFAULTS = {f.name: f.default for f in fields(Rotary)}
# A field's loose argument where it is named otherwise (scale is attention's logit scale in cukiln)
LOOSE = {"scale": "rope_scale"}


def loose_name(field_name: str) -> str:
    return LOOSE.get(field_name, field_name)


def unpack(who: str, spec, loose: tuple, taken: tuple[str, ...]):
    """The loose arguments ``taken`` (fields, in FIELDS' order) from ``spec`` (a Rotary), for a call that gave
    ``loose`` (their values): TypeError where the call gave both forms or the spec sets a field the op does not
    take."""
    if not isinstance(spec, Rotary):
        raise TypeError(f"rotary: expected a cukiln.Rotary, got {type(spec).__name__}")
    given = [loose_name(f) for f, v in zip(taken, loose) if not _is_default(v, _DEFAULTS[f])]
    if given:
        raise TypeError(f"rotary: {who} takes the angles as a Rotary or as loose arguments, not both; got rotary= "
                        f"and {', '.join(given)}")
    extra = [f for f in FIELDS if f not in taken and not _is_default(getattr(spec, f), _DEFAULTS[f])]
    if extra:
        raise TypeError(f"rotary: {who} takes no {', '.join(extra)}")
    return tuple(getattr(spec, f) for f in taken)


def _is_default(value, default) -> bool:
    return value is default or (type(value) in (int, float, bool) and type(default) in (int, float, bool)
                                and value == default and type(value) is type(default))


def args(*, mrope: bool, doc_scale: str = "positions times it, for inv_freq and base angles") -> tuple[Arg, ...]:
    """The loose angle arguments of an op that rotates, declared once (a schema's group); ``mrope``: with M-RoPE's
    two."""
    from .tensors import FLOATS

    declared = (
        Arg("rotary", "Rotary", None, "the angle arguments below as one cukiln.Rotary (give one form or the other)",
            optional=True),
        Arg("freqs", "Tensor", None, "angles, exactly one source of: freqs [max_pos, rotary_dim] fp32 angles (sin and "
            "cos taken in the kernel; [max_pos, 1, 1, width] tables are taken too)", optional=True,
            dtypes=("fp32",), refuse_grad=True),
        Arg("cos", "Tensor", None, "a cos table [max_pos, rotary_dim] or [max_pos, rotary_dim/2] (one entry a pair), "
            "fp32 or the input's dtype", optional=True, dtypes=FLOATS, refuse_grad=True),
        Arg("sin", "Tensor", None, "the sin table beside cos, alike", optional=True, dtypes=FLOATS, refuse_grad=True),
        Arg("cos_sin_cache", "Tensor", None, "[max_pos, rotary_dim], the packed table of vLLM, SGLang and FlashInfer "
            "(each row the pairs' cos, then their sin), fp32 or the input's dtype", optional=True, dtypes=FLOATS,
            refuse_grad=True),
        Arg("inv_freq", "Tensor", None, "[rotary_dim/2] fp32: angle = position * rope_scale * inv_freq[i]",
            optional=True, dtypes=("fp32",), refuse_grad=True),
        Arg("base", "float", None, "inv_freq[i] = base ** (-2i / rotary_dim), computed in the kernel (the frequencies "
            "follow rotary_dim, not the head dim)", optional=True),
        Arg("rope_scale", "float", 1.0, doc_scale),
        Arg("mscale", "float", 1.0, "cos and sin times it, whatever their source (YaRN's and LongRoPE's attention "
            "factor)"),
        Arg("interleaved", "bool", False, "pairs (2i, 2i + 1) rather than (i, i + rotary_dim/2)"),
        Arg("rotary_dim", "int", None, "the features rotated: default the table's width (freqs, cos_sin_cache), "
            "2 * len(inv_freq) or d (base); a cos/sin table of width w reads as full (w) or half width (2w), and "
            "where both fit the head the call must give rotary_dim", optional=True),
        Arg("rotary_offset", "int", 0, "the rotated span's first feature (vLLM's rope_dim_offset; MLA's rotary part "
            "at the end of the head); the features outside the span pass through"),
    )
    if mrope:
        declared += (
            Arg("mrope_section", "int[]", None, "M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): (t, h, w), the rotary "
                "pairs that take each of a token's three positions (t + h + w = rotary_dim / 2), with positions "
                "[3, s] or [3, b, s] ([3, t] for thd); chunked sections: pairs [0, t) take the time position, "
                "[t, t + h) the height, the rest the width", optional=True),
            Arg("mrope_interleaved", "bool", False, "M-RoPE as Qwen3-VL interleaves it: pair i takes the height when "
                "i % 3 == 1 and i < 3h, the width when i % 3 == 2 and i < 3w, else the time"),
        )
    return declared
