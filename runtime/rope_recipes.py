"""cukiln.rope_recipes: the RoPE scaling recipes of Hugging Face model configs, turned into cukiln.rope's arguments.

A model config carries its rotary recipe as a dict: ``config.rope_parameters`` in transformers 5, or in older
configs the ``rope_scaling`` dict with ``rope_theta`` beside it (merge the two: ``{**rope_scaling, "rope_theta":
theta}``). ``rope_recipe`` reads that dict and returns the keyword arguments of ``cukiln.rope`` that reproduce
it: ``inv_freq`` (float32 [rotary_dim / 2]: angle = position * inv_freq[i]), ``rotary_dim``, and ``mscale``, the
attention factor that multiplies cos and sin (1.0 for the recipes that have none).

Recipes: ``default``, ``linear``, ``dynamic`` (NTK-aware), ``yarn`` (with DeepSeek's ``mscale`` /
``mscale_all_dim`` and ``truncate``), ``longrope`` (Phi-3; the legacy name ``su`` is read as longrope) and
``llama3`` (Llama 3.1's smoothed frequencies). Everything is computed in float32 with the same operations, in
the same order, as transformers' ``ROPE_INIT_FUNCTIONS`` (and the models' ``compute_default_rope_parameters``),
so the frequencies match transformers' to the bit on the same device.

Length-dependent recipes are decided on the host, from the caller's ``seq_len`` (the longest sequence the
call covers: the largest position + 1, which is what transformers' forward uses):

- ``longrope``: the frequencies divide by ``long_factor`` when ``seq_len > original_max_position_embeddings``,
  else by ``short_factor`` (``seq_len=None`` gives the short factors, as transformers' init does). The switch is
  made here, on the host, from ``seq_len``: the kernel sees one ``inv_freq``; call again with the new length when
  a sequence grows past the original length. The attention factor does not depend on the length.
- ``dynamic``: the base grows with ``seq_len`` beyond ``max_position_embeddings``; ``seq_len=None`` or a
  length within ``max_position_embeddings`` gives the unscaled frequencies, as transformers' init does.

What the recipes leave out: DeepSeek's models also multiply the softmax scale by ``yarn_get_mscale(factor,
mscale_all_dim) ** 2`` inside their attention; that is the attention's business, not the rotation's, and is not
part of ``mscale`` here (transformers keeps it in the attention module too).

Torch is imported on call, so importing cukiln stays free of it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping

_ALIASES = {"su": "longrope"}  # the name Phi-3's first checkpoints used (transformers' Phi3Config maps it too)


def rope_recipe(rope_parameters, *, head_dim, max_position_embeddings, partial_rotary_factor=1.0, seq_len=None,
                device=None):
    """The cukiln.rope arguments that reproduce a Hugging Face RoPE recipe.

    rope_parameters: the config's dict (``rope_type`` or the older ``type``, absent meaning ``default``;
    ``rope_theta``, required; the recipe's own keys: ``factor``, ``original_max_position_embeddings``,
    ``low_freq_factor``, ``high_freq_factor``, ``beta_fast``, ``beta_slow``, ``attention_factor``,
    ``short_factor``, ``long_factor``, ``mscale``, ``mscale_all_dim``, ``truncate``). Other keys are ignored.
    head_dim: the attention head size; rotary_dim = int(head_dim * partial_rotary_factor), which must be even,
    and the frequencies follow rotary_dim (as transformers computes them). A ``partial_rotary_factor`` inside
    the dict (where transformers 5 puts it) is used when the argument is left at 1.0; the two must agree when
    both are given.
    max_position_embeddings: the config's (dynamic NTK scales beyond it; yarn and longrope derive their
    ``factor`` from its ratio to ``original_max_position_embeddings`` when the dict has none).
    seq_len: the longest sequence the frequencies serve (largest position + 1), read by ``dynamic`` and
    ``longrope`` only; see the module docstring.

    device: where inv_freq is returned (the tensors' device, e.g. "cuda"); None keeps it on the CPU.

    Returns ``{"inv_freq": float32 tensor [rotary_dim / 2], "rotary_dim": int, "mscale": float}``, to pass as
    ``cukiln.rope(x, positions=..., **recipe)``; with ``mrope_section`` in the dict (M-RoPE: Qwen2-VL and later)
    also ``mrope_section`` and ``mrope_interleaved`` (the dict's, default False: Qwen3-VL's configs set it), and
    positions must then be the [3, ...] time/height/width rows. Raises ValueError for an unknown recipe, a missing or
    malformed parameter (naming it) or an odd rotary_dim.

    Decisions beyond transformers: ``original_max_position_embeddings`` is required by yarn, longrope and llama3
    (transformers silently falls back to ``max_position_embeddings``, which gives wrong frequencies for a raw
    Phi-3 ``rope_scaling`` dict, whose original length sits at the top level of config.json); ``rope_theta`` is
    required (transformers' default differs between models); longrope's factor lists must have rotary_dim / 2
    entries and llama3's high_freq_factor must differ from low_freq_factor (transformers only warns).
    """
    import torch

    if not isinstance(rope_parameters, Mapping):
        raise TypeError(f"rope_recipe: rope_parameters must be a dict, got {type(rope_parameters).__name__}")
    params = dict(rope_parameters)
    recipe = _recipe_name(params)
    head_dim = _positive_int("head_dim", head_dim)
    max_position_embeddings = _positive_int("max_position_embeddings", max_position_embeddings)
    rotary_dim = _rotary_dim(params, head_dim, partial_rotary_factor)
    if seq_len is not None:
        seq_len = _length(seq_len)
    base = _number(params, "rope_theta", recipe)
    if base <= 1:
        raise ValueError(f"rope_recipe: rope_theta must be > 1, got {base}")

    build = _BUILDERS[recipe]
    inv_freq, mscale = build(torch, params, recipe, base, rotary_dim, max_position_embeddings, seq_len)
    # Computed on the CPU (transformers' init runs there, so the frequencies match its to the bit), then moved
    arguments = {"inv_freq": inv_freq.contiguous().to(device), "rotary_dim": rotary_dim, "mscale": float(mscale)}
    return {**arguments, **_sections(params, rotary_dim)}


def _sections(params: dict, rotary_dim: int) -> dict:
    """M-RoPE's arguments where the dict names sections (Qwen2-VL and later): mrope_section, and
    mrope_interleaved where the dict sets it (Qwen3-VL's configs do)."""
    if "mrope_section" not in params:
        return {}
    section = params["mrope_section"]
    if not isinstance(section, (list, tuple)) or len(section) != 3 or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in section):
        raise ValueError(f"rope_recipe: mrope_section must be three ints >= 0, got {section!r}")
    if sum(section) != rotary_dim // 2:
        raise ValueError(f"rope_recipe: mrope_section {list(section)} must sum to rotary_dim / 2 = {rotary_dim // 2}")
    interleaved = params.get("mrope_interleaved", False)
    if not isinstance(interleaved, bool):
        raise ValueError(f"rope_recipe: mrope_interleaved must be a bool, got {interleaved!r}")
    return {"mrope_section": tuple(section), "mrope_interleaved": interleaved}


# --- argument checks ---------------------------------------------------------------------------------------------

def _recipe_name(params: dict) -> str:
    # transformers reads rope_type first and falls back to the older `type`, then to "default"
    name = params.get("rope_type")
    if name is None:
        name = params.get("type")
    if name is None:
        name = "default"
    name = _ALIASES.get(name, name)
    if name not in _BUILDERS:
        raise ValueError(f"rope_recipe: unknown rope_type {name!r}; supported: {', '.join(_BUILDERS)}")
    return name


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"rope_recipe: {name} must be a positive int, got {value!r}")
    return value


def _length(seq_len) -> int:
    # operator.index takes ints and one-element integer tensors (max(position_ids) + 1), not floats or bools
    try:
        value = seq_len if isinstance(seq_len, bool) else operator.index(seq_len)
    except TypeError:
        value = seq_len
    return _positive_int("seq_len", value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(params: dict, key: str, recipe: str, *, hint: str = ""):
    """A required numeric parameter (absent and None both count as missing, as in a config.json)."""
    value = params.get(key)
    if value is None:
        raise ValueError(f"rope_recipe: the {recipe!r} recipe needs {key!r} in rope_parameters{hint}")
    if not _is_number(value):
        raise ValueError(f"rope_recipe: {key} must be a finite number, got {value!r}")
    return value


def _optional_number(params: dict, key: str):
    value = params.get(key)
    if value is not None and not _is_number(value):
        raise ValueError(f"rope_recipe: {key} must be a finite number, got {value!r}")
    return value


def _factor(params: dict, recipe: str, fallback=None):
    """The scaling factor; yarn and longrope derive it from the lengths when the dict has none (fallback)."""
    factor = params.get("factor")
    if factor is None and fallback is not None:
        return fallback
    factor = _number(params, "factor", recipe)
    if factor <= 0:
        raise ValueError(f"rope_recipe: factor must be > 0, got {factor}")
    return factor


def _original_length(params: dict, recipe: str) -> int:
    value = _number(params, "original_max_position_embeddings", recipe,
                    hint=" (Phi-3 keeps it at the top level of config.json: merge it into the dict)")
    if value <= 0:
        raise ValueError(f"rope_recipe: original_max_position_embeddings must be > 0, got {value}")
    return value


def _rotary_dim(params: dict, head_dim: int, partial_rotary_factor) -> int:
    in_dict = params.get("partial_rotary_factor")
    for name, value in (("partial_rotary_factor", partial_rotary_factor),
                        ("rope_parameters['partial_rotary_factor']", in_dict)):
        if value is not None and (not _is_number(value) or not 0 < value <= 1):
            raise ValueError(f"rope_recipe: {name} must be in (0, 1], got {value!r}")
    if in_dict is not None:
        # transformers 5 keeps the factor in rope_parameters; the argument's default (1.0) defers to it
        if partial_rotary_factor != 1.0 and partial_rotary_factor != in_dict:
            raise ValueError(f"rope_recipe: partial_rotary_factor={partial_rotary_factor} disagrees with "
                             f"rope_parameters['partial_rotary_factor']={in_dict}")
        partial_rotary_factor = in_dict
    rotary_dim = int(head_dim * partial_rotary_factor)  # truncation, as transformers computes `dim`
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rope_recipe: rotary_dim = int(head_dim * partial_rotary_factor) = int({head_dim} * "
                         f"{partial_rotary_factor}) = {rotary_dim} must be even and >= 2 (features rotate in pairs)")
    return rotary_dim


# --- the recipes -------------------------------------------------------------------------------------------------
# Each returns (inv_freq float32 [rotary_dim / 2], attention factor). Python scalars stay Python floats (double)
# and tensors stay float32 exactly where transformers has them so, so the roundings are the same ones.

def _exponents(torch, rotary_dim: int):
    """2i / rotary_dim for i < rotary_dim / 2, in float32 (the integers are exact, the division rounds once)."""
    return torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(torch.float32) / rotary_dim


def _plain_inv_freq(torch, base, rotary_dim: int):
    # base ** (-2i/d) written as 1 / base ** (2i/d): transformers' order, which rounds differently from pow(-x)
    return 1.0 / (base ** _exponents(torch, rotary_dim))


def _default(torch, params, recipe, base, rotary_dim, max_len, seq_len):
    return _plain_inv_freq(torch, base, rotary_dim), 1.0


def _linear(torch, params, recipe, base, rotary_dim, max_len, seq_len):
    # Position interpolation: position / factor, folded into the frequencies (angle = position * inv_freq)
    factor = _factor(params, recipe)
    return _plain_inv_freq(torch, base, rotary_dim) / factor, 1.0


def _dynamic(torch, params, recipe, base, rotary_dim, max_len, seq_len):
    # NTK-aware scaling: past max_position_embeddings the base grows so that the lowest frequency stretches to
    # the new length while the highest stays put. Within the trained length (or without seq_len) the scale term
    # is factor * L / L - (factor - 1), i.e. 1 up to the rounding that transformers' init has too.
    factor = _factor(params, recipe)
    if rotary_dim == 2:
        raise ValueError("rope_recipe: the 'dynamic' recipe needs rotary_dim > 2 (its exponent is d / (d - 2))")
    length = max_len if seq_len is None else max(seq_len, max_len)
    # Python doubles, as transformers computes the new base for an int seq_len (its forward passes a tensor and
    # computes this in float32, which can differ from the int path in the last bits)
    scaled_base = base * ((factor * length / max_len) - (factor - 1)) ** (rotary_dim / (rotary_dim - 2))
    return _plain_inv_freq(torch, scaled_base, rotary_dim), 1.0


def _yarn_mscale(scale, mscale=1):
    """YaRN's attention temperature: 0.1 * mscale * ln(scale) + 1, and 1 when the context is not extended."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn(torch, params, recipe, base, rotary_dim, max_len, seq_len):
    original = _original_length(params, recipe)
    # DeepSeek-V3 style configs may leave factor out: the extension is then max / original (transformers' rule)
    factor = _factor(params, recipe, fallback=max_len / original)
    attention_factor = _optional_number(params, "attention_factor")
    mscale = _optional_number(params, "mscale")
    mscale_all_dim = _optional_number(params, "mscale_all_dim")

    if attention_factor is None:
        # DeepSeek: the ratio of two temperatures (both must be set and non-zero, else the paper's plain one;
        # transformers ignores an `mscale` given alone, and so does this)
        if mscale and mscale_all_dim:
            attention_factor = float(_yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim))
        else:
            attention_factor = _yarn_mscale(factor)

    # Defaults of the paper; a 0 or None counts as unset, as in transformers
    beta_fast = _optional_number(params, "beta_fast") or 32
    beta_slow = _optional_number(params, "beta_slow") or 1
    # transformers reads truncate with .get("truncate", True): absent means True, an explicit None means False
    truncate = params.get("truncate", True)

    def dimension_of(rotations):
        # The (fractional) pair index whose wavelength fits `rotations` turns into the original context
        return (rotary_dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = dimension_of(beta_fast), dimension_of(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # the ramp below would divide by zero

    # Pairs below `low` rotate fast enough to keep their frequency (extrapolation), pairs above `high` are
    # interpolated (divided by factor), and a linear ramp blends the two in between.
    ramp = ((torch.arange(rotary_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # weight of the unscaled frequency; transformers' float32 steps, kept as they round
    wavelength_scale = base ** _exponents(torch, rotary_dim)
    extrapolated = 1.0 / wavelength_scale
    interpolated = 1.0 / (factor * wavelength_scale)
    inv_freq = interpolated * (1 - keep) + extrapolated * keep
    return inv_freq, attention_factor


def _factor_list(torch, params, key, recipe, rotary_dim):
    values = params.get(key)
    if values is None:
        raise ValueError(f"rope_recipe: the {recipe!r} recipe needs {key!r} in rope_parameters")
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or \
            not all(_is_number(v) for v in values):
        raise ValueError(f"rope_recipe: {key} must be a list of numbers, got {values!r}")
    if len(values) != rotary_dim // 2:
        raise ValueError(f"rope_recipe: {key} must have rotary_dim / 2 = {rotary_dim // 2} entries, "
                         f"got {len(values)}")
    return torch.tensor(list(values), dtype=torch.float32)


def _longrope(torch, params, recipe, base, rotary_dim, max_len, seq_len):
    original = _original_length(params, recipe)
    short = _factor_list(torch, params, "short_factor", recipe, rotary_dim)
    long = _factor_list(torch, params, "long_factor", recipe, rotary_dim)
    # Phi-3 gives no factor: the extension is max / original (transformers' rule)
    factor = _factor(params, recipe, fallback=max_len / original)
    attention_factor = _optional_number(params, "attention_factor")
    if attention_factor is None:
        # LongRoPE's scale: sqrt(1 + ln(factor) / ln(original length)), whatever the current length
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    # The host-side length switch: long factors only once the sequence outgrows the original context (strictly,
    # as transformers' `seq_len > original_max_position_embeddings`); no seq_len means the short ones
    per_pair = long if seq_len is not None and seq_len > original else short
    inv_freq = 1.0 / (per_pair * base ** _exponents(torch, rotary_dim))
    return inv_freq, attention_factor


def _llama3(torch, params, recipe, base, rotary_dim, max_len, seq_len):
    factor = _factor(params, recipe)
    low_freq_factor = _number(params, "low_freq_factor", recipe)
    high_freq_factor = _number(params, "high_freq_factor", recipe)
    original = _original_length(params, recipe)
    if high_freq_factor == low_freq_factor:
        raise ValueError(f"rope_recipe: high_freq_factor ({high_freq_factor}) must differ from low_freq_factor "
                         f"(the smoothing divides by their difference)")

    inv_freq = _plain_inv_freq(torch, base, rotary_dim)
    # Wavelengths shorter than original / high_freq_factor are left alone, those longer than
    # original / low_freq_factor are divided by factor, and those in between are blended smoothly.
    long_wavelength = original / low_freq_factor
    short_wavelength = original / high_freq_factor
    wavelength = 2 * math.pi / inv_freq
    scaled = torch.where(wavelength > long_wavelength, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    in_between = (wavelength >= short_wavelength) & (wavelength <= long_wavelength)
    return torch.where(in_between, blended, scaled), 1.0


_BUILDERS = {"default": _default, "linear": _linear, "dynamic": _dynamic, "yarn": _yarn, "longrope": _longrope,
             "llama3": _llama3}
