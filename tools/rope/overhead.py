"""RoPE's paths in `cukiln bench overhead`: host µs per call on a tiny tensor."""

from __future__ import annotations


def overhead_paths() -> dict:
    """name -> zero-argument callable: cukiln.rope in its forms, cukiln.torch.rope eager and through the ops, a
    compiled function, a CUDA graph replay, the breakdown of the in-place call, and rope_qk as a serving step
    calls it (q and k of one token's fused projection, a cos|sin cache, positions)."""
    import torch

    import cukiln
    import cukiln.torch
    from cukiln import rope_api
    from cukiln.launch import kernel

    from ..overhead import bare_launch, compiled_and_graphed, python_hit, specialized_op
    from ..overhead import compiled as compiled_in

    x = torch.randn(1, 1, 1, 64, device="cuda")
    freqs = torch.rand(1, 64, device="cuda")
    out = torch.empty_like(x)
    compiled, replay = compiled_and_graphed(lambda t: cukiln.torch.rope(t, base=10000.0, inplace=True), x)
    _, graph_replay = compiled_and_graphed(lambda t: cukiln.rope(t, base=10000.0, inplace=True), x)

    hit = python_hit(rope_api.RUNTIME, *rope_api.arguments(x, base=10000.0, inplace=True))
    p = rope_api.plan_call(x, base=10000.0, inplace=True)[0]
    bound = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, 0, p.overlap_previous)
    values = p.values
    stream = torch.cuda.current_stream().cuda_stream
    op_args = rope_api.arguments(x, base=10000.0)[0][1:]  # the op's arguments after x, as the call above
    x_grad = x.clone().requires_grad_(True)
    qkv = torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16)
    q, k = qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)
    serving = dict(cos_sin_cache=torch.rand(4096, 128, device="cuda"), positions=torch.zeros(1, device="cuda",
                   dtype=torch.int64), layout="thd")
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    table, positions = serving["cos_sin_cache"], serving["positions"]

    def qk_step(q, k):  # a serving step's rotation: q and k of one fused projection, in place
        return cukiln.torch.rope_qk(q, k, cos_sin_cache=table, positions=positions, layout="thd", inplace=True)

    def qk_of_projection(qkv):  # the same inside a compiled function: q and k sliced from the projection there
        # (given q and k, two aliasing inputs, torch.compile adds a copy of their storage and a copy back)
        qk_step(qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128))
        return qkv

    def qk_of_projection_and_cache(qkv, cache):  # the cos|sin cache an argument, static as a serving stack's buffer is
        cukiln.torch.rope_qk(qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128), cos_sin_cache=cache,
                             positions=positions, layout="thd", inplace=True)
        return qkv

    qk_compiled, qk_replay = compiled_and_graphed(qk_of_projection, qkv)
    qk_args = rope_api.qk_arguments(q, k, **serving)[0]
    qk_hit = python_hit(rope_api.QK_RUNTIME, *rope_api.qk_arguments(q, k, inplace=True, **serving))
    return {
        "cukiln.rope (in place, base)": lambda: cukiln.rope(x, base=10000.0, inplace=True),
        "cukiln.rope (out=, freqs)": lambda: cukiln.rope(x, freqs=freqs, out=out),
        "cukiln.rope (allocates out, freqs)": lambda: cukiln.rope(x, freqs=freqs),
        "cukiln.torch.rope (eager, in place, base)": lambda: cukiln.torch.rope(x, base=10000.0, inplace=True),
        "cukiln.torch.rope (eager, allocates out, freqs)": lambda: cukiln.torch.rope(x, freqs=freqs),
        "cukiln.torch.rope (x requires grad: op + autograd)": lambda: cukiln.torch.rope(x_grad, base=10000.0),
        "op cukiln::rope_ through the dispatcher (in place)": lambda: torch.ops.cukiln.rope_(x, *op_args),
        "op cukiln::rope through the dispatcher (allocates)": lambda: torch.ops.cukiln.rope(x, *op_args),
        "op cukiln::rope_ specialized to the call's constants, through the dispatcher (in place)": specialized_op(
            "rope_", (x, *op_args)),
        "torch.compile(fullgraph) of cukiln.torch.rope": compiled,
        "CUDA graph replay of cukiln.torch.rope": replay,
        "CUDA graph replay of cukiln.rope": graph_replay,
        "torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)": compiled_in(
            lambda t: cukiln.torch.rope(t, base=10000.0), x, mode="reduce-overhead"),
        "torch.compile(fullgraph) of cukiln.torch.rope (allocates out)": compiled_in(
            lambda t: cukiln.torch.rope(t, base=10000.0), x),
        "cukiln.torch.rope_qk (eager, in place, cos_sin_cache, positions)": lambda: qk_step(q, k),
        "op cukiln::rope_qk_ through the dispatcher (in place)": lambda: torch.ops.cukiln.rope_qk_(*qk_args),
        "op cukiln::rope_qk_ specialized to the call's constants, through the dispatcher (in place)": specialized_op(
            "rope_qk_", qk_args),
        "torch.compile(fullgraph) of cukiln.torch.rope_qk (in place, q and k sliced inside)": qk_compiled,
        "torch.compile(reduce-overhead) of cukiln.torch.rope_qk (in place), qkv static": compiled_in(
            qk_of_projection, qkv.clone(), mode="reduce-overhead", static=True),
        # reduce-overhead copies every input that is not static into the graph's own buffer on every replay: above,
        # the cache (2 MB) and positions, closed over; here positions alone, as in captured `y + 1.0` (its y). The
        # cache is a copy of its own, so that marking it static leaves the other rows' as they are
        "torch.compile(reduce-overhead) of cukiln.torch.rope_qk (in place), qkv and the cos|sin cache static":
            compiled_in(qk_of_projection_and_cache, qkv.clone(), table.clone(), mode="reduce-overhead", static=True),
        "CUDA graph replay of cukiln.torch.rope_qk": qk_replay,
        "torch.compile(reduce-overhead) of cukiln.torch.rope (in place), x static": compiled_in(
            lambda t: cukiln.torch.rope(t, base=10000.0, inplace=True), x.clone(), mode="reduce-overhead",
            static=True),
        "cukiln.rope_qk (in place, cos_sin_cache, positions)": lambda: cukiln.rope_qk(q, k, inplace=True, **serving),
        "cukiln.rope_qk (out=, cos_sin_cache, positions)": lambda: cukiln.rope_qk(q, k, out=(q_out, k_out),
                                                                                   **serving),
        "rope_qk breakdown: Python path's plan-cache hit, overlap checks and pointer refill (in place)": qk_hit,
        "rope breakdown: Python path's plan-cache hit and pointer refill": hit,
        "rope breakdown: bound kernel launch (pack, context check, launch)": lambda: bound(values, stream),
        "rope breakdown: driver launch alone": bare_launch(bound, values, stream),
    }
