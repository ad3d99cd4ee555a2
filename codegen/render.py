"""Rendering: variants -> CUDA source text, one translation unit per module (see each variant's ``module``)."""

from __future__ import annotations

import functools
from importlib import resources

import jinja2

from . import decode_abi
from .decode_variants import DecodeCombineVariant, DecodeVariant
from .rope_abi import rope_params
from .variants import Dtype, RopeVariant

COMMON_HEADER = "common.cuh"
ROPE_HEADER = "rope.cuh"
DECODE_HEADER = "decode.cuh"
MAX_THREADS_PER_BLOCK = 256
# Heads whose loads one thread issues before its first store (kHeadsInFlight in rope.cu.j2).
HEADS_IN_FLIGHT = 2
# Blocks per multiprocessor the register allocation must allow (__launch_bounds__ minimum).
MIN_BLOCKS_PER_SM = 3
# Whether rope's loads of x and stores of out carry the evict-first (`.cs`) cache hint.
ROPE_STREAMING = True
# Size qualifier of the decode kernel's 16-byte K/V copies ("", ".L2::128B" or ".L2::256B": how much the L2
# fetches from memory around each one).
DECODE_L2_PREFETCH = ".L2::128B"
# Whether the decode loop puts the next tile's copies in flight before it waits for the current tile
# (kStages tiles in flight during the wait, two barriers a tile) rather than after (kStages - 1, one).
DECODE_ISSUE_EARLY = False

_CTYPE = {Dtype.FP32: "float", Dtype.FP16: "f16", Dtype.BF16: "bf16"}


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    root = resources.files("cukiln.templates")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        autoescape=False,
    )


def render_headers(*, heads_in_flight: int = HEADS_IN_FLIGHT, rope_streaming: bool = ROPE_STREAMING,
                   decode_l2_prefetch: str = DECODE_L2_PREFETCH,
                   decode_warps: int = decode_abi.WARPS, decode_issue_early: bool = DECODE_ISSUE_EARLY
                   ) -> dict[str, str]:
    """Every header the modules include: name -> source (written to generated/, handed to NVRTC).

    Keyword arguments here and in render_rope_module / render_decode_module exist for experiments
    (benchmarks/rope_sweep.py, benchmarks/decode_sweep.py); the build uses the defaults.
    """
    return {
        COMMON_HEADER: _environment().get_template("common.cuh.j2").render(),
        ROPE_HEADER: _environment().get_template("rope.cuh.j2").render(heads_in_flight=heads_in_flight,
                                                                      streaming=rope_streaming),
        DECODE_HEADER: _environment().get_template("decode.cuh.j2").render(
            head_rows=decode_abi.HEAD_ROWS, warps=decode_warps, row_padding=decode_abi.ROW_PADDING,
            l2_prefetch=decode_l2_prefetch, max_cluster_splits=decode_abi.MAX_CLUSTER_SPLITS,
            issue_early=decode_issue_early),
    }


def render_rope_module(dtype: Dtype, variants: list[RopeVariant], *, min_blocks: int = MIN_BLOCKS_PER_SM,
                       max_threads: int = MAX_THREADS_PER_BLOCK) -> str:
    """The .cu source holding every variant of ``variants`` (all of element type ``dtype``)."""
    assert all(v.dtype is dtype for v in variants), "one element type per module"
    return _environment().get_template("rope.cu.j2").render(
        dtype=dtype,
        dtype_ctype=_CTYPE[dtype],
        variants=variants,
        params={v.name: rope_params(v) for v in variants},
        max_threads=max_threads,
        min_blocks=min_blocks,
    )


# Threads of a decode combine block (one per output element, looping for head dims above it).
DECODE_COMBINE_THREADS = 128


def render_decode_module(dtype: Dtype, variants: list[DecodeVariant | DecodeCombineVariant], *,
                         warps: int = decode_abi.WARPS, geometry: dict[str, tuple[int, int, int]] | None = None
                         ) -> str:
    """The .cu source holding the decode variants ``variants`` (all of element type ``dtype``).
    ``geometry``: attention variant name -> (keys per tile, stages, the launch bound's blocks per
    multiprocessor), by default the variant's pipeline's (decode_abi)."""
    assert all(v.dtype is dtype for v in variants), "one element type per module"
    attention = [v for v in variants if isinstance(v, DecodeVariant)]
    return _environment().get_template("decode.cu.j2").render(
        dtype=dtype,
        dtype_ctype=_CTYPE[dtype],
        variants=variants,
        params={v.name: decode_abi.decode_params(v) for v in variants},
        max_threads=32 * warps,
        # the register budget per variant: as many resident blocks as its shared memory allows
        geometry=geometry or {v.name: (v.pipeline.tile_keys, decode_abi.stages(v.head_dim, v.pipeline),
                                       decode_abi.min_blocks_per_sm(v.head_dim, v.pipeline)) for v in attention},
        combine_threads=DECODE_COMBINE_THREADS,
    )


_RENDERERS = {"rope": render_rope_module, "decode": render_decode_module, "decode_combine": render_decode_module}


def render_modules(variants: list) -> dict[str, str]:
    """module name -> source, for every module that ``variants`` touch, in a stable order."""
    by_module: dict[str, list] = {}
    for v in variants:
        by_module.setdefault(v.module, []).append(v)
    return {name: _RENDERERS[group[0].op](group[0].dtype, group) for name, group in sorted(by_module.items())}
