"""What every family's torch ops share: the ``cukiln`` op library, and the test for a call that may skip the
dispatcher."""

from __future__ import annotations

import torch



# The ops are defined with torch.library.Library rather than torch.library.custom_op: the same schema,
# fake kernels and autograd, at a fraction of custom_op's per-call host time (`cukiln bench overhead`).
LIBRARY = torch.library.Library("cukiln", "DEF")


_compiling = torch.compiler.is_compiling  # eager() runs on every eager call: one name, not two attribute reads


def eager(x: torch.Tensor) -> bool:
    """True when nothing traces or intercepts ops (torch.compile, functorch transforms, dispatch modes) and
    x is a plain tensor: then calling the kernels directly is exactly what the ops would do."""
    return (not _compiling() and type(x) is torch.Tensor and not torch._C._are_functorch_transforms_active()
            and not torch._C._len_torch_dispatch_stack())


# op name -> its handle in the native hot path (native.register), for the ops the native path serves; an attention
# op's name + native.NO_LSE -> its variant that allocates no lse (native.attention_callers)
NATIVE_HANDLES: dict = {}
# op name -> its Python kernel and its fake kernel (implement(), fake()): what an op specialized to a call's
# constants runs (runtime/specialize.py)
KERNELS: dict = {}
FAKES: dict = {}
# op name -> {a tensor argument the op writes: the bool argument without which it leaves that tensor alone}: an op
# specialized to that bool as False (runtime/specialize.py) declares the tensor read-only, so that a compiled graph
# holds one mutated input fewer
WRITTEN_ONLY_WITH: dict = {}
def one_graph_node(wrapper):
    """Decorator for a cukiln.torch wrapper: torch.compile records a call of it as one node of its graph
    (torch.compiler.allow_in_graph) rather than tracing its Python. The wrapper then runs as plain Python on traced
    tensors, when torch.compile computes the call's example results and when AOTAutograd traces the graph (where
    runtime/specialize.py's call finds the op it calls), and a compiled call guards on its own arguments alone. Traced
    instead, the wrapper left 51-74 guards (on its defaults, its modules' globals, the builtins it read), evaluated
    on every call of the compiled function (`git show 6d07f26:benchmarks/studies/one_graph_node_ab.py`)."""
    return torch.compiler.allow_in_graph(wrapper)


def direct(x: torch.Tensor, op: str) -> bool:
    """True when a cukiln.torch wrapper should run the kernels from Python rather than through op cukiln::``op``:
    an eager call (eager()) of an op the native hot path does not serve. Where it serves the op, its C++ kernels
    run the call for less host time than the Python path (`cukiln bench overhead`), eagerly as when compiled."""
    return op not in NATIVE_HANDLES and eager(x)


def wants_grad(x: torch.Tensor) -> bool:
    return x.requires_grad and torch.is_grad_enabled()


def implement(name: str, kernel, autograd, miss=None, per_call: tuple[str, ...] = (),
              grad_refused: tuple[str, ...] = ()) -> None:
    """Register op cukiln::``name``'s kernels: ``kernel`` (Python, every device: CPU tensors reach its validation,
    which explains them) and, at the Autograd key, the native hot path's C++ kernels where it loads and ``miss`` is
    given (runtime/native.py: ``miss(*arguments) -> (result, description)``; ``per_call`` names the int arguments a
    plan refills, ``grad_refused`` the tensors whose requiring grad hands a native caller's call back), else
    ``autograd`` itself."""
    from . import native

    LIBRARY.impl(name, kernel, "CompositeExplicitAutograd")
    KERNELS[name] = kernel
    arguments = [a.name for a in getattr(torch.ops.cukiln, name).default._schema.arguments]
    handle = None if miss is None else native.register(name, miss, autograd, tuple(a in per_call for a in arguments),
                                                       tuple(a in grad_refused for a in arguments))
    if handle is not None:
        NATIVE_HANDLES[name] = handle
    else:
        LIBRARY.impl(name, autograd, "Autograd")


def fake(name: str):
    """Decorator: ``fn`` as op cukiln::``name``'s fake kernel (torch.library.register_fake), kept in FAKES."""
    def register(fn):
        FAKES[name] = fn
        return torch.library.register_fake(f"cukiln::{name}", fn, lib=LIBRARY)

    return register
