"""What a build writes into generated/: sources, manifest.json and dispatch.py.

Everything here except the build results (cubins, resources, compile times) is a pure function of the
templates and the variant space, which is what ``cukiln build --check`` compares.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path

from . import decode_abi
from .decode_variants import PIPELINES, DecodeCombineVariant, DecodeVariant
from .render import DECODE_COMBINE_THREADS, HEADS_IN_FLIGHT, MAX_THREADS_PER_BLOCK
from .rope_abi import rope_params, struct_format
from .variants import RopeVariant

AnyVariant = RopeVariant | DecodeVariant | DecodeCombineVariant

MANIFEST = "manifest.json"
DISPATCH = "dispatch.py"
MANIFEST_SCHEMA = 1
# Keys of a manifest variant entry that come from the templates alone (the rest are build results).
STATIC_VARIANT_KEYS = ("name", "op", "axes", "module", "symbol", "params", "max_threads")


def generated_dir() -> Path:
    return Path(str(resources.files("cukiln.generated")))


def cubin_relpath(arch: str, module: str) -> str:
    return f"cubins/{arch}/{module}.cubin"


def params_of(v: AnyVariant) -> tuple[tuple[str, str], ...]:
    """The kernel-parameter struct of any variant: (C type, field name) in order."""
    return rope_params(v) if isinstance(v, RopeVariant) else decode_abi.decode_params(v)


def max_threads_of(v: AnyVariant) -> int:
    if isinstance(v, RopeVariant):
        return MAX_THREADS_PER_BLOCK
    return DECODE_COMBINE_THREADS if isinstance(v, DecodeCombineVariant) else 32 * decode_abi.WARPS


def static_variant_entry(v: AnyVariant) -> dict:
    return {
        "name": v.name,
        "op": v.op,
        "axes": v.axes(),
        "module": v.module,
        "symbol": v.name,
        "params": [field for _, field in params_of(v)],
        "max_threads": max_threads_of(v),
    }


def static_view(manifest: dict) -> list[dict]:
    """The part of a manifest's variant entries that --check compares."""
    return [{k: entry.get(k) for k in STATIC_VARIANT_KEYS} for entry in manifest.get("variants", [])]


def _params_table_lines(name: str, variants, params_fn, layout_id_fn) -> list[str]:
    """``NAME = {layout id: (field names, struct format)}`` for the params layouts that ``variants`` use."""
    layouts: dict[str, tuple[tuple[str, ...], str]] = {}
    for v in sorted(variants, key=lambda v: v.name):
        params = params_fn(v)
        layouts.setdefault(layout_id_fn(v), (tuple(f for _, f in params), struct_format(params)))
    lines = [f"{name} = {{"]
    lines += [f"    {layout_id!r}: ({names!r}, {fmt!r})," for layout_id, (names, fmt) in sorted(layouts.items())]
    return lines + ["}"]


def _params_layout_id(v: RopeVariant) -> str:
    return f"{v.layout.value}_s{v.strides}_{v.angles.value}"


# Without tuning data for an arch, grid dispatch only where it launches no more blocks than token dispatch.
THD_GRID_MAX_WASTE_DEFAULT = 1.0


def _tuned_rule_lines(tuning: dict[str, dict], op: str, convert) -> list[str]:
    """``    'sm_90': convert(rule),`` for every arch whose tuning data holds a rule for ``op``."""
    return [f"    {arch!r}: {convert(data[op]['rule'])!r}," for arch, data in sorted(tuning.items())
            if data.get(op, {}).get("rule") is not None]


# Without tuning data for an arch: the widest vector that fits, the stride-free kernel for packed
# tensors, 64 to 256 threads per block (runtime/rope_plan.launch_rule and block_shape apply them).
ROPE_LAUNCH_DEFAULT = {"max_vector_bytes": 16, "packed_kernel": True, "max_threads": MAX_THREADS_PER_BLOCK,
                       "min_threads": 64}


def _launch_rule_lines(tuning: dict[str, dict]) -> list[str]:
    lines = [
        "# Dense launch choices: vectors of at most max_vector_bytes, the stride-free kernel for packed tensors",
        "# when packed_kernel, min_threads to max_threads threads per block (per arch, from",
        "# generated/tuning/<arch>.json: `cukiln tune rope`; thd keeps the default).",
        f"ROPE_LAUNCH_DEFAULT = {ROPE_LAUNCH_DEFAULT!r}",
        "ROPE_LAUNCH = {",
    ]
    return lines + _tuned_rule_lines(tuning, "rope", lambda rule: {k: type(v)(rule[k])
                                                                   for k, v in ROPE_LAUNCH_DEFAULT.items()}) + ["}"]


def _thd_rule_lines(tuning: dict[str, dict]) -> list[str]:
    lines = [
        "# thd: grid dispatch when sequences x blocks of the longest sequence <= this many times the token",
        "# dispatch's blocks (per arch, from generated/tuning/<arch>.json: `cukiln tune rope-thd`); else token.",
        f"ROPE_THD_GRID_MAX_WASTE_DEFAULT = {THD_GRID_MAX_WASTE_DEFAULT!r}",
        "ROPE_THD_GRID_MAX_WASTE = {",
    ]
    return lines + _tuned_rule_lines(tuning, "rope-thd", lambda rule: float(rule["grid_max_waste"])) + ["}"]


# The modules whose kernels each tuned rule was measured on: tuning data records a fingerprint of their
# sources, and `cukiln report` flags the data as stale once they change.
TUNED_MODULES = {"rope": re.compile(r"^rope_(fp32|fp16|bf16)$"), "rope-thd": re.compile(r"^rope_\w+_thd_"),
                 "decode": re.compile(r"^decode_")}


def tuning_fingerprint(manifest: dict, op: str) -> str:
    """A short hash of the sources of the modules ``op``'s tuning measures (from the manifest)."""
    h = hashlib.sha256()
    for name, module in sorted(manifest.get("modules", {}).items()):
        if TUNED_MODULES[op].match(name):
            h.update(f"{name}:{module.get('source_sha256', '')}\n".encode())
    return h.hexdigest()[:16]


def write_tuning(arch: str, op: str, result: dict, root: Path | None = None) -> Path:
    """Store ``result`` as ``op``'s entry of generated/tuning/<arch>.json, stamped with the fingerprint of
    the sources it measured. Returns the path."""
    root = root or generated_dir()
    path = root / "tuning" / f"{arch}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[op] = {**result, "fingerprint": tuning_fingerprint(read_manifest(root), op)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def read_tuning(root: Path | None = None) -> dict[str, dict]:
    """arch -> tuning data, from generated/tuning/<arch>.json."""
    folder = (root or generated_dir()) / "tuning"
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def render_dispatch(variants: list[AnyVariant], tuning: dict[str, dict] | None = None) -> str:
    """dispatch.py: plain dicts keyed by tuples, so that a runtime lookup is one dict access."""
    decode = [v for v in variants if not isinstance(v, RopeVariant)]
    variants = [v for v in variants if isinstance(v, RopeVariant)]
    lines = [
        '"""Generated by `cukiln build` from the variant space and tuning data: do not edit.',
        "",
        "ROPE maps a dispatch key to (module, symbol, params layout); ROPE_PARAMS maps a params layout",
        "to the kernel-parameter field names and their struct format (every field 8 bytes).",
        "Key: (dtype, layout, pairing, angles, strides, vector width, dispatch); the direction is a kernel argument.",
        '"""',
        "",
        "# Launch shape: threads per block, and heads whose loads a thread issues before its first store.",
        f"ROPE_MAX_THREADS = {MAX_THREADS_PER_BLOCK}",
        f"ROPE_HEADS_IN_FLIGHT = {HEADS_IN_FLIGHT}",
        "",
    ]
    lines += _params_table_lines("ROPE_PARAMS", variants, rope_params, _params_layout_id) + [""]
    lines += _launch_rule_lines(tuning or {}) + [""]
    lines += _thd_rule_lines(tuning or {})
    lines += ["", "ROPE = {"]
    for v in sorted(variants, key=lambda v: v.name):
        lines.append(f"    {v.key!r}: ({v.module!r}, {v.name!r}, {_params_layout_id(v)!r}),")
    lines += ["}", ""]
    lines += _decode_dispatch_lines(decode, tuning or {})
    return "\n".join(lines)


# Without tuning data for an arch: the split rule of runtime/decode_plan.choose_splits with these values.
DECODE_SPLIT_DEFAULT = {"blocks_per_sm": 2.0, "min_keys_per_split": 256, "wave_efficiency": 0.9}


def _decode_split_rule(rule: dict) -> dict:
    """A tuned split rule as dispatch.py holds it: the measured table as tuples (blocks, T, the best
    pipeline's index in DECODE_PIPELINES, then each pipeline's best split count; hashable, for the
    runtime's cache), or a wave rule's values (tuning files written before the table). Tables measured
    before the pipelines hold (blocks, T, splits): the narrow pipeline, its count taken for every one."""
    if "table" in rule:
        return {"table": tuple(_table_point([int(x) for x in point]) for point in rule["table"])}
    return {k: type(v)(rule[k]) for k, v in DECODE_SPLIT_DEFAULT.items()}


def _table_point(p: list[int]) -> tuple[int, ...]:
    if len(p) == 3:
        return (p[0], p[1], 0) + (p[2],) * len(PIPELINES)
    if len(p) != 3 + len(PIPELINES) or not 0 <= p[2] < len(PIPELINES) or min(p[:2] + p[3:]) < 1:
        raise ValueError(f"decode tuning: a table point must be (blocks, T, pipeline index < {len(PIPELINES)}, "
                         f"one split count per pipeline), got {p}")
    return tuple(p)


def _decode_shared(variants: list[AnyVariant]) -> dict[tuple[int, str], int]:
    shapes = sorted({(v.head_dim, v.pipeline) for v in variants if isinstance(v, DecodeVariant)},
                    key=lambda s: (s[0], PIPELINES.index(s[1])))
    return {(d, p.value): decode_abi.shared_bytes(d, p) for d, p in shapes}


def _decode_dispatch_lines(variants: list[AnyVariant], tuning: dict[str, dict]) -> list[str]:
    attention = sorted((v for v in variants if isinstance(v, DecodeVariant)), key=lambda v: v.name)
    lines = [
        "# Decode attention. DECODE maps (dtype, head dim, K/V strides, vector width, pipeline) to (module,",
        "# symbol, params layout, the combine symbol that merges split-KV partial results); DECODE_PARAMS as",
        "# ROPE_PARAMS. Block: DECODE_WARPS warps serving up to DECODE_HEAD_ROWS query heads of one KV head;",
        "# combine blocks have DECODE_COMBINE_THREADS threads. Pipelines (decode_variants.Pipeline): every",
        "# variant has the first, the bandwidth path all (the split table chooses); DECODE_TILE_KEYS: keys per",
        "# K/V tile of each. DECODE_SHARED: (head dim, pipeline) -> dynamic shared memory bytes of a block.",
        f"DECODE_HEAD_ROWS = {decode_abi.HEAD_ROWS}",
        f"DECODE_WARPS = {decode_abi.WARPS}",
        f"DECODE_PIPELINES = {tuple(p.value for p in PIPELINES)!r}",
        f"DECODE_TILE_KEYS = {dict((p.value, p.tile_keys) for p in PIPELINES)!r}",
        f"DECODE_COMBINE_THREADS = {DECODE_COMBINE_THREADS}",
        "# Split-KV from sm_90 on: at most this many splits of a (row, KV head) merge within a cluster.",
        f"DECODE_MAX_CLUSTER_SPLITS = {decode_abi.MAX_CLUSTER_SPLITS}",
        f"DECODE_SHARED = {_decode_shared(variants)!r}",
        "",
    ]
    lines += _params_table_lines("DECODE_PARAMS", variants, decode_abi.decode_params, decode_abi.params_layout_id)
    lines += [
        "",
        "# Split-KV (runtime/decode_plan.choose_pipeline; one split means one pass). Per arch, from",
        "# generated/tuning/<arch>.json (`cukiln tune decode`): a table of measured points (blocks, T, the best",
        "# pipeline's index, each pipeline's best split count): the nearest point's pipeline (narrow where a",
        "# call has no such variant) and that pipeline's total of blocks, shared out. Other archs: the least split count",
        "# whose waves of blocks (blocks_per_sm per multiprocessor at most) reach wave_efficiency of the best,",
        "# keeping at least min_keys_per_split keys per split.",
        f"DECODE_SPLIT_DEFAULT = {DECODE_SPLIT_DEFAULT!r}",
        "DECODE_SPLIT = {",
    ]
    lines += _tuned_rule_lines(tuning, "decode", _decode_split_rule)
    lines += ["}", "", "DECODE = {"]
    for v in attention:
        lines.append(f"    {v.key!r}: ({v.module!r}, {v.name!r}, {decode_abi.params_layout_id(v)!r}, "
                     f"{v.combine.name!r}),")
    lines += ["}", ""]
    return lines


def expected_files(sources: dict[str, str], headers: dict[str, str], variants: list[AnyVariant],
                   tuning: dict[str, dict] | None = None) -> dict[str, str]:
    """Text files of generated/ that depend only on the templates: name -> content."""
    files = {**headers, DISPATCH: render_dispatch(variants, tuning)}
    files.update({f"{module}.cu": text for module, text in sources.items()})
    return files


def write_text_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def write_manifest(path: Path, manifest: dict) -> None:
    write_text_if_changed(path, json.dumps(manifest, indent=1, sort_keys=False) + "\n")


def read_manifest(root: Path | None = None) -> dict:
    path = (root or generated_dir()) / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}
