"""M-RoPE (three positions a token, each owning a section of the rotary pairs) on the CPU: its planning (the
sectioned variants, their fields), the validation errors, the recipe's sections, and the float64 reference against
transformers' own rotary modules of Qwen2-VL (chunked sections) and Qwen3-VL (interleaved)."""

from __future__ import annotations

import pytest

from cukiln.rope_plan import plan_rope
from cukiln.tensors import TensorInfo

from .test_rope_plan import BASE, contiguous, out_like


def test_positions_of_three_rows_take_the_sectioned_variant_with_their_strides():
    q, k = contiguous((64, 28, 128)), contiguous((64, 4, 128), ptr=BASE * 2)
    # the three rows of a [3, t] view with a padded row stride
    positions = TensorInfo(BASE * 16, (3, 64), (80, 1), "int64", 0)
    plan = plan_rope(q, q, k=k, k_out=k, base=1e6, positions=positions, mrope_section=(16, 24, 24), layout="thd",
                     inplace=True)
    assert plan.then is None and plan.symbol.endswith("_qk_mrope") and plan.key[-2:] == (2, True)
    fields = dict(zip(plan.field_names, plan.values))
    assert (fields["pos_stride_r"], fields["pos_stride_b"], fields["pos_stride_s"]) == (80, 0, 1)
    assert (fields["section_t"], fields["section_h"], fields["section_w"], fields["sections_interleaved"]) == \
        (16, 24, 24, 0)
    assert ("positions", "positions", 0) in plan.pointers


def test_batched_positions_and_interleaved_sections_reach_the_fields():
    x = contiguous((2, 10, 8, 64))  # bshd: b 2, s 10
    positions = contiguous((3, 2, 10), "int32", BASE * 16)
    plan = plan_rope(x, out_like(x), base=1e4, positions=positions, mrope_section=(12, 10, 10),
                     mrope_interleaved=True, layout="bshd")
    fields = dict(zip(plan.field_names, plan.values))
    assert plan.symbol.endswith("_mrope") and fields["positions_int64"] == 0
    assert (fields["pos_stride_r"], fields["pos_stride_b"], fields["pos_stride_s"]) == (20, 10, 1)
    assert fields["sections_interleaved"] == 1
    plain = plan_rope(x, out_like(x), base=1e4, positions=contiguous((2, 10), "int32", BASE * 16), layout="bshd")
    assert not plain.symbol.endswith("_mrope") and plain.key[-1] is False


def _call(**kw):
    x = contiguous((10, 2, 8, 64))  # sbhd: s 10, b 2; rotary_dim 64 = 32 pairs
    args = dict(base=1e4, positions=contiguous((3, 2, 10), "int64", BASE * 16), mrope_section=(8, 12, 12))
    args.update(kw)
    return plan_rope(x, out_like(x), **args)


@pytest.mark.parametrize("kw, error, match", [
    ({"mrope_section": (8, 12, 11)}, ValueError, r"mrope_section: the sections must cover the 32 rotary pairs"),
    ({"mrope_section": (8, 24)}, TypeError, "mrope_section: expected three ints"),
    ({"mrope_section": (8.0, 12, 12)}, TypeError, "mrope_section: expected three ints"),
    ({"mrope_section": (True, 15, 16)}, TypeError, "mrope_section: expected three ints"),
    ({"mrope_section": (-1, 17, 16)}, TypeError, "mrope_section: expected three ints"),
    ({"mrope_section": 32}, TypeError, "mrope_section: expected three ints"),
    ({"mrope_section": None, "mrope_interleaved": True}, ValueError, "mrope_interleaved: only with mrope_section"),
    ({"mrope_interleaved": 1}, TypeError, "mrope_interleaved: expected a bool"),
    ({"positions": None}, ValueError, r"positions: M-RoPE \(mrope_section\) needs explicit positions"),
    ({"positions": contiguous((2, 10), "int64", BASE * 16)}, ValueError, r"M-RoPE expects shape \[3, 10\] or \[3, 2, 10\]"),
    ({"positions": contiguous((3, 10, 2), "int64", BASE * 16)}, ValueError, "M-RoPE expects shape"),
    ({"positions": contiguous((3, 2, 10), "fp32", BASE * 16)}, TypeError, "positions: expected int32 or int64"),
    ({"positions": contiguous((3, 2, 10), "int64", BASE * 16, device=1)}, ValueError, "positions: expected a tensor on cuda:0"),
    ({"offsets": 3}, ValueError, "offsets: positions are explicit"),
    ({"rotary_dim": 48}, ValueError, r"cover the 24 rotary pairs"),
])
def test_bad_m_rope_arguments_are_refused_naming_them(kw, error, match):
    with pytest.raises(error, match=match):
        _call(**kw)


def test_thd_by_cu_seqlens_refuses_sections_for_want_of_positions():
    x = contiguous((40, 4, 64))
    with pytest.raises(ValueError, match="M-RoPE"):
        plan_rope(x, out_like(x), base=1e4, layout="thd", cu_seqlens=contiguous((3,), "int32", BASE * 16),
                  cu_seqlens_host=(0, 10, 40), mrope_section=(8, 12, 12))


# --- the reference against transformers ------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def transformers_mrope(model: str, q, k, position_ids, rope_parameters: dict, heads: int):
    """transformers' M-RoPE of q and k [b, s, h, d]: the model's text rotary module (its cos and sin for the
    [3, b, s] positions, sections applied) and its apply_rotary_pos_emb; where the module hands back the three
    rows unmerged (older transformers), the model's apply_multimodal_rotary_pos_emb merges them."""
    transformers = pytest.importorskip("transformers", minversion="5")
    d = q.shape[-1]
    if model == "qwen2-vl":
        from transformers.models.qwen2_vl import modeling_qwen2_vl as module

        config = transformers.Qwen2VLTextConfig(hidden_size=heads * d, num_attention_heads=heads,
                                                num_key_value_heads=k.shape[2], rope_parameters=dict(rope_parameters))
        rotary = module.Qwen2VLRotaryEmbedding(config)
    else:
        from transformers.models.qwen3_vl import modeling_qwen3_vl as module

        config = transformers.Qwen3VLTextConfig(hidden_size=heads * d, num_attention_heads=heads, head_dim=d,
                                                num_key_value_heads=k.shape[2], rope_parameters=dict(rope_parameters))
        rotary = module.Qwen3VLTextRotaryEmbedding(config)
    rotary = rotary.to(q.device)
    cos, sin = rotary(q, position_ids)
    if cos.ndim == 4:  # [3, b, s, d]: the sections are merged by the apply function
        return module.apply_multimodal_rotary_pos_emb(q, k, cos, sin, rope_parameters["mrope_section"],
                                                      unsqueeze_dim=2)
    return module.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)


QWEN2_VL = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}
QWEN3_VL = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20], "mrope_interleaved": True}


@pytest.mark.parametrize("model, params", [("qwen2-vl", QWEN2_VL), ("qwen3-vl", QWEN3_VL)])
def test_the_reference_is_transformers_m_rope(model, params):
    import cukiln

    gen = torch.Generator().manual_seed(5)
    b, s, hq, hk, d = 2, 9, 4, 2, 128
    q = torch.randn(b, s, hq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, s, hk, d, generator=gen, dtype=torch.float64)
    # text tokens (three equal rows) then an image's grid (time fixed, height and width apart)
    position_ids = torch.randint(0, 4000, (3, b, s), generator=gen)
    position_ids[:, :, :3] = torch.arange(3)
    want_q, want_k = transformers_mrope(model, q, k, position_ids, params, hq)
    recipe = cukiln.rope_recipe(params, head_dim=d, max_position_embeddings=32768)
    assert recipe["mrope_section"] == tuple(params["mrope_section"])
    assert recipe["mrope_interleaved"] is params.get("mrope_interleaved", False)
    got_q, got_k = cukiln.reference.rope_qk(q, k, positions=position_ids, layout="bshd", **recipe)
    # transformers computes cos and sin in fp32: agreement to fp32 rounding of angles up to ~4000 rad
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=2e-3)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=2e-3)
    # and the sections matter: the plain rotation by the time row alone differs
    plain = cukiln.reference.rope(q, positions=position_ids[0], layout="bshd", inv_freq=recipe["inv_freq"])
    assert (plain - want_q).abs().max() > 0.1


def test_equal_rows_are_the_plain_rotation():
    import cukiln

    gen = torch.Generator().manual_seed(6)
    x = torch.randn(7, 2, 3, 64, generator=gen, dtype=torch.float64)  # sbhd
    pos = torch.randint(0, 500, (2, 7), generator=gen)
    for interleaved_sections in (False, True):
        for pairing in (False, True):
            got = cukiln.reference.rope(x, base=1e4, positions=pos.expand(3, 2, 7), mrope_section=(10, 11, 11),
                                        mrope_interleaved=interleaved_sections, interleaved=pairing)
            assert torch.equal(got, cukiln.reference.rope(x, base=1e4, positions=pos, interleaved=pairing))


def test_a_recipe_with_bad_sections_is_refused_naming_them():
    import cukiln

    with pytest.raises(ValueError, match="mrope_section"):
        cukiln.rope_recipe(dict(QWEN2_VL, mrope_section=[16, 24, 23]), head_dim=128, max_position_embeddings=4096)
    with pytest.raises(ValueError, match="mrope_interleaved"):
        cukiln.rope_recipe(dict(QWEN2_VL, mrope_interleaved="yes"), head_dim=128, max_position_embeddings=4096)
