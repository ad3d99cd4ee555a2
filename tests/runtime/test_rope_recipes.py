"""cukiln.rope_recipe against transformers' own RoPE initialisers, recipe by recipe over grids of parameters, the
length switches of dynamic and longrope against transformers' forward, the mscale contract end to end through
the float64 reference, and every refusal (CPU; needs transformers 5)."""

from __future__ import annotations

import copy
import math
import random
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb  # noqa: E402
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding  # noqa: E402

from cukiln import reference, rope_recipe  # noqa: E402

pytestmark = pytest.mark.usefixtures("quiet_transformers")

TWO_ULP = 2.0 ** -22  # relative: 2 units in the last place of a float32 in [1, 2)


def _config(rope_parameters, head_dim, max_position_embeddings):
    return transformers.LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                                    max_position_embeddings=max_position_embeddings,
                                    rope_parameters=copy.deepcopy(rope_parameters))


def _transformers(rope_parameters, head_dim, max_position_embeddings, partial_rotary_factor, seq_len=None):
    """transformers' (inv_freq, attention_factor) for the recipe; partial_rotary_factor goes into the dict, where
    transformers 5 reads it."""
    params = dict(rope_parameters, partial_rotary_factor=partial_rotary_factor)
    config = _config(params, head_dim, max_position_embeddings)
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":
        # Not in ROPE_INIT_FUNCTIONS: each model has its own; GPT-NeoX's honours partial_rotary_factor
        return GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)


def _check(rope_parameters, head_dim, max_position_embeddings, partial_rotary_factor=1.0, seq_len=None):
    expected, attention_factor = _transformers(rope_parameters, head_dim, max_position_embeddings,
                                               partial_rotary_factor, seq_len)
    got = rope_recipe(rope_parameters, head_dim=head_dim, max_position_embeddings=max_position_embeddings,
                      partial_rotary_factor=partial_rotary_factor, seq_len=seq_len)
    assert set(got) == {"inv_freq", "rotary_dim", "mscale"}
    assert got["rotary_dim"] == int(head_dim * partial_rotary_factor) == 2 * expected.shape[0]
    assert got["inv_freq"].dtype == torch.float32 and got["inv_freq"].shape == expected.shape
    assert got["inv_freq"].is_contiguous()
    torch.testing.assert_close(got["inv_freq"], expected, rtol=TWO_ULP, atol=0)
    assert type(got["mscale"]) is float
    assert got["mscale"] == pytest.approx(float(attention_factor), rel=1e-15, abs=0)
    return got


HEAD_DIMS = (64, 128)
PARTIAL = (1.0, 0.5)


# --- default -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("theta", [10000.0, 500000.0, 1e6])
@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("head_dim", [64, 80, 96, 128, 256])
def test_default_matches_transformers(head_dim, partial, theta):
    got = _check({"rope_type": "default", "rope_theta": theta}, head_dim, 4096, partial)
    assert got["mscale"] == 1.0


@pytest.mark.parametrize("head_dim, partial", [(80, 0.4), (128, 0.25), (64, 0.75), (256, 0.25)])
def test_default_partial_factors_of_real_models(head_dim, partial):
    # Phi-2 (80 * 0.4, which is 32.000000000000004 before int()), GPT-NeoX/Pythia (0.25), ...
    _check({"rope_type": "default", "rope_theta": 10000.0}, head_dim, 2048, partial)


def test_no_rope_type_means_default():
    got = rope_recipe({"rope_theta": 10000.0}, head_dim=64, max_position_embeddings=2048)
    expected, _ = _transformers({"rope_theta": 10000.0}, 64, 2048, 1.0)
    torch.testing.assert_close(got["inv_freq"], expected, rtol=TWO_ULP, atol=0)


# --- linear ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("theta", [10000.0, 1e6])
@pytest.mark.parametrize("factor", [1.5, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_linear_matches_transformers(head_dim, partial, factor, theta):
    got = _check({"rope_type": "linear", "factor": factor, "rope_theta": theta}, head_dim, 4096, partial)
    assert got["mscale"] == 1.0


# --- dynamic (NTK) -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("theta", [10000.0, 500000.0])
@pytest.mark.parametrize("seq_len", [None, 1000, 4096, 4097, 9000, 20000])
@pytest.mark.parametrize("factor", [2.0, 3.3, 4.0])
@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_dynamic_matches_transformers(head_dim, partial, factor, seq_len, theta):
    _check({"rope_type": "dynamic", "factor": factor, "rope_theta": theta}, head_dim, 4096, partial, seq_len)


def test_dynamic_scales_only_beyond_the_trained_length():
    params = {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}
    plain = rope_recipe(params, head_dim=128, max_position_embeddings=4096)["inv_freq"]
    within = rope_recipe(params, head_dim=128, max_position_embeddings=4096, seq_len=4096)["inv_freq"]
    beyond = rope_recipe(params, head_dim=128, max_position_embeddings=4096, seq_len=8192)["inv_freq"]
    assert torch.equal(plain, within)
    assert beyond[0] == plain[0] and (beyond[1:] < plain[1:]).all()  # a larger base lowers every frequency but i=0


@pytest.mark.parametrize("seq_len", [100, 4096, 4097, 9000, 20000])
def test_dynamic_matches_transformers_forward(seq_len):
    # transformers' forward recomputes the frequencies from max(position_ids) + 1 (a tensor, so in float32:
    # a few ulp from the int path); a fresh module per length, as its cache keeps the longest length seen
    params = {"rope_type": "dynamic", "factor": 3.3, "rope_theta": 10000.0}
    module = LlamaRotaryEmbedding(_config(params, 128, 4096))
    positions = torch.arange(seq_len)[None]
    module(torch.zeros(1, seq_len, 128), positions)
    got = rope_recipe(params, head_dim=128, max_position_embeddings=4096, seq_len=seq_len)
    torch.testing.assert_close(got["inv_freq"], module.inv_freq, rtol=1e-6, atol=0)
    assert got["mscale"] == module.attention_scaling == 1.0


# --- yarn --------------------------------------------------------------------------------------------------------

YARN = {
    "qwen": ({"factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}, 131072),
    "betas-16-2": ({"factor": 8.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                    "beta_fast": 16, "beta_slow": 2}, 32768),
    "no-truncate": ({"factor": 32.0, "original_max_position_embeddings": 4096, "rope_theta": 150000.0,
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}, 131072),
    "truncate": ({"factor": 32.0, "original_max_position_embeddings": 4096, "rope_theta": 150000.0,
                  "truncate": True}, 131072),
    "deepseek-v3": ({"factor": 40.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                     "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}, 163840),
    "deepseek-v2-lite": ({"factor": 40.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                          "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32, "beta_slow": 1}, 163840),
    "deepseek-uneven": ({"factor": 40.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                         "mscale": 1.0, "mscale_all_dim": 0.5}, 163840),
    "mscale-alone": ({"factor": 16.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                      "mscale": 0.707}, 65536),
    "attention-factor": ({"factor": 16.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                          "attention_factor": 1.25}, 65536),
    "factor-from-lengths": ({"factor": None, "original_max_position_embeddings": 4096, "rope_theta": 10000.0},
                            65536),
    "factor-1": ({"factor": 1.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0}, 4096),
    "equal-betas": ({"factor": 8.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                     "beta_fast": 4, "beta_slow": 4, "truncate": False}, 32768),
    # both correction bounds clamp to pair 0: the ramp's zero-width guard (transformers' + 0.001)
    "collapsed-ramp": ({"factor": 4.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                        "beta_fast": 1000, "beta_slow": 700}, 16384),
}


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("case", sorted(YARN))
def test_yarn_matches_transformers(case, head_dim, partial):
    params, max_len = YARN[case]
    _check({"rope_type": "yarn", **params}, head_dim, max_len, partial)


@pytest.mark.parametrize("recipe, seq_len", [("default", None), ("linear", None), ("dynamic", 20000),
                                             ("yarn", None), ("longrope", 20000), ("longrope", None),
                                             ("llama3", None)])
def test_bit_identical_to_transformers_on_cpu(recipe, seq_len):
    # Same float32 operations in the same order as transformers: not merely within 2 ulp, equal
    params = {**COMPLETE[recipe], "rope_theta": 30000.0}
    if "factor" in params:
        # not a power of two: (a * b) / factor and a * (b / factor), or / factor and * (1 / factor), round apart
        params["factor"] = {"linear": 1.7, "dynamic": 3.3, "yarn": 5.0, "llama3": 6.0}[recipe]
    for partial in PARTIAL:
        if recipe == "longrope":  # factor lists sized for the rotary_dim
            params = {**_longrope_params(int(64 * partial), "phi3"), "rope_theta": 30000.0}
        expected, _ = _transformers(params, 64, 16384, partial, seq_len)
        got = _call(params, partial_rotary_factor=partial, seq_len=seq_len)
        assert torch.equal(got["inv_freq"], expected)


@pytest.mark.parametrize("case", sorted(YARN))
def test_yarn_bit_identical_to_transformers_on_cpu(case):
    params, max_len = YARN[case]
    expected, _ = _transformers({"rope_type": "yarn", **params}, 128, max_len, 1.0)
    assert torch.equal(rope_recipe({"rope_type": "yarn", **params}, head_dim=128,
                                   max_position_embeddings=max_len)["inv_freq"], expected)


def test_yarn_attention_factors():
    # The temperatures themselves, so a wrong formula fails here even if transformers changed along with it
    def mscale(case):
        params, max_len = YARN[case]
        return rope_recipe({"rope_type": "yarn", **params}, head_dim=64, max_position_embeddings=max_len)["mscale"]

    assert mscale("qwen") == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)
    assert mscale("deepseek-v3") == 1.0  # equal mscale and mscale_all_dim cancel
    assert mscale("deepseek-uneven") == pytest.approx((0.1 * math.log(40) + 1) / (0.05 * math.log(40) + 1))
    assert mscale("mscale-alone") == pytest.approx(0.1 * math.log(16.0) + 1.0, rel=1e-15)
    assert mscale("attention-factor") == 1.25
    assert mscale("factor-from-lengths") == pytest.approx(0.1 * math.log(16.0) + 1.0, rel=1e-15)
    assert mscale("factor-1") == 1.0


def test_yarn_truncate_changes_the_ramp():
    base = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "rope_theta": 150000.0}
    cut = rope_recipe(base, head_dim=64, max_position_embeddings=131072)["inv_freq"]
    uncut = rope_recipe({**base, "truncate": False}, head_dim=64, max_position_embeddings=131072)["inv_freq"]
    assert not torch.equal(cut, uncut)


# --- longrope (Phi-3) --------------------------------------------------------------------------------------------

def _longrope_params(rotary_dim, variant):
    rng = random.Random(rotary_dim)  # deterministic lists, one per rotary_dim
    params = {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 4096,
              "short_factor": [1.0 + rng.random() * 0.2 for _ in range(rotary_dim // 2)],
              "long_factor": [1.0 + rng.random() * 60.0 for _ in range(rotary_dim // 2)]}
    if variant == "factor":
        params["factor"] = 8.0
    elif variant == "attention-factor":
        params["attention_factor"] = 1.1
    return params


@pytest.mark.parametrize("variant", ["phi3", "factor", "attention-factor"])
@pytest.mark.parametrize("seq_len", [None, 100, 4096, 4097, 100000])
@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("head_dim", [64, 96, 128])
def test_longrope_matches_transformers(head_dim, partial, seq_len, variant):
    params = _longrope_params(int(head_dim * partial), variant)
    got = _check(params, head_dim, 131072, partial, seq_len)
    expected = {"phi3": math.sqrt(1 + math.log(131072 / 4096) / math.log(4096)),  # factor = max / original
                "factor": math.sqrt(1 + math.log(8) / math.log(4096)),
                "attention-factor": 1.1}[variant]
    assert got["mscale"] == pytest.approx(expected, rel=1e-15)


def test_longrope_switches_strictly_past_the_original_length():
    params = _longrope_params(96, "phi3")
    at = {n: rope_recipe(params, head_dim=96, max_position_embeddings=131072, seq_len=n)["inv_freq"]
          for n in (None, 4096, 4097)}
    plain = rope_recipe({"rope_theta": 10000.0}, head_dim=96, max_position_embeddings=131072)["inv_freq"]
    short = torch.tensor(params["short_factor"], dtype=torch.float32)
    long = torch.tensor(params["long_factor"], dtype=torch.float32)
    assert torch.equal(at[None], at[4096])
    torch.testing.assert_close(at[4096], plain / short, rtol=4 * TWO_ULP, atol=0)
    torch.testing.assert_close(at[4097], plain / long, rtol=4 * TWO_ULP, atol=0)


def test_longrope_host_switch_matches_transformers_forward():
    # Phi-3-mini-128k's shape, through Phi3Config (original length at the top level) and its rotary module, whose
    # forward switches on max(position_ids) + 1: our seq_len; cos/sin are compared as the module returns them
    params = _longrope_params(96, "phi3")
    rope_scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "original_max_position_embeddings")}
    config = transformers.Phi3Config(hidden_size=3072, num_attention_heads=32, max_position_embeddings=131072,
                                     original_max_position_embeddings=4096, rope_theta=10000.0,
                                     rope_parameters=copy.deepcopy(rope_scaling))
    module = Phi3RotaryEmbedding(config)
    for seq_len in (100, 4096, 4097, 5000, 100):  # one module: it switches back and forth
        positions = torch.arange(seq_len)[None]
        cos, sin = module(torch.zeros(1, seq_len, 96), positions)
        got = rope_recipe(params, head_dim=96, max_position_embeddings=131072, seq_len=seq_len)
        torch.testing.assert_close(got["inv_freq"], module.inv_freq, rtol=TWO_ULP, atol=0)
        assert got["mscale"] == module.attention_scaling
        angles = positions[..., None].float() * got["inv_freq"]
        angles = torch.cat((angles, angles), dim=-1)
        torch.testing.assert_close(cos, angles.cos() * got["mscale"], rtol=TWO_ULP, atol=1e-7)
        torch.testing.assert_close(sin, angles.sin() * got["mscale"], rtol=TWO_ULP, atol=1e-7)


def test_su_is_longrope():
    params = _longrope_params(64, "phi3")
    for seq_len in (None, 5000):
        a = rope_recipe(params, head_dim=64, max_position_embeddings=131072, seq_len=seq_len)
        b = rope_recipe({**params, "rope_type": "su"}, head_dim=64, max_position_embeddings=131072, seq_len=seq_len)
        assert torch.equal(a["inv_freq"], b["inv_freq"]) and a["mscale"] == b["mscale"]


# --- llama3 ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("theta", [500000.0, 10000.0])
@pytest.mark.parametrize("factor, low, high, original", [(8.0, 1.0, 4.0, 8192), (32.0, 1.0, 4.0, 8192),
                                                         (16.0, 2.0, 8.0, 2048), (6.0, 1.0, 2.0, 4096)])
@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_llama3_matches_transformers(head_dim, partial, factor, low, high, original, theta):
    params = {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
              "original_max_position_embeddings": original, "rope_theta": theta}
    got = _check(params, head_dim, 131072, partial)
    assert got["mscale"] == 1.0


def test_llama3_has_all_three_bands():
    # Llama 3.1 8B: some frequencies kept, some divided by 8, some blended; the grid above covers all three
    params = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192, "rope_theta": 500000.0}
    got = rope_recipe(params, head_dim=128, max_position_embeddings=131072)["inv_freq"]
    plain = rope_recipe({"rope_theta": 500000.0}, head_dim=128, max_position_embeddings=131072)["inv_freq"]
    ratio = plain / got
    kept, divided = ratio == 1, (ratio - 8).abs() < 1e-5
    blended = ~kept & ~divided
    assert kept.any() and divided.any() and blended.any()
    assert ((ratio[blended] > 1) & (ratio[blended] < 8)).all()


# --- the older rope_scaling dict and partial_rotary_factor's two homes -----------------------------------------

@pytest.mark.parametrize("rope_scaling", [
    {"type": "linear", "factor": 2.0},
    {"type": "dynamic", "factor": 4.0},
    {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
], ids=lambda d: d.get("type", d.get("rope_type")))
def test_older_rope_scaling_dict_merged_with_rope_theta(rope_scaling):
    # transformers 5 still reads `rope_scaling` + `rope_theta` (config.json of older checkpoints)
    config = transformers.LlamaConfig(hidden_size=512, num_attention_heads=4, head_dim=128,
                                      max_position_embeddings=131072, rope_theta=500000.0,
                                      rope_scaling=copy.deepcopy(rope_scaling))
    name = config.rope_parameters["rope_type"]
    expected, attention_factor = ROPE_INIT_FUNCTIONS[name](config, None, seq_len=200000)
    got = rope_recipe({**rope_scaling, "rope_theta": 500000.0}, head_dim=128, max_position_embeddings=131072,
                      seq_len=200000)
    torch.testing.assert_close(got["inv_freq"], expected, rtol=TWO_ULP, atol=0)
    assert got["mscale"] == pytest.approx(attention_factor, rel=1e-15)


def test_partial_rotary_factor_read_from_the_dict():
    params = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    expected, _ = _transformers(params, 128, 4096, 0.5)
    from_dict = rope_recipe(params, head_dim=128, max_position_embeddings=4096)
    both = rope_recipe(params, head_dim=128, max_position_embeddings=4096, partial_rotary_factor=0.5)
    assert from_dict["rotary_dim"] == both["rotary_dim"] == 64
    torch.testing.assert_close(from_dict["inv_freq"], expected, rtol=TWO_ULP, atol=0)
    assert torch.equal(from_dict["inv_freq"], both["inv_freq"])
    with pytest.raises(ValueError, match="disagrees"):
        rope_recipe(params, head_dim=128, max_position_embeddings=4096, partial_rotary_factor=0.25)


def test_seq_len_may_be_a_position_tensor_maximum():
    params = _longrope_params(64, "phi3")
    positions = torch.arange(6000)
    a = rope_recipe(params, head_dim=64, max_position_embeddings=131072, seq_len=positions.max() + 1)
    b = rope_recipe(params, head_dim=64, max_position_embeddings=131072, seq_len=6000)
    assert torch.equal(a["inv_freq"], b["inv_freq"])


# --- the contract, end to end: the float64 reference with inv_freq, times mscale, is transformers' rotation --------

@pytest.mark.parametrize("case", ["deepseek-uneven", "qwen"])
def test_reference_rotation_times_mscale_is_transformers_rotation(case):
    params, max_len = YARN[case]
    params = {"rope_type": "yarn", **params}
    got = rope_recipe(params, head_dim=64, max_position_embeddings=max_len)
    assert got["mscale"] != 1.0
    module = LlamaRotaryEmbedding(_config(params, 64, max_len))
    b, s, h, d = 2, 50, 3, 64
    x = torch.randn(b, s, h, d, dtype=torch.float64)
    positions = torch.arange(s)[None].expand(b, s)
    cos, sin = module(x, positions)
    hf, _ = apply_rotary_pos_emb(x.transpose(1, 2), x.transpose(1, 2), cos, sin)
    ours = reference.rope(x, inv_freq=got["inv_freq"], rotary_dim=got["rotary_dim"], layout="bshd")
    torch.testing.assert_close(hf.transpose(1, 2), ours * got["mscale"], rtol=0, atol=1e-5)


# --- refusals ----------------------------------------------------------------------------------------------------

COMPLETE = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0},
    "longrope": _longrope_params(64, "phi3"),
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192, "rope_theta": 500000.0},
}


def _call(params, head_dim=64, **kw):
    return rope_recipe(params, head_dim=head_dim, max_position_embeddings=kw.pop("max_position_embeddings", 16384),
                       **kw)


@pytest.mark.parametrize("recipe", sorted(COMPLETE))
def test_complete_parameters_are_accepted(recipe):
    assert _call(COMPLETE[recipe], seq_len=20000)["inv_freq"].shape == (32,)


@pytest.mark.parametrize("recipe, key", [
    ("linear", "factor"), ("dynamic", "factor"),
    ("yarn", "original_max_position_embeddings"),
    ("longrope", "original_max_position_embeddings"), ("longrope", "short_factor"), ("longrope", "long_factor"),
    ("llama3", "factor"), ("llama3", "low_freq_factor"), ("llama3", "high_freq_factor"),
    ("llama3", "original_max_position_embeddings"),
] + [(recipe, "rope_theta") for recipe in sorted(COMPLETE)])
@pytest.mark.parametrize("how", ["absent", "None"])
def test_missing_required_parameter_is_named(recipe, key, how):
    params = copy.deepcopy(COMPLETE[recipe])
    if how == "absent":
        del params[key]
    else:
        params[key] = None
    with pytest.raises(ValueError, match=f"{recipe!r} recipe needs {key!r}"):
        _call(params, seq_len=20000)


def test_missing_original_length_points_at_phi3s_top_level_field():
    params = {k: v for k, v in COMPLETE["longrope"].items() if k != "original_max_position_embeddings"}
    with pytest.raises(ValueError, match="top level of config.json"):
        _call(params)


@pytest.mark.parametrize("name", ["mrope", "ntk-by-parts", "proportional", "Linear", ""])
@pytest.mark.parametrize("key", ["rope_type", "type"])
def test_unknown_recipe_is_named(name, key):
    with pytest.raises(ValueError, match=f"unknown rope_type {name!r}"):
        _call({key: name, "rope_theta": 10000.0, "factor": 2.0})


@pytest.mark.parametrize("head_dim, partial", [(10, 0.5), (7, 1.0), (2, 0.5), (64, 0.01), (130, 0.3)])
def test_odd_or_empty_rotary_dim_is_refused(head_dim, partial):
    with pytest.raises(ValueError, match=r"rotary_dim = int\(head_dim \* partial_rotary_factor\)"):
        _call(COMPLETE["default"], head_dim=head_dim, partial_rotary_factor=partial)


@pytest.mark.parametrize("key", ["short_factor", "long_factor"])
@pytest.mark.parametrize("length", [1, 31, 33])
def test_longrope_factor_list_of_the_wrong_length(key, length):
    params = {**COMPLETE["longrope"], key: [1.0] * length}
    with pytest.raises(ValueError, match=f"{key} must have rotary_dim / 2 = 32 entries, got {length}"):
        _call(params)


@pytest.mark.parametrize("kw, match", [
    ({"seq_len": 0}, "seq_len"), ({"seq_len": -5}, "seq_len"), ({"seq_len": 1.5}, "seq_len"),
    ({"seq_len": True}, "seq_len"), ({"head_dim": 0}, "head_dim"), ({"head_dim": 64.0}, "head_dim"),
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    ({"partial_rotary_factor": 0.0}, "partial_rotary_factor"),
    ({"partial_rotary_factor": 1.5}, "partial_rotary_factor"),
])
def test_malformed_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        _call(COMPLETE["dynamic"], **kw)


@pytest.mark.parametrize("recipe, key, value", [
    ("linear", "factor", 0.0), ("linear", "factor", "2"), ("default", "rope_theta", 1.0),
    ("default", "rope_theta", float("nan")), ("yarn", "mscale", "big"), ("longrope", "short_factor", "1,2"),
    ("llama3", "high_freq_factor", 1.0),
])
def test_malformed_parameters_are_named(recipe, key, value):
    with pytest.raises(ValueError, match=key):
        _call({**COMPLETE[recipe], key: value})


def test_rope_parameters_must_be_a_mapping():
    with pytest.raises(TypeError, match="rope_parameters must be a dict"):
        _call([("rope_theta", 10000.0)])


def test_the_dict_is_not_modified():
    params = copy.deepcopy(COMPLETE["yarn"])
    before = copy.deepcopy(params)
    _call(params)
    assert params == before


def test_importing_the_module_does_not_import_torch():
    code = "import sys, cukiln, cukiln.rope_recipes; assert 'torch' not in sys.modules, 'torch imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
