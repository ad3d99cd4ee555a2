"""What every family's torch ops share: the ``cukiln`` op library, and the test for a call that may skip the
dispatcher."""

from __future__ import annotations

import torch

# The ops are defined with torch.library.Library rather than torch.library.custom_op: the same schema,
# fake kernels and autograd, at a fraction of custom_op's per-call host time (`cukiln bench overhead`).
LIBRARY = torch.library.Library("cukiln", "DEF")


def eager(x: torch.Tensor) -> bool:
    """True when nothing traces or intercepts ops (torch.compile, functorch transforms, dispatch modes) and
    x is a plain tensor: then calling the kernels directly is exactly what the ops would do."""
    return (type(x) is torch.Tensor and not torch.compiler.is_compiling()
            and not torch._C._are_functorch_transforms_active() and not torch._C._len_torch_dispatch_stack())


def wants_grad(x: torch.Tensor) -> bool:
    return x.requires_grad and torch.is_grad_enabled()
