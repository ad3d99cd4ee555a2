"""The generated tables: dispatch.py (each family's section, the tuning data folded in) and families.py."""

from __future__ import annotations

import pytest

from cukiln.codegen import decode_abi, emit, rope_abi
from cukiln.codegen.decode_variants import DecodeVariant, enumerate_decode
from cukiln.codegen.ops import FAMILIES, all_variants
from cukiln.codegen.rope_abi import rope_params
from cukiln.codegen.rope_variants import SOURCES, enumerate_rope, sources_served

VARIANTS = list(enumerate_rope())
DECODE_VARIANTS = list(enumerate_decode())
ALL_VARIANTS = all_variants()


def test_decode_dispatch_table_names_each_attention_variant_and_its_combine_kernel():
    namespace: dict = {}
    exec(emit.render_dispatch(ALL_VARIANTS), namespace)
    attention = [v for v in DECODE_VARIANTS if isinstance(v, DecodeVariant)]
    assert len(namespace["DECODE"]) == len(attention)
    for v in attention:
        module, symbol, layout_id, combine_module, combine = namespace["DECODE"][v.key]
        assert (module, symbol) == (v.module, v.name)
        assert namespace["DECODE_PARAMS"][layout_id][0] == tuple(f for _, f in decode_abi.decode_params(v))
        assert (combine_module, combine) == (f"decode_{v.dtype.value}", f"decode_combine_{v.dtype.value}_d{v.head_dim}")
    assert namespace["DECODE_SHARED"] == {(v.head_dim, v.pipeline.value, v.cache.value):
                                          decode_abi.shared_bytes(v.head_dim, v.pipeline, cache=v.cache)
                                          for v in attention}
    assert namespace["DECODE_PIPELINES"] == ("narrow", "deep", "wide", "ws", "ws_deep")
    assert namespace["DECODE_WARP_SPECIALIZED"] == ("ws", "ws_deep")
    assert namespace["DECODE_TILE_KEYS"] == {"narrow": 64, "deep": 64, "wide": 128, "ws": 64, "ws_deep": 64}
    assert namespace["DECODE_THREADS"] == {"narrow": 128, "deep": 128, "wide": 128, "ws": 160, "ws_deep": 160}
    # a launch's block is the kernel's launch bound: every variant's threads as the planner reads them
    assert namespace["DECODE_PAGED_THREADS"] == {"narrow": 128, "ws_deep": 256}
    for v in attention:
        threads = namespace["DECODE_PAGED_THREADS" if v.paged else "DECODE_THREADS"][v.pipeline.value]
        assert threads == decode_abi.max_threads(v), v.name

def test_tuning_data_folds_into_the_decode_split_rule():
    namespace: dict = {}
    tuning = {"sm_90": {"decode": {"rule": {"blocks_per_sm": 3, "min_keys_per_split": 256, "wave_efficiency": 1,
                                            "extra": 1}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"blocks_per_sm": 3.0, "min_keys_per_split": 256,
                                                   "wave_efficiency": 1.0}}
    exec(emit.render_dispatch(ALL_VARIANTS), namespace)
    assert namespace["DECODE_SPLIT"] == {} and namespace["DECODE_SPLIT_DEFAULT"] == decode_abi.SPLIT_DEFAULT
    # a measured table (JSON lists) folds into tuples, which the runtime's cache can hash
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 4, 8, 6, 4, 5, 3], [64, 2048, 0, 2, 2, 1, 1, 1]]}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"table": ((8, 512, 4, 8, 6, 4, 5, 3),
                                                             (64, 2048, 0, 2, 2, 1, 1, 1))}}
    # tables measured before the ws and ws_deep pipelines: the narrow count for those
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 3, 8, 6, 4, 5], [64, 2048, 0, 2, 2, 1, 1]]}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"table": ((8, 512, 3, 8, 6, 4, 5, 8),
                                                             (64, 2048, 0, 2, 2, 1, 1, 2))}}
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 2, 8, 6, 4], [64, 2048, 0, 2, 2, 1]]}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"table": ((8, 512, 2, 8, 6, 4, 8, 8),
                                                             (64, 2048, 0, 2, 2, 1, 2, 2))}}
    # a table measured before the pipelines, (blocks, T, splits): the narrow pipeline with that count
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 8], [64, 2048, 2]]}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"table": ((8, 512, 0, 8, 8, 8, 8, 8), (64, 2048, 0, 2, 2, 2, 2, 2))}}
    # a malformed point is refused at build, not at a call
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 5, 8, 4, 4, 4, 4]]}}}}
    with pytest.raises(ValueError, match="table point"):
        emit.render_dispatch(ALL_VARIANTS, tuning)

def test_dispatch_table_covers_every_variant_with_plain_tuples():
    namespace: dict = {}
    exec(emit.render_dispatch(VARIANTS), namespace)
    table = namespace["ROPE"]
    # a kernel taking its angle source at run time serves the key of each source it takes
    assert len(table) == sum(len(sources_served(v)) for v in VARIANTS)
    for v in VARIANTS:
        for source in sources_served(v):
            key = (v.dtype.value, v.layout.value, v.pairing.value, source.value, v.strides, v.vec,
                   v.dispatch.value, v.tensors, v.mrope)
            module, symbol, layout_id = table[key]
            assert (module, symbol) == (v.module, v.name)
            assert namespace["ROPE_PARAMS"][layout_id][0] == tuple(f for _, f in rope_params(v))

def test_angle_kinds_number_the_sources_in_order():
    namespace: dict = {}
    exec(emit.render_dispatch(VARIANTS), namespace)
    assert namespace["ANGLE_KINDS"] == {a.value: i for i, a in enumerate(SOURCES)}
    assert "angle_kind" not in namespace["ANY_ANGLE_FIELDS"]


def test_tuning_data_folds_into_the_thd_rule():
    namespace: dict = {}
    tuning = {"sm_90": {"rope-thd": {"rule": {"grid_max_waste": 1.25}}}, "sm_80": {"other-op": {}}}
    exec(emit.render_dispatch(VARIANTS, tuning), namespace)
    assert namespace["ROPE_THD_GRID_MAX_WASTE"] == {"sm_90": 1.25}
    assert namespace["ROPE_THD_GRID_MAX_WASTE_DEFAULT"] == rope_abi.THD_GRID_MAX_WASTE_DEFAULT
    exec(emit.render_dispatch(VARIANTS), namespace)
    assert namespace["ROPE_THD_GRID_MAX_WASTE"] == {}

def test_tuning_data_folds_into_the_rope_launch_rule():
    namespace: dict = {}
    rule = {"max_vector_bytes": 8, "packed_kernel": False, "max_threads": 128, "min_threads": 32}
    exec(emit.render_dispatch(VARIANTS, {"sm_90": {"rope": {"rule": rule}}}), namespace)
    # a choice the table did not measure (head_passes, added after it) takes the default
    assert namespace["ROPE_LAUNCH"] == {"sm_90": {**rule, "head_passes": rope_abi.LAUNCH_DEFAULT["head_passes"]}}
    exec(emit.render_dispatch(VARIANTS, {"sm_90": {"rope": {"rule": {**rule, "head_passes": 2}}}}), namespace)
    assert namespace["ROPE_LAUNCH"] == {"sm_90": {**rule, "head_passes": 2}}
    assert namespace["ROPE_LAUNCH_DEFAULT"] == rope_abi.LAUNCH_DEFAULT
    exec(emit.render_dispatch(VARIANTS), namespace)
    assert namespace["ROPE_LAUNCH"] == {}


def test_families_table_names_every_public_function_and_reference():
    namespace: dict = {}
    exec(emit.render_families(), namespace)
    assert namespace["API"] == {name: module for f in FAMILIES for name, module in f.api.items()}
    assert set(namespace["API"]) >= {"rope", "decode_attention"}
    assert namespace["REFERENCE"] == tuple(name for f in FAMILIES for name in f.reference)
    assert set(namespace["REFERENCE"]) <= set(namespace["API"]), "a reference is an op's"
