"""Helpers with which each family writes its section of the generated dispatch table (plain dicts and tuples)."""

from __future__ import annotations

from .abi import struct_format


def params_table_lines(name: str, variants, params_fn, layout_id_fn) -> list[str]:
    """``NAME = {layout id: (field names, struct format)}`` for the params layouts that ``variants`` use: the
    table's description of every struct an op's kernels take."""
    layouts: dict[str, tuple[tuple[str, ...], str]] = {}
    for v in sorted(variants, key=lambda v: v.name):
        params = params_fn(v)
        layouts.setdefault(layout_id_fn(v), (tuple(f for _, f in params), struct_format(params)))
    lines = [f"{name} = {{"]
    lines += [f"    {layout_id!r}: ({names!r}, {fmt!r})," for layout_id, (names, fmt) in sorted(layouts.items())]
    return lines + ["}"]


def dispatch_map_lines(name: str, variants, layout_id_fn, keys_fn=lambda v: [v.key]) -> list[str]:
    """``NAME = {dispatch key: (module, symbol, params layout id)}`` for ``variants``, by name; ``keys_fn(v)``: the
    keys ``v`` serves (its own by default)."""
    lines = [f"{name} = {{"]
    lines += [f"    {key!r}: ({v.module!r}, {v.name!r}, {layout_id_fn(v)!r}),"
              for v in sorted(variants, key=lambda v: v.name) for key in keys_fn(v)]
    return lines + ["}"]


def keys_by_angle_source(v, sources) -> list[tuple]:
    """``v``'s dispatch key once per angle source of ``sources``, in place of its own angles value: the keys a kernel
    taking its angle source at run time serves, each the key a call's source names."""
    at = list(v.axes()).index("angles")
    return [v.key[:at] + (a.value,) + v.key[at + 1:] for a in sources]


def tuned_rule_lines(tuning: dict[str, dict], rule: str, convert) -> list[str]:
    """``    'sm_90': convert(data),`` for every arch whose tuning data holds a rule named ``rule``."""
    return [f"    {arch!r}: {convert(data[rule]['rule'])!r}," for arch, data in sorted(tuning.items())
            if data.get(rule, {}).get("rule") is not None]
