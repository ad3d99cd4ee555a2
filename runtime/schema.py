"""Each op's arguments, declared once (``OpSchema``), and what is derived from the declaration.

An op's schema lists its public function's parameters in order: each one's name, type, default, role and one line
of doc. From it cukiln derives, rather than spells out again:

- the public function itself (``cukiln.<op>``): built at import from the generated source that ``public_source``
  returns (as Triton builds its binder from a kernel's signature), with the fast path written out;
- the torch ops' schemas (``torch_schema``): the op's arguments are the public ones less the public-only ones
  (``PUBLIC_ONLY`` roles), an int-or-tensor split into ``Tensor? <name>_tensor`` and ``SymInt <name>``, mutation
  annotated from the roles;
- the argument positions every plan refers to (``index``), the int arguments a plan refills per call
  (``per_call``), the calls' forms and the native variants that serve them (``forms``);
- ``cukiln.torch``'s wrapper and the float64 reference's signatures (``signature``), and the API reference in
  docs/api.md (``api_markdown``).

Roles: ``read`` (an input), ``written`` (an input the op writes in place: a cache), and the public-only ``out`` (an
output the caller may give: a variant of the op takes it as an extra argument), ``flag`` (a bool choosing the
call's form: in place, lse asked for) and ``stream``. A ``renamed`` argument is an older spelling kept for callers:
it sets the argument it names, with a DeprecationWarning.

Nothing here imports torch: cukiln imports without it.
"""

from __future__ import annotations

import inspect
import itertools
import textwrap
from dataclasses import dataclass, replace

REQUIRED = inspect.Parameter.empty

# An argument's type, as the public function takes it -> the torch schema's type (without "?").
TYPES = {"Tensor": "Tensor", "IntOrTensor": None, "FloatOrTensor": None, "float": "float", "int": "int",
         "SymInt": "SymInt", "bool": "bool", "str": "str", "int[]": "int[]", "Rotary": None, "Stream": None}
ROLES = ("read", "written", "out", "flag", "stream", "renamed")
PUBLIC_ONLY = ("out", "flag", "stream", "renamed")
# A number or a tensor (a length: an int or an int32 [b]; an FP8 cache's scale: a float or an fp32 tensor), which the
# torch op takes as two arguments: the tensor's (None for a number) and the number's, of this schema type
NUMBER_OR_TENSOR = {"IntOrTensor": "SymInt", "FloatOrTensor": "float"}


@dataclass(frozen=True)
class Arg:
    name: str
    type: str
    default: object = REQUIRED
    doc: str = ""
    optional: bool = False  # None is a value (Tensor?, float?, ...)
    role: str = "read"
    # the kernel dtypes a tensor takes (tensors.FLOATS, ...): what its TensorInfo is checked against
    dtypes: tuple[str, ...] = ()
    # an int (or an IntOrTensor's int) that a plan refills per call rather than keys on: a length
    per_call: bool = False
    # an IntOrTensor's two op arguments: (the tensor's, the int's); ``int_optional``: the int's may be None (rope's
    # offsets: None and 0 differ, explicit positions refusing any offset), else a None given is 0
    op_names: tuple[str, str] | None = None
    int_optional: bool = False
    positional: bool = False  # before the public signature's "*"
    # a tensor whose requires_grad the public function refuses (autograd does not see the call)
    refuse_grad: bool = False
    # role "written": written only when this bool argument is True (torch_support.WRITTEN_ONLY_WITH)
    written_with: str | None = None
    # role "renamed": the argument this older spelling sets
    renames: str | None = None
    # roles "out" and "flag": the native variant suffix of a call that gives it (out) or sets it (flag); a flag whose
    # suffix starts with "!" names the variant of a call that does not set it ("!#no_lse": return_lse False)
    suffix: str = ""
    rank: int = 0  # roles "out" and "flag": where its suffix goes among the others
    # role "out": the tensors it stands for where they are several (rope_qk's out: the pair q_out, k_out)
    parts: tuple[str, ...] = ()
    # role "out": whether an in-place call may give it (rope's out, which an in-place call writes as x, may not)
    with_inplace: bool = True

    def __post_init__(self) -> None:
        assert self.type in TYPES, f"{self.name}: unknown type {self.type}"
        assert self.role in ROLES, f"{self.name}: unknown role {self.role}"
        assert self.type not in NUMBER_OR_TENSOR or self.op_names, \
            f"{self.name}: a number-or-tensor names its two op arguments"
        assert self.type != "FloatOrTensor" or self.int_optional, f"{self.name}: a float-or-tensor's float may be None"

    @property
    def public_only(self) -> bool:
        return self.role in PUBLIC_ONLY or self.type in ("Rotary", "Stream")

    def schema_type(self) -> str:
        base = TYPES[self.type]
        return base + ("?" if self.optional else "")


@dataclass(frozen=True)
class Result:
    """One value an op returns: ``in_place_of`` the input it is in an in-place call; ``only_with`` the flag without
    which the public call leaves it out (decode's lse: the variant then allocates none)."""

    name: str
    in_place_of: str | None = None
    only_with: str | None = None


@dataclass(frozen=True)
class OpArgument:
    """One argument of the torch op: its name, schema type (mutation annotated), and the public argument it comes
    from (``part``: "tensor" or "int" for an IntOrTensor's two)."""

    name: str
    declaration: str
    source: str
    part: str = ""


@dataclass(frozen=True)
class OpSchema:
    name: str
    args: tuple[Arg, ...]
    results: tuple[Result, ...]
    doc: str = ""
    # the torch op that serves the in-place form (rope's "rope_", declared as mutating the rotated tensors), or None
    inplace_op: str | None = None

    def __post_init__(self) -> None:
        names = [a.name for a in self.args]
        assert len(set(names)) == len(names), f"{self.name}: an argument declared twice"

    # --- lookups --------------------------------------------------------------------------------------------------

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(f"{self.name} has no argument {name!r}")

    @property
    def positional(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.positional)

    def op_arguments(self) -> tuple[OpArgument, ...]:
        """The torch op's arguments, in order: the public ones less the public-only, an IntOrTensor as two."""
        out = []
        letters = iter("abcdefgh")
        for a in self.args:
            if a.public_only:
                continue
            if a.type in NUMBER_OR_TENSOR:
                tensor, number = a.op_names
                out.append(OpArgument(tensor, f"Tensor? {tensor}", a.name, "tensor"))
                out.append(OpArgument(number, f"{NUMBER_OR_TENSOR[a.type]}{'?' if a.int_optional else ''} {number}",
                                      a.name, "int"))
                continue
            declared = a.schema_type()
            if a.role == "written":
                declared = f"Tensor({next(letters)}!)" + ("?" if a.optional else "")
            out.append(OpArgument(a.name, f"{declared} {a.name}", a.name))
        return tuple(out)

    @property
    def index(self) -> dict[str, int]:
        """Each op argument's index by its name; an int-or-tensor's public name gives its tensor's (int_index its
        int's), also where the int's op argument has that name (decode's kv_start)."""
        found = {}
        for i, o in enumerate(self.op_arguments()):
            found.setdefault(o.name, i)
        for i, o in enumerate(self.op_arguments()):
            if o.part == "tensor":
                found[o.source] = i
        return found

    def int_index(self, name: str) -> int:
        """The op argument index of int-or-tensor ``name``'s int."""
        for i, o in enumerate(self.op_arguments()):
            if o.source == name and o.part == "int":
                return i
        raise KeyError(f"{self.name}: {name!r} is no int-or-tensor argument")

    def per_call(self) -> tuple[bool, ...]:
        """Per op argument: an int a plan refills per call (left out of every plan key)."""
        return tuple(o.part == "int" and self.arg(o.source).per_call or
                     (o.part == "" and self.arg(o.source).per_call) for o in self.op_arguments())

    def grad_refused(self) -> tuple[bool, ...]:
        """Per op argument: a tensor the public call refuses where it requires grad (grad mode on): the native
        callers hand such a call back (runtime/hot_path.cpp's fast_call)."""
        return tuple(o.part != "int" and self.arg(o.source).refuse_grad for o in self.op_arguments())

    def written_only_with(self) -> dict[str, str]:
        return {a.name: a.written_with for a in self.args if a.role == "written" and a.written_with}

    def outputs(self) -> tuple[Arg, ...]:
        """The outputs a caller may give (role "out"), in the order a variant takes them."""
        return tuple(sorted((a for a in self.args if a.role == "out"), key=lambda a: a.rank))

    def flags(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.role == "flag")

    def torch_schema(self, op_name: str, *, inplace: bool = False) -> str:
        """The schema of torch op ``op_name``: the in-place op's rotated inputs annotated as written, its returns
        none; the trailing arguments that have a default in the public signature have it there too (an op call
        may leave them out)."""
        declarations = []
        letters = iter("stuvwxyz")
        for o in self.op_arguments():
            d = o.declaration
            if inplace and any(r.in_place_of == o.name for r in self.results):
                d = f"Tensor({next(letters)}!) {o.name}"
            declarations.append(d)
        for i in reversed(range(len(declarations))):
            default = self._op_default(self.op_arguments()[i])
            if default is REQUIRED or "!" in declarations[i]:
                break
            declarations[i] += "=" + default
        returns = "()" if inplace else ("Tensor" if len(self.results) == 1 else
                                        "(" + ", ".join("Tensor" for _ in self.results) + ")")
        return f"{op_name}({', '.join(declarations)}) -> {returns}"

    def op_default_values(self) -> tuple:
        """Each op argument's default as a Python value (torch_schema's defaults; before the first of them, a
        placeholder no complete call leaves out)."""
        values = []
        for o in self.op_arguments():
            a = self.arg(o.source)
            if o.part == "tensor":
                values.append(None)
            elif o.part == "int":
                values.append(None if a.int_optional else a.default or 0)
            else:
                values.append(None if a.default is REQUIRED else a.default)
        return tuple(values)

    def _op_default(self, o: OpArgument):
        """An op argument's default as a schema spells it (REQUIRED where it has none)."""
        a = self.arg(o.source)
        if a.default is REQUIRED:
            return REQUIRED
        if o.part == "tensor":
            return "None"
        if o.part == "int":
            return "None" if a.int_optional else "0" if a.default is None else str(a.default)
        value = a.default
        if value is None or isinstance(value, bool):
            return str(value)
        if isinstance(value, str):
            return f'"{value}"'
        return repr(value)

    # --- forms: which torch op or native variant serves a public call ---------------------------------------------

    def forms(self) -> list[Form]:
        """Every form a public call can take that a torch op or native variant serves."""
        flags, outputs = self.flags(), self.outputs()
        found = []
        for set_flags in itertools.product((False, True), repeat=len(flags)):
            for given in itertools.product((False, True), repeat=len(outputs)):
                form = Form(self, dict(zip((f.name for f in flags), set_flags)),
                            tuple(o.name for o, g in zip(outputs, given) if g))
                if form.valid():
                    found.append(form)
        return found

    def op_forms(self) -> dict[str, "Form"]:
        """Each torch op's own form: the op's (no output given, every result returned), and the in-place op's."""
        default = {f.name: f.suffix.startswith("!") for f in self.flags()}
        forms = {self.name: Form(self, default, ())}
        if self.inplace_op:
            forms[self.inplace_op] = Form(self, {**default, "inplace": True}, ())
        return forms

    # --- signatures -----------------------------------------------------------------------------------------------

    def signature(self, *, without: tuple[str, ...] = (), renamed: bool = True) -> inspect.Signature:
        """The public function's signature (less ``without``; the older spellings left out with ``renamed=False``)."""
        params = []
        for a in self.args:
            if a.name in without or (a.role == "renamed" and not renamed):
                continue
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if a.positional else inspect.Parameter.KEYWORD_ONLY
            params.append(inspect.Parameter(a.name, kind, default=a.default))
        return inspect.Signature(params)

    def docstring(self, who: str = "") -> str:
        """The public function's docstring: the op's first paragraph, its arguments (each one's doc), the rest of
        its doc. ``who``: a line on the form this function is (cukiln.torch's wrapper, the reference)."""
        summary, _, rest = self.doc.strip().partition("\n\n")
        lines = textwrap.wrap(summary, 116) + [""] + (textwrap.wrap(who, 116) + [""] if who else []) + ["Arguments:"]
        for a in self.args:
            if a.role == "renamed":
                continue
            text = f"{a.name}: {a.doc}" if a.doc else a.name
            lines += textwrap.wrap(text, 108, initial_indent="  ", subsequent_indent="      ")
        old = [a for a in self.args if a.role == "renamed"]
        if old:
            lines += ["  " + ", ".join(f"{a.name}: the older spelling of {a.renames}" for a in old)]
        return "\n".join(lines + ([""] + rest.strip().splitlines() if rest.strip() else [])) + "\n"

    def api_markdown(self) -> str:
        """This op's section of docs/api.md: its summary, signature, a table of its arguments, its notes."""
        summary, _, rest = self.doc.strip().partition("\n\n")
        lines = [f"## `cukiln.{self.name}`", "", " ".join(summary.split()), "", "```python",
                 f"cukiln.{self.name}{self.signature(renamed=False)}", "```", "",
                 "| argument | type | default | |", "| --- | --- | --- | --- |"]
        for a in self.args:
            if a.role == "renamed":
                continue
            default = "required" if a.default is REQUIRED else f"`{a.default!r}`"
            kind = a.type + ("?" if a.optional else "") + (" (" + ", ".join(a.dtypes) + ")" if a.dtypes else "")
            note = {"written": "written in place; ", "out": "an output the caller may give; ",
                    "flag": ""}.get(a.role, "")
            lines.append(f"| `{a.name}` | {kind} | {default} | {note}{a.doc.replace('|', '&#124;')} |")
        old = [a for a in self.args if a.role == "renamed"]
        if old:
            lines += ["", "Older spellings still taken: " + ", ".join(f"`{a.name}` (now `{a.renames}`)" for a in old)
                      + "."]
        if rest.strip():
            lines += [""] + [" ".join(p.split()) for p in rest.strip().split("\n\n")]
        return "\n".join(lines) + "\n"


class Form:
    """One way a public call runs: which flags it sets and which outputs it gives. It is served by a torch op (its
    default form, or the in-place op) or by a native variant of the op (``variant``). What a call reads of it is
    computed once, here."""

    def __init__(self, schema: OpSchema, flags: dict, given: tuple[str, ...]) -> None:
        self.schema, self.flags, self.given = schema, dict(flags), tuple(given)
        self.inplace = bool(self.flags.get("inplace", False))
        # the torch op whose plans serve this form (its own, or its variant's)
        self.op = schema.inplace_op if self.inplace and schema.inplace_op else schema.name
        parts = []
        for a in sorted(schema.flags() + schema.outputs(), key=lambda a: a.rank):
            if a.role == "out" and a.name in self.given:
                parts.append(a.suffix)
            elif a.role == "flag" and a.suffix and bool(self.flags.get(a.name)) != a.suffix.startswith("!"):
                parts.append(a.suffix.lstrip("!"))
        self.suffix = "".join(parts)
        self.variant = self.op + self.suffix
        self._wanted = tuple(r.only_with is None or bool(self.flags.get(r.only_with)) for r in schema.results)
        self._key = (tuple(bool(self.flags.get(f.name)) for f in schema.flags()),
                     tuple(o.name in self.given for o in schema.outputs()))
        # the tensors a call of this form gives past the op's arguments (a variant's extra arguments), in order
        self._extras = tuple(p for o in schema.outputs() if o.name in self.given for p in (o.parts or (o.name,)))

    def valid(self) -> bool:
        """Whether a torch op or native variant serves it (else the Python path plans it, and explains it)."""
        return not (self.inplace and any(not self.schema.arg(n).with_inplace for n in self.given))

    def wanted(self) -> tuple[bool, ...]:
        """Per result: whether the call returns it."""
        return self._wanted

    def key(self) -> tuple:
        return self._key

    def extras(self) -> tuple[str, ...]:
        return self._extras


def changed(args: tuple[Arg, ...], **changes: dict) -> tuple[Arg, ...]:
    """``args`` with some arguments' fields changed: ``name={field: value}``."""
    return tuple(replace(a, **changes[a.name]) if a.name in changes else a for a in args)
