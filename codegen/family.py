"""The description of one kernel family: everything it contributes to the build, the runtime and the tools.

A family is declared once, in its ``<op>_family`` module, and registered in ``ops.FAMILIES``; every generic
part of cukiln (render, emit, build, report, verify, bench, tune, the runtime's public names, cukiln.torch)
iterates the registry instead of naming the family. See docs/ARCHITECTURE.md, "Adding a kernel family".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from .abi import Params


@dataclass(frozen=True)
class OpFamily:
    name: str
    # The ``op`` of each of its variant types (a family may compile several kinds of kernel, as decode's
    # attention and combine kernels); their names start with "<op>_".
    variant_ops: tuple[str, ...]
    enumerate: Callable[[], Iterable]  # every valid variant, in a stable order
    parse_name: Callable[[str], object]  # a variant's name -> the variant (ValueError if none has it)
    render_headers: Callable[..., dict[str, str]]  # its headers: file name -> text (knobs as keywords)
    render_module: Callable[[object, list], str]  # (dtype, the variants of one module) -> the module's source
    params: Callable[[object], Params]  # a variant's kernel-parameter struct
    max_threads: Callable[[object], int]  # a variant's launch bound
    dispatch_lines: Callable[[list, dict], list[str]]  # its section of dispatch.py (its variants, tuning data)
    # tuning rule (`cukiln tune <rule>`, the key in generated/tuning/<target>.json) -> regex of the names of the
    # kernels it times (its data goes stale when their machine code changes, not when their modules' other kernels do)
    tuned_kernels: dict[str, str] = field(default_factory=dict)
    # tuning rule -> the launch settings its measurements also depend on (set by the runtime, not compiled into the
    # kernels: decode's tensor maps' L2 promotion); changing one makes the data stale as a kernel's code does
    tuned_settings: dict[str, dict[str, object]] = field(default_factory=dict)
    # runtime: public function (cukiln.<name>) -> the runtime module defining it (an op's: its schema, planner and
    # public function; runtime/calls.py); and the ops with a float64 reference (cukiln.reference.<name>: its body in
    # runtime/reference.py, its signature the op's schema's)
    api: dict[str, str] = field(default_factory=dict)
    reference: tuple[str, ...] = ()
    # the module with its tool hooks: check_variant (verify), BENCHES, TUNES, report_rules/print_rules and
    # overhead_paths (see cukiln.tools.hooks)
    tools: str | None = None

    def owns(self, variant) -> bool:
        return variant.op in self.variant_ops
