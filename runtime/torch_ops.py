"""An op's torch ops, defined from its schema: the op (and its in-place op) with its Python, fake, autograd and
native kernels, a native variant per form of the public call, and the wrapper ``cukiln.torch.<op>``."""

from __future__ import annotations

import torch

from . import binder, native
from .calls import namespace_of, public
from .specialize import call as specialized_call
from .tensors import refuse_untracked_gradients
from .torch_support import (LIBRARY, NATIVE_HANDLES, WRITTEN_ONLY_WITH, direct, eager, fake, implement,
                            one_graph_node)


def register(runtime, *, fakes: dict, autograd: dict | None = None, hook=None):
    """Define and implement the torch ops of ``runtime``'s op (runtime/calls.py) from its schema: the op (and its
    in-place op), each with its Python kernel (the op's Python path), its fake kernel (``fakes``: op name -> fn),
    its autograd kernel (``autograd``: op name -> fn; by default one refusing tensors that require grad) and, where
    the extension loads, the native hot path's kernels and a variant for every other form of the public call
    (PUBLIC_CALLS[name]: variant name -> its native caller). Returns the wrapper ``cukiln.torch.<op>``
    (binder.torch_source); ``hook(args, form)``, where given, serves the calls the native path did not take before
    the generic path does (NotImplemented: it does not)."""
    schema = runtime.schema
    forms = schema.op_forms()
    for name, form in forms.items():
        LIBRARY.define(schema.torch_schema(name, inplace=form.inplace and name == schema.inplace_op))
    written = schema.written_only_with()
    if written:
        WRITTEN_ONLY_WITH[schema.name] = written
    per_call = tuple(o.name for o, refilled in zip(schema.op_arguments(), schema.per_call()) if refilled)
    grad_refused = tuple(o.name for o, refused in zip(schema.op_arguments(), schema.grad_refused()) if refused)
    for name, form in forms.items():
        kernel = _kernel(runtime, form)
        op = getattr(torch.ops.cukiln, name).default
        implement(name, kernel, (autograd or {}).get(name) or _refusing(name, op, kernel, runtime),
                  runtime.miss(form), per_call, grad_refused)
        fake(name)(fakes[name])
    callers = runtime.native_callers = _variants(runtime, forms, native)
    namespace = dict(namespace_of(runtime), _Tensor=torch.Tensor, _SymInt=torch.SymInt, _eager=eager,
                     _NATIVE_TORCH=[callers or False], _HOOK=hook, _torch_call=torch_call)
    ops = " and ".join(f"cukiln::{name}" for name in forms)
    doc = schema.docstring(f"cukiln.torch.{schema.name}: the op {ops} through torch's dispatcher, which autograd, "
                           f"torch.compile and CUDA graphs see; the outputs a caller gives are cukiln.{schema.name}'s "
                           "only.")
    wrapper = binder.build(binder.torch_source(schema, doc, hook is not None), schema.name, namespace)
    wrapper.__module__ = "cukiln.torch"
    return one_graph_node(wrapper)


def _kernel(runtime, form):
    def kernel(*args):
        return runtime.run(runtime.complete(args), form)

    return kernel


def _refusing(name: str, op, kernel, runtime):
    """An op's autograd kernel: refuses its tensors that require grad (grad mode on), else runs the kernel (eager)
    or redispatches below autograd (traced: the fake kernel runs there)."""
    schema, index = runtime.schema, runtime.index
    checked = tuple((a.name, index[a.name]) for a in schema.args if a.refuse_grad and not a.public_only)

    def autograd(*args):
        args = runtime.complete(args)
        refuse_untracked_gradients(f"cukiln::{name}", [(n, args[i]) for n, i in checked])
        if eager(args[0]):
            return kernel(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    return autograd


def _variants(runtime, forms: dict, native) -> dict | None:
    """The native callers of every form of the public call, by variant name: the ops' own, and a variant per other
    form (its handle kept in NATIVE_HANDLES, where runtime/specialize.py finds an attention op's no-lse one); None
    where the native path does not serve the op."""
    schema = runtime.schema
    if schema.name not in NATIVE_HANDLES:
        return None
    callers = {}
    for form in schema.forms():
        if form.variant not in NATIVE_HANDLES:
            NATIVE_HANDLES[form.variant] = native.register_variant(NATIVE_HANDLES[form.op], form.suffix,
                                                                   runtime.miss(form), len(form.extras()))
        callers[form.variant] = native.caller(NATIVE_HANDLES[form.variant])
    return callers


def torch_call(runtime, args: tuple, form, first):
    """A cukiln.torch call that the native path did not take eagerly: the Python path where it runs eagerly and the
    native path does not serve the op, else through the op specialized to its constants (runtime/specialize.py)."""
    if direct(first, form.op):
        return public(runtime, form, runtime.run(args, form), args)
    result = specialized_call(form.op, args, lse=all(form.wanted()))
    if form.inplace and runtime.schema.inplace_op:
        return public(runtime, form, None, args)
    return result
