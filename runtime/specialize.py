"""Ops specialized to a traced call's constants: what a torch.compile'd cukiln call runs.

torch charges an op call by its arguments: a compiled graph's call parses each one against the op's schema, and the
dispatcher boxes each one (`benchmarks/studies/op_argument_cost.py`). A cukiln op takes 12 to 28 of them, and in
one traced call most are constants: the layout, the rotation's scalars, a None for each angle source not used. So
when a cukiln.torch wrapper is traced by torch.compile it calls ``cukiln::<op>__<digest>`` instead: the op
specialized to the call's constants, whose schema keeps only what a call varies (its tensors, and the int lengths
that the op's plans refill). The digest names the constants, so every process that traces the same call defines
the same op. Its kernels put the constants back and run the op's own (hot_path.cpp's Specialized): the same plan
cache, autograd kernel and errors.

Only where the native hot path serves the op (its C++ kernels are what expands a call cheaply), never while
torch.export traces (an exported program may name only ops that importing cukiln.torch defines), and not for a
call with a symbolic scalar (a dynamic int): those calls take the op itself, as every call does with
``CUKILN_TRACED_OPS=generic`` (cukiln.overrides).
"""

from __future__ import annotations

import hashlib

import torch

from .overrides import CURRENT as OVERRIDES
from .torch_support import FAKES, KERNELS, LIBRARY, NATIVE_HANDLES, PER_CALL

_CONSTANT_TYPES = (type(None), bool, int, float, str)
_SIGNATURES: dict = {}  # op name -> its schema's argument declarations and its returns, as text
_DEFINED: set = set()  # the specialized ops defined in this process


def call(name: str, args: tuple):
    """Op cukiln::``name`` on ``args`` (its schema's arguments, positional) from a cukiln.torch wrapper that does
    not run eagerly: through the op specialized to the call's constants where that applies (above), else the op."""
    if name in NATIVE_HANDLES and torch.compiler.is_compiling():
        found = specialization(name, args)
        if found is not None:
            op, given = found
            return op(*given)
    return getattr(torch.ops.cukiln, name).default(*args)


def specialization(name: str, args: tuple):
    """(op, arguments): op cukiln::``name`` specialized to the constants among ``args`` (defined on first use) and
    the arguments it takes; None where a call must take the op itself (a symbolic scalar, or a value that is not
    a tensor where a tensor belongs, which the op's own kernel explains). For ops the native hot path serves.

    torch.compile traces this: only isinstance tests run here, and what they find goes to _given as constants
    (torch.compile calls it while tracing and keeps its answer)."""
    tensors = tuple(isinstance(a, torch.Tensor) for a in args)
    for a in args:
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return None
    found = _given(name, tensors, tuple(None if t else a for a, t in zip(args, tensors)))
    if not found:
        return None
    spec, given = found
    return getattr(torch.ops.cukiln, spec).default, [args[i] for i in given]


@torch.compiler.assume_constant_result
def _given(name: str, tensors: tuple[bool, ...], values: tuple) -> tuple:
    """(the specialized op's name, the indices of its arguments among the op's), or () where the op itself must
    serve: ``tensors`` marks the arguments that are tensors, ``values`` holds the others (None for tensors).
    Never while torch.export traces: asked here, where it runs as plain Python (torch.compile of some torch versions
    answers is_exporting() with True in traced code); nor where the traced_ops override says "generic" (read here
    too, so that a compiled graph keeps the choice it was traced under)."""
    choice = OVERRIDES["traced_ops"]
    if choice not in ("auto", "generic"):
        raise ValueError(f"traced_ops override: expected 'generic' or 'auto', got {choice!r}")
    if choice == "generic" or torch.compiler.is_exporting():
        return ()
    declared, names, _ = _signature(name)
    given, constants = [], []
    for i, (tensor, value) in enumerate(zip(tensors, values)):
        tensor_argument = declared[i].startswith("Tensor")
        if tensor if tensor_argument else names[i] in PER_CALL[name]:
            given.append(i)
        elif tensor or (tensor_argument and value is not None):
            return ()  # a tensor where a constant belongs, or the reverse: the op's own kernel explains it
        elif type(value) in _CONSTANT_TYPES:
            constants.append(value)
        elif type(value) in (list, tuple) and all(type(v) is int for v in value):  # an int[]? argument
            constants.append(tuple(value))
        else:
            return ()
    return specialized(name, tuple(given), tuple(constants)), tuple(given)


def _signature(name: str) -> tuple[list[str], list[str], str]:
    """Op cukiln::``name``'s argument declarations as its schema spells them ("Tensor(a!) k_cache", "float? base",
    ...), their names, and its returns."""
    if name not in _SIGNATURES:
        schema = getattr(torch.ops.cukiln, name).default._schema
        text = str(schema)
        close = text.rindex(") -> ")
        declared = text[text.index("(") + 1:close].split(", ")
        names = [a.name for a in schema.arguments]
        assert len(declared) == len(names) and all(d.split()[-1].split("=")[0] == n for d, n in zip(declared, names))
        _SIGNATURES[name] = declared, names, text[close + len(") -> "):]
    return _SIGNATURES[name]


def specialized(name: str, given: tuple[int, ...], constants: tuple) -> str:
    """The name of op cukiln::``name`` specialized to ``constants`` (its arguments not in ``given``, in order),
    taking its arguments ``given`` (indices): defined on first use."""
    digest = hashlib.sha256(repr((given, constants)).encode()).hexdigest()[:16]
    spec = f"{name}__{digest}"
    if spec in _DEFINED:
        return spec
    declared, _, returns = _signature(name)
    values, rest = [], iter(constants)
    for i in range(len(declared)):
        values.append(None if i in given else next(rest))

    def expand(arguments: tuple) -> list:
        full = list(values)
        for i, a in zip(given, arguments):
            full[i] = a
        return full

    LIBRARY.define(f"{spec}({', '.join(declared[i] for i in given)}) -> {returns}")
    kernel, fake = KERNELS[name], FAKES[name]
    LIBRARY.impl(spec, lambda *arguments: kernel(*expand(arguments)), "CompositeExplicitAutograd")
    torch.library.register_fake(f"cukiln::{spec}", lambda *arguments: fake(*expand(arguments)), lib=LIBRARY)
    from . import native

    native.register_specialized(NATIVE_HANDLES[name], spec, list(given), values)
    _DEFINED.add(spec)
    return spec
