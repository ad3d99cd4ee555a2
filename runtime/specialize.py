"""Ops specialized to a traced call's constants: what a torch.compile'd cukiln call runs.

torch charges an op call by its arguments: a compiled graph's call parses each one against the op's schema, and the
dispatcher boxes each one (`git show 6d07f26:benchmarks/studies/step_schema_cost.py`). A cukiln op takes 12 to 28 of
them, and in one traced call most are constants: the layout, the flags, a None for each angle source or option not used.
So when torch.compile traces a cukiln.torch wrapper (a node of its graph, torch_support.one_graph_node: the wrapper runs
as plain Python on traced tensors when torch.compile computes the call's example results and when AOTAutograd traces the
graph) it calls ``cukiln::<op>__<digest>`` instead: the op specialized to the call's constants, whose schema keeps only
its tensors and the numbers torch.compile traces as symbols. Every other value is a constant of the graph: the Nones,
the bools, the strings, and each plain int or float, which the traced graph would hold as a literal anyway, under
torch.compile's guards on where it came from. A number that changed between calls is traced as a symbol instead, and
reaches the wrapper as a torch.SymInt or SymFloat: an argument. The ops declare a call's lengths, starts and offsets
SymInt (an int argument would guard a symbol on its value), so the graph compiled for such a symbol serves every value;
the ints that configure a call (rotary_dim, cp_size, num_splits, ...) stay int, and the wrappers convert floats with
float(), which guards a SymFloat on its value: a change there recompiles. A tensor that the op writes only with a flag
(torch_support.WRITTEN_ONLY_WITH: the step's kv_lens, with advance_lens) is declared read-only where the flag is the
constant False, one mutated input fewer in the graph. The digest names the constants and the declarations, so every
process that traces the same call defines the same op. Its kernels put the constants back and run the op's own
(hot_path.cpp's Specialized): the same plan cache, autograd kernel and errors.

Only where the native hot path serves the op (its C++ kernels are what expands a call cheaply), never while
torch.export traces (an exported program may name only ops that importing cukiln.torch defines), and not for a
call with a value of another type than its schema says (the op's own kernel explains it): those calls take the op
itself, as every call does with ``CUKILN_TRACED_OPS=generic`` (cukiln.overrides).
"""

from __future__ import annotations

import hashlib
import re
import threading

import torch
from torch._guards import TracingContext
from torch.compiler import is_compiling

from . import native
from .native import NO_LSE
from .overrides import CURRENT as OVERRIDES
from .torch_support import FAKES, KERNELS, NATIVE_HANDLES, WRITTEN_ONLY_WITH

# The kinds of value a schema type takes (_kind names them): a float also takes an int, as the ops' own calls do.
_ACCEPTS = {"Tensor": ("tensor",), "float": ("int", "float"), "int": ("int",), "SymInt": ("int",), "bool": ("bool",),
            "str": ("str",), "int[]": ("list",)}
_INT64 = (-(1 << 63), (1 << 63) - 1)  # a plain int beyond these is no schema's int: the op itself explains it
_SIGNATURES: dict = {}  # op name -> its arguments' declarations, their types and optionality, its returns
_DEFINED: dict = {}  # specialized op name -> (what it specializes, its library fragment), for this process
_LOCK = threading.Lock()


def call(name: str, args: tuple, lse: bool = True):
    """Op cukiln::``name`` on ``args`` (its schema's arguments, positional) from a cukiln.torch wrapper that does
    not run eagerly: through the op specialized to the call's constants where that applies (above), else the op.
    ``lse=False``, for an attention op returning (out, lse): the call wants out alone, which is what it returns; the
    op specialized so returns out alone too, and runs the op's variant that neither allocates nor writes an lse
    (native.NO_LSE), so that a compiled graph holds one output, not two."""
    # traced: torch.compile computing the call's example results, or AOTAutograd tracing the graph (where some torch
    # versions answer is_compiling() with False; the tracing context is set either way)
    if is_compiling() or TracingContext.try_get() is not None:
        found = specialization(name, args, lse)
        if found is not None:
            op, given = found
            return op(*given)
    result = getattr(torch.ops.cukiln, name).default(*args)
    return result if lse else result[0]


def _kind(a) -> str:
    if isinstance(a, torch.Tensor):
        return "tensor"
    if a is None:
        return "none"
    for kind, t in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if type(a) is t:
            return kind
    if type(a) in (list, tuple) and all(type(v) is int for v in a):
        return "list"
    if isinstance(a, (torch.SymInt, torch.SymFloat)):  # a number torch.compile traces as a symbol
        return "int" if isinstance(a, torch.SymInt) else "float"
    return "other"


def _is_argument(a) -> bool:
    """Whether a specialized op takes value ``a`` as an argument (a tensor, or a number traced as a symbol) rather
    than holding it as a constant."""
    return isinstance(a, (torch.Tensor, torch.SymInt, torch.SymFloat))


def specialization(name: str, args: tuple, lse: bool = True):
    """(op, arguments): op cukiln::``name`` specialized to the constants among ``args`` (defined on first use) and
    the arguments it takes (the tensors and the symbols); None where a call must take the op itself: while
    torch.export traces, where the traced_ops override says "generic", where the native hot path does not serve the
    op (or, for ``lse`` False, its no-lse variant), and for an argument not of its schema's type (the op's own kernel
    explains it). ``lse``: as call() takes it."""
    choice = OVERRIDES["traced_ops"]
    if choice not in ("auto", "generic"):
        raise ValueError(f"traced_ops override: expected 'generic' or 'auto', got {choice!r}")
    if choice == "generic" or torch.compiler.is_exporting() or (name if lse else name + NO_LSE) not in NATIVE_HANDLES:
        return None
    _, types, optional, _ = _signature(name)
    given, constants = [], []
    for i, a in enumerate(args):
        kind = _kind(a)
        if kind not in _ACCEPTS[types[i]] + (("none",) if optional[i] else ()) or (
                kind == "int" and type(a) is int and not _INT64[0] <= a <= _INT64[1]):
            return None
        if _is_argument(a):
            given.append(i)
        else:  # an int where the schema says float is the float it stands for (one op for 1 and 1.0), a tuple the list
            constants.append(float(a) if kind == "int" and types[i] == "float" else list(a) if kind == "list" else a)
    spec = specialized(name, tuple(given), tuple(constants), lse)
    return getattr(torch.ops.cukiln, spec).default, [args[i] for i in given]


def _signature(name: str) -> tuple[list[str], list[str], list[bool], str]:
    """Op cukiln::``name``'s argument declarations as its schema spells them ("Tensor(a!) k_cache", "float? base",
    ...), their types less the alias annotation and the "?" ("Tensor", "float", ...), whether each is optional, and
    the op's returns."""
    if name not in _SIGNATURES:
        schema = getattr(torch.ops.cukiln, name).default._schema
        text = str(schema)
        close = text.rindex(") -> ")
        # each argument's declaration less its default (a specialization's arguments keep none)
        declared = [d.split("=")[0] for d in text[text.index("(") + 1:close].split(", ")]
        assert len(declared) == len(schema.arguments) and all(
            d.split()[-1].split("=")[0] == a.name for d, a in zip(declared, schema.arguments)), text
        types = [re.sub(r"\(.*?\)", "", d.split()[0]) for d in declared]
        _SIGNATURES[name] = (declared, [t.rstrip("?") for t in types], [t.endswith("?") for t in types],
                             text[close + len(") -> "):])
    return _SIGNATURES[name]


def specialized(name: str, given: tuple[int, ...], constants: tuple, lse: bool = True) -> str:
    """The name of op cukiln::``name`` specialized to ``constants`` (its arguments not in ``given``, in order),
    taking its arguments ``given`` (indices), returning its first result alone where ``lse`` is False (call()):
    defined on first use, with its Python, fake and C++ kernels, or not at all (a failure removes what it
    defined)."""
    declared, _, _, returns = _signature(name)
    values, rest = [], iter(constants)  # the op's arguments, the constants in place (the given ones None)
    for i in range(len(declared)):
        values.append(None if i in given else next(rest))
    taken = ", ".join(_without_writes_not_made(name, declared, values)[i] for i in given)
    key = (name, given, constants, lse, taken)  # the name follows the schema, the declarations it takes included
    spec = f"{name}__{hashlib.sha256(repr(key[1:]).encode()).hexdigest()[:16]}"
    with _LOCK:
        if spec in _DEFINED:
            if repr(_DEFINED[spec][0]) != repr(key):  # repr: a NaN constant equals itself there
                raise RuntimeError(f"cukiln: two specializations of {name} share the name {spec}")
            return spec
        handle, kernel, fake = NATIVE_HANDLES[name if lse else name + NO_LSE], KERNELS[name], FAKES[name]
        if not lse:  # an attention op's (out, lse): out alone, from the variant that makes no lse
            assert returns == "(Tensor, Tensor)", returns
            returns = "Tensor"
            kernel, fake = _first(kernel), _first(fake)

        def expand(arguments: tuple) -> list:
            full = list(values)
            for i, a in zip(given, arguments):
                full[i] = a
            return full

        library = torch.library.Library("cukiln", "FRAGMENT")
        try:
            library.define(f"{spec}({taken}) -> {returns}")
            library.impl(spec, lambda *arguments: kernel(*expand(arguments)), "CompositeExplicitAutograd")
            torch.library.register_fake(f"cukiln::{spec}", lambda *arguments: fake(*expand(arguments)), lib=library)
            native.register_specialized(handle, spec, list(given), values)
        except BaseException:
            library._destroy()
            raise
        _DEFINED[spec] = key, library
    return spec


def _without_writes_not_made(name: str, declared: list[str], values: list) -> list[str]:
    """Op cukiln::``name``'s argument ``declared``-ations, each tensor that the op writes only with a bool argument
    (torch_support.WRITTEN_ONLY_WITH) declared read-only where ``values`` hold that bool as the constant False."""
    names = [a.name for a in getattr(torch.ops.cukiln, name).default._schema.arguments]
    flags = WRITTEN_ONLY_WITH.get(name, {})

    def left_alone(n: str) -> bool:
        return n in flags and values[names.index(flags[n])] is False

    return [re.sub(r"\(\w+!\)", "", d) if left_alone(n) else d for d, n in zip(declared, names)]


def _first(kernel):
    """``kernel`` (an attention op's, returning (out, lse)) returning out alone."""
    return lambda *arguments: kernel(*arguments)[0]
