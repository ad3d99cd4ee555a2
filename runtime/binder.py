"""Functions built from an op's schema at import, as Triton builds its binder from a kernel's signature: the public
function ``cukiln.<op>``, the wrapper ``cukiln.torch.<op>`` and the float64 reference ``cukiln.reference.<op>``.

Each is the source text below, made from the schema and executed once. The public function does, written out for
speed, what every call does first (a foreign array or a named stream handed to cukiln.interop, an older spelling, a
``Rotary`` spec unpacked, gradients refused, an int-or-tensor split into the op's two arguments) and then hands the
op's arguments, positional, to the native hot path's caller of the call's form (a branch per form: the op, its
in-place op, a variant taking the caller's outputs or allocating no lse) or, where that is off or does not take the
call, to the op's Python path (runtime/calls.py). ``python -m cukiln.binder OP`` prints the three sources of an op.
"""

from __future__ import annotations

import textwrap

from .plan_cache import ALIGN_MASK
from .schema import NUMBER_OR_TENSOR, Arg, Form, OpSchema

_PAD = "    "


def public_source(schema: OpSchema, doc: str) -> str:
    """The source of ``cukiln.<op>``: the schema's signature."""
    first = schema.args[0].name
    who = f"cukiln.{schema.name}"
    # a torch tensor first and no stream named (runtime/interop.py), tested inline: a call's frame costs more
    body = [f"if stream is not None or type({first}) not in _TORCH_KNOWN and not _is_torch({first}):",
            f"    return _foreign({schema.name}, locals())"]
    body += _prologue(schema, who)
    body += _outputs_given(schema)
    body += _split(schema)
    args = ", ".join(_op_args(schema))
    ready = [f"{first}.is_cuda"] + [f"{a.name} is not None" for a in schema.positional[1:] if a.optional] + \
            [f"({t} is None or type({t}) is type({first}))" for o in schema.outputs() for t in _extras(o)]
    body += [f"if {' and '.join(ready)}:",
             "    _native = _NATIVE[0] if _NATIVE[0] is not None else _load_native()",
             "    if _native:"]
    body += _indent(_form_tree(schema, "_native", args, schema.flags(), schema.outputs()), 2)
    # the native callers refuse nothing: a tensor that requires grad (grad mode on) comes back NotImplemented, here
    body += _refuse_grad(schema, who, f"cukiln.torch.{schema.name}" if schema.inplace_op else None)
    body += _python_path(schema, args, given=True)
    return _function(schema.name, _signature(schema), doc, body)


def torch_source(schema: OpSchema, doc: str, hook: bool) -> str:
    """The source of ``cukiln.torch.<op>``: the public signature less ``stream``. Outputs given are refused (an op
    returns new tensors, or writes what it declares), and ``inplace`` where the op has no in-place torch op."""
    first = schema.args[0].name
    who = f"cukiln.torch.{schema.name}"
    body = []
    for o in schema.outputs():
        body += [f"if {o.name} is not None:",
                 f"    raise ValueError('{o.name}: {who} returns new tensors; use cukiln.{schema.name} for "
                 f"{o.name}=')"]
    flags = schema.flags()
    if any(f.name == "inplace" for f in flags) and not schema.inplace_op:
        body += ["if inplace:",
                 f"    raise ValueError('inplace: {who} returns a new tensor; use cukiln.{schema.name} for "
                 "inplace=True')"]
        flags = tuple(f for f in flags if f.name != "inplace")
    body += _prologue(schema, who)
    for a in schema.positional:
        if a.type == "Tensor" and not a.optional:
            body += [f"if not isinstance({a.name}, _Tensor):",
                     f"    raise TypeError(f'{a.name}: {who} takes a tensor, got {{type({a.name}).__name__}}')"]
        elif a.type == "IntOrTensor":
            body += [f"if isinstance({a.name}, bool) or not isinstance({a.name}, (int, _SymInt, _Tensor)):",
                     f"    raise TypeError(f'{a.name}: expected an int or an int32 tensor [b], got "
                     f"{{type({a.name}).__name__}}')"]
    body += _split(schema, traced=True)
    args = ", ".join(_op_args(schema))
    ready = [f"{first}.is_cuda"] + [f"{a.name} is not None" for a in schema.positional[1:] if a.optional]
    # a call that autograd must see (a tensor the op's schema marks requiring grad, grad mode on): its native caller
    # returns NotImplemented, and the call goes through the op
    body += [f"if _NATIVE_TORCH[0] and {' and '.join(ready)} and _eager({first}):"]
    body += _indent(_form_tree(schema, "_NATIVE_TORCH[0]", args, flags, ()), 1)
    flag_values = ", ".join(f"{f.name}" if f in flags else "False" for f in schema.flags())
    body += [f"_form = _RUNTIME.form({_tuple(flag_values)}, {_tuple(', '.join('False' for _ in schema.outputs()))})",
             f"_args = {_tuple(', '.join(_op_args(schema, convert=True)))}"]
    if hook:
        body += ["_hooked = _HOOK(_args, _form)", "if _hooked is not NotImplemented:", "    return _hooked"]
    body += [f"return _torch_call(_RUNTIME, _args, _form, {first})"]
    return _function(schema.name, _signature(schema, without=("stream",)), doc, body)


def reference_source(schema: OpSchema, doc: str) -> str:
    """The source of ``cukiln.reference.<op>``: the public signature less ``stream``, the body (``_BODY``) taking the
    arguments as one namespace."""
    names = [a.name for a in schema.args if a.name != "stream" and a.role != "renamed" and a.type != "Rotary"]
    body = _prologue(schema, f"cukiln.reference.{schema.name}") + _outputs_given(schema) + _split(schema)
    body += _call_lines(schema, ", ".join(_op_args(schema)))
    body += ["_RUNTIME.validate(_args, _form, _extras)  # refused as the kernels refuse it, before anything is written",
             f"return _BODY(_Arguments({', '.join(f'{n}={n}' for n in names)}))"]
    return _function(schema.name, _signature(schema, without=("stream",)), doc, body)


def key_source(schema: OpSchema) -> str:
    """The source of the op's plan-cache key, ``key(args, extras)`` (the Python path's; hot_path.cpp's key_of builds
    the native one alike): each tensor's shape, strides, dtype, negation, device and pointer alignment, each other
    value itself (a list as a tuple), the ints a plan refills left out, then the outputs a call gives. Unrolled, as
    it runs on every call of the Python path; a value not of its argument's type raises AttributeError (such a call
    is planned in full, which explains it)."""
    parts = []
    for i, (o, refilled) in enumerate(zip(schema.op_arguments(), schema.per_call())):
        declared = o.declaration.split()[0]
        if declared.startswith("Tensor"):
            meta = f"(a[{i}].shape, a[{i}].stride(), a[{i}].dtype, a[{i}].is_neg(), a[{i}].get_device(), " \
                   f"a[{i}].data_ptr() & {ALIGN_MASK})"
            parts.append(meta if "?" not in declared else f"None if a[{i}] is None else {meta}")
        elif refilled:
            continue
        elif declared.startswith("int[]"):
            parts.append(f"None if a[{i}] is None else tuple(a[{i}])")
        else:
            parts.append(f"a[{i}]")
    body = ["key = (" + ", ".join(f"({p})" for p in parts) + ",)",
            "if extras:",
            "    key += tuple((t.shape, t.stride(), t.dtype, t.is_neg(), t.get_device(), "
            f"t.data_ptr() & {ALIGN_MASK}) for t in extras)",
            "return key"]
    return _function("key", "a, extras", "", body)


def build(source: str, name: str, namespace: dict):
    """Function ``name`` defined by ``source`` (one of the above), with ``namespace`` as its globals."""
    exec(compile(source, f"<cukiln: {name}>", "exec"), namespace)  # noqa: S102 (generated from a schema)
    return namespace[name]


# --- the pieces ---------------------------------------------------------------------------------------------------

def _signature(schema: OpSchema, without: tuple[str, ...] = ()) -> str:
    return str(schema.signature(without=without))[1:-1]


def _prologue(schema: OpSchema, who: str) -> list[str]:
    """Older spellings, then a Rotary spec, turned into the loose arguments."""
    from .rotary import FIELDS, loose_name

    lines = []
    for a in schema.args:
        if a.role == "renamed":
            default = schema.arg(a.renames).default
            lines += [f"if {a.name} is not None:",
                      f"    {a.renames} = _renamed({who!r}, {a.name!r}, {a.renames!r}, {a.name}, {a.renames}, "
                      f"{default!r})"]
    spec = [a for a in schema.args if a.type == "Rotary"]
    if spec:
        names = {a.name for a in schema.args}
        taken = [f for f in FIELDS if loose_name(f) in names]
        loose = ", ".join(loose_name(f) for f in taken)
        lines += [f"if {spec[0].name} is not None:",
                  f"    {loose}, = _rotary({who!r}, {spec[0].name}, ({loose},), {tuple(taken)!r})"]
    return lines


def _refuse_grad(schema: OpSchema, who: str, differentiable: str | None) -> list[str]:
    checked = [a for a in schema.args if a.refuse_grad]
    if not checked:
        return []
    first = schema.args[0].name
    tests = [f"{a.name}.requires_grad" if a.name == first else f"getattr({a.name}, 'requires_grad', False)"
             for a in checked]
    pairs = ", ".join(f"({a.name!r}, {a.name})" for a in checked)
    return [f"if {' or '.join(tests)}:", f"    _refuse({who!r}, ({pairs},), {differentiable!r})"]


def _extras(output: Arg) -> list[str]:
    """The tensors an output argument stands for (rope_qk's out: the pair)."""
    return list(output.parts) if output.parts else [output.name]


def _outputs_given(schema: OpSchema) -> list[str]:
    """An output given as a pair (rope_qk's out) unpacked into its parts."""
    lines = []
    for o in schema.outputs():
        if o.parts:
            a, b = o.parts
            lines += [f"if {o.name} is None:",
                      f"    {a} = {b} = None",
                      f"elif isinstance({o.name}, (tuple, list)) and len({o.name}) == 2:",
                      f"    {a}, {b} = {o.name}",
                      "else:",
                      f"    raise TypeError(f'{o.name}: expected a pair ({a}, {b}) or None, got "
                      f"{{type({o.name}).__name__}}')"]
    return lines


def _split(schema: OpSchema, traced: bool = False) -> list[str]:
    """Each int-or-tensor as the op's two arguments: (None, the int) or (the tensor, 0); ``traced``: a torch.SymInt
    is an int."""
    lines = []
    for a in schema.args:
        if a.type in NUMBER_OR_TENSOR and not a.public_only:
            t, i = a.op_names
            number = f"type({a.name}) is int" if a.type == "IntOrTensor" else f"type({a.name}) in (int, float)"
            test = f"not isinstance({a.name}, _Tensor)" if traced else number
            # an optional one's None is its default, 0; a required one's None stays None, which the planner refuses
            lines += [f"if {a.name} is None or {test}:",
                      f"    _{t}, _{i} = None, {a.name + ' or 0' if a.optional and not a.int_optional else a.name}",
                      "else:",
                      f"    _{t}, _{i} = {a.name}, 0"]
    return lines


def _op_args(schema: OpSchema, convert: bool = False) -> list[str]:
    """The op's arguments as expressions of the function's locals (after _split); ``convert``: each number and flag
    as the schema types it (a traced call's constants must be)."""
    out = []
    for o in schema.op_arguments():
        if o.part:
            out.append(f"_{o.name}")
            continue
        a = schema.arg(o.name)
        if convert and a.type == "float":
            out.append(f"(None if {a.name} is None else float({a.name}))" if a.optional else f"float({a.name})")
        elif convert and a.type == "bool":
            out.append(f"bool({a.name})")
        elif convert and a.type == "int[]":
            out.append(f"(None if {a.name} is None else list({a.name}))")
        else:
            out.append(a.name)
    return out


def _form_tree(schema: OpSchema, callers: str, args: str, flags: tuple[Arg, ...], outputs: tuple[Arg, ...]) -> list:
    """Branches over the call's flags and given outputs; each leaf returns the call through its form's native caller
    (``callers[variant]``) shaped as the public call returns it. A form no op or variant serves falls through."""
    forms = {form.key(): form for form in schema.forms()}
    all_flags, all_outputs = schema.flags(), schema.outputs()

    def leaf(set_flags: dict, given: tuple) -> list[str]:
        key = (tuple(set_flags.get(f.name, False) for f in all_flags), tuple(o.name in given for o in all_outputs))
        form = forms.get(key)
        if form is None:
            return ["pass"]
        extras = "".join(", " + t for o in all_outputs if o.name in given for t in _extras(o))
        return [f"_result = {callers}[{form.variant!r}]({args}{extras})",
                "if _result is not NotImplemented:",  # NotImplemented: a tensor requires grad (fast_call)
                "    return " + _shaped(schema, form, "_result")]

    def branch(i: int, set_flags: dict, given: tuple) -> list[str]:
        if i < len(flags):
            f = flags[i]
            return ([f"if {f.name}:"] + _indent(branch(i + 1, {**set_flags, f.name: True}, given), 1) + ["else:"] +
                    _indent(branch(i + 1, {**set_flags, f.name: False}, given), 1))
        j = i - len(flags)
        if j < len(outputs):
            o = outputs[j]
            test = _extras(o)[0]
            return ([f"if {test} is not None:"] + _indent(branch(i + 1, set_flags, given + (o.name,)), 1) +
                    ["else:"] + _indent(branch(i + 1, set_flags, given), 1))
        return leaf(set_flags, given)

    return branch(0, {}, ())


def _shaped(schema: OpSchema, form: Form, value: str) -> str:
    """What the public call returns, from the op's (or variant's) result ``value`` (a name: read no more than once
    or twice): the in-place op's inputs, or the results the call wants."""
    if form.inplace and schema.inplace_op:
        targets = [r.in_place_of for r in schema.results]
        return targets[0] if len(targets) == 1 else f"({', '.join(targets)})"
    wanted = form.wanted()
    if len(schema.results) == 1 or all(wanted):
        return value
    kept = [i for i, w in enumerate(wanted) if w]
    return f"{value}[{kept[0]}]" if len(kept) == 1 else f"tuple({value}[i] for i in {tuple(kept)!r})"


def _call_lines(schema: OpSchema, args: str) -> list[str]:
    """``_form``, ``_args`` and ``_extras`` (the outputs given, each as the tensors it stands for) of the call."""
    flags = ", ".join(f"bool({f.name})" for f in schema.flags())
    given = ", ".join(f"{o.name} is not None" for o in schema.outputs())
    extras = " + ".join(f"(() if {o.name} is None else {_tuple(', '.join(_extras(o)))})" for o in schema.outputs())
    return [f"_form = _RUNTIME.form({_tuple(flags)}, {_tuple(given)})",
            f"_args = {_tuple(args)}",
            f"_extras = {extras or '()'}"]


def _python_path(schema: OpSchema, args: str, given: bool) -> list[str]:
    return _call_lines(schema, args) + ["return _public(_RUNTIME, _form, _RUNTIME.run(_args, _form, _extras), _args)"]


def arguments_source(schema: OpSchema) -> str:
    """The source of ``<op>_api.arguments``: the public signature, returning the call as the op takes it: (its
    arguments, each number and flag as the schema types it; its form; the outputs it gives)."""
    body = _prologue(schema, f"cukiln.{schema.name}") + _outputs_given(schema) + _split(schema)
    body += _call_lines(schema, ", ".join(_op_args(schema, convert=True)))
    body += ["return _args, _form, _extras"]
    return _function("arguments", _signature(schema), "", body)


def planning_source(schema: OpSchema) -> str:
    """The source of ``<op>_api.planned``: the public signature, validating and planning the call without running
    it; returns its calls.Plan."""
    body = _prologue(schema, f"cukiln.{schema.name}") + _outputs_given(schema) + _split(schema)
    body += _call_lines(schema, ", ".join(_op_args(schema)))
    body += ["return _RUNTIME.plan(_args, _form, _extras, keep_call=True)"]
    return _function("planned", _signature(schema), "", body)


def _tuple(items: str) -> str:
    return f"({items},)" if items else "()"


def _indent(lines: list[str], depth: int) -> list[str]:
    return [_PAD * depth + line for line in lines]


def _function(name: str, signature: str, doc: str, body: list[str]) -> str:
    lines = [f"def {name}({signature}):"]
    if doc:
        lines.append(textwrap.indent('"""' + doc.strip() + '\n"""', _PAD))
    return "\n".join(lines + _indent(body, 1)) + "\n"


if __name__ == "__main__":
    import importlib
    import sys

    from cukiln.generated.families import API

    module = importlib.import_module(f"cukiln.{API[sys.argv[1]]}")
    runtime = getattr(module, "RUNTIMES", {}).get(sys.argv[1]) or module.RUNTIME
    print(public_source(runtime.schema, ""))
    print(torch_source(runtime.schema, "", False))
    print(reference_source(runtime.schema, ""))
