"""merge_attention call planning: validate the partial results, fill the merge kernel's parameters, shape its launch.

Works on TensorInfo metadata alone (no framework, no GPU): every bad input raises ValueError or TypeError naming the
argument before anything is launched.
"""

from __future__ import annotations

from dataclasses import dataclass

from cukiln.core.archs import programmatic_launch
from cukiln.generated import dispatch

from .decode_plan import Launch, sink_fields
from .tensors import HALVES, TensorInfo, device_name

GRID_X_MAX = 2**31 - 1  # blocks along x: one a (row, head)


@dataclass(frozen=True)
class MergePlan:
    launch: Launch  # the merge kernel's (decode's Launch)
    values: tuple  # its parameters, in launch.field_names' order
    device: int


def plan_merge(outs: TensorInfo, lses: TensorInfo, *, out: TensorInfo, return_lse: bool = False,
               lse: TensorInfo | None = None, arch: str | None = None,
               sinks: TensorInfo | None = None) -> MergePlan | None:
    """The launch merging ``outs`` [k, b, h, d] (fp16 or bf16, any strides) by ``lses`` [k, b, h] (fp32, natural log,
    any strides) into ``out`` [b, h, d] (outs' dtype) and, with ``return_lse``, ``lse`` [b, h] (fp32, contiguous);
    ``sinks`` (fp32 [h]): attention sinks, each head's a part of output zero (decode_plan.sink_fields). None when there
    is nothing to write (no row, head or feature)."""
    if return_lse and lse is None:
        raise ValueError("lse: return_lse=True needs the tensor the merged log-sum-exp goes to")
    lse = lse if return_lse else None
    if outs.dtype not in HALVES:
        raise TypeError(f"outs: expected float16 or bfloat16, got {outs.dtype}")
    if outs.ndim != 4:
        raise ValueError(f"outs: expected [k, b, h, d] (k partial results), got shape {list(outs.shape)}")
    k, b, h, d = outs.shape
    if lses.dtype != "fp32":
        raise TypeError(f"lses: expected float32, got {lses.dtype}")
    if lses.shape != (k, b, h):
        raise ValueError(f"lses: expected shape [{k}, {b}, {h}] (outs' parts, rows and heads), got {list(lses.shape)}")
    if k == 0:
        raise ValueError("outs: expected at least one partial result, got k = 0")
    for name, t in (("lses", lses), ("out", out), ("lse", lse)):
        if t is not None and t.device != outs.device:
            raise ValueError(f"{name}: expected a tensor on {device_name(outs.device)} (outs'), got one on "
                             f"{device_name(t.device)}")
    if (out.shape, out.dtype) != ((b, h, d), outs.dtype):
        raise ValueError(f"out: expected [{b}, {h}, {d}] of outs' dtype {outs.dtype}, got {list(out.shape)} of "
                         f"{out.dtype}")
    if lse is not None and (lse.shape != (b, h) or lse.dtype != "fp32" or (b * h > 1 and lse.strides != (h, 1))):
        raise ValueError(f"lse: expected a contiguous float32 [{b}, {h}], got {lse.dtype} of shape {list(lse.shape)}")
    for name, t in (("out", out), ("lse", lse)):
        if t is not None and t.has_internal_overlap():
            raise ValueError(f"{name}: has a broadcast (stride 0) dimension; each element needs its own memory")
        for read_name, read in (("outs", outs), ("lses", lses)):
            if t is not None and t.overlaps(read):
                raise ValueError(f"{name}: overlaps {read_name}, which the kernel reads while it writes {name}")
    if lse is not None and lse.overlaps(out):
        raise ValueError("lse: overlaps out")
    sink = sink_fields(sinks, h, outs.device)
    for name, t in (("out", out), ("lse", lse)):
        if t is not None and sinks is not None and t.overlaps(sinks):
            raise ValueError(f"{name}: overlaps sinks, which the kernel reads while it writes {name}")
    if b * h > GRID_X_MAX:
        raise ValueError(f"outs: at most {GRID_X_MAX} rows x heads per call, got {b * h}")
    if b * h * d == 0:
        return None
    module, symbol, layout = dispatch.DECODE_MERGE[outs.dtype]
    names, fmt = dispatch.DECODE_PARAMS[layout]
    fields = {"outs": outs.ptr, "lses": lses.ptr, "out": out.ptr, "lse": 0 if lse is None else lse.ptr, "parts": k,
              "heads": h, "head_dim": d, "out_sb": out.strides[0], "out_sh": out.strides[1], "out_sd": out.strides[2],
              **sink}
    fields.update({f"outs_s{a}": s for a, s in zip("kbhd", outs.strides)})
    fields.update({f"lses_s{a}": s for a, s in zip("kbh", lses.strides)})
    threads = min(dispatch.DECODE_MERGE_THREADS, -(-d // 32) * 32)
    launch = Launch(module, symbol, fmt, names, (b * h, 1, 1), (threads, 1, 1), 0, programmatic_launch(arch))
    return MergePlan(launch, tuple(fields[n] for n in names), outs.device)

