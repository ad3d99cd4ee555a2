"""Decode attention's paths in `cukiln bench overhead`: host µs per call at b = 1, T = 64 (the kernel takes a
few µs), beside rope's and torch's in the same run."""

from __future__ import annotations


def overhead_paths() -> dict:
    """name -> zero-argument callable: cukiln.decode_attention with out= and allocating, the torch op eager and
    through the dispatcher, a compiled function, a CUDA graph replay, and the breakdown of the out= call."""
    import torch

    import cukiln
    import cukiln.torch
    from cukiln import decode_api

    from cukiln.launch import kernel

    from ..overhead import bare_launch, compiled_and_graphed, specialized_op
    from ..overhead import compiled as compiled_in

    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    lens = torch.full((1,), 64, dtype=torch.int32, device="cuda")
    compiled, replay = compiled_and_graphed(lambda t: cukiln.torch.decode_attention(t, k, v, 64), q)
    plan = decode_api.plan_call(q, k, v, 64, out=out)
    a = plan.attention
    bound = kernel(plan.device, a.module, a.symbol, a.fmt, a.grid, a.block, a.shared, a.overlap_previous, a.cluster)
    values = decode_api.launch_values(plan, out=out.data_ptr(), lse=0)[0]
    stream = torch.cuda.current_stream().cuda_stream
    op_args = decode_api.arguments(q, k, v, 64, return_lse=True)[0]
    args, form, outputs = decode_api.arguments(q, k, v, 64, out=out)
    return {
        "cukiln.decode_attention (b=1, T=64, out=)": lambda: cukiln.decode_attention(q, k, v, 64, out=out),
        "cukiln.decode_attention (allocates out)": lambda: cukiln.decode_attention(q, k, v, 64),
        "cukiln.decode_attention (kv_lens tensor, out=)": lambda: cukiln.decode_attention(q, k, v, lens, out=out),
        "cukiln.torch.decode_attention (eager)": lambda: cukiln.torch.decode_attention(q, k, v, 64),
        "op cukiln::decode_attention through the dispatcher": lambda: torch.ops.cukiln.decode_attention(*op_args),
        "op cukiln::decode_attention specialized to the call's constants, through the dispatcher": specialized_op(
            "decode_attention", op_args),
        "torch.compile(fullgraph) of cukiln.torch.decode_attention": compiled,
        "torch.compile(reduce-overhead) of cukiln.torch.decode_attention": compiled_in(
            lambda t: cukiln.torch.decode_attention(t, k, v, 64), q, mode="reduce-overhead"),
        # above, the caches are closed over and copied into the graph's buffers on every replay; here they are static
        # (as a model's KV cache buffers are) and q alone is copied, as captured `y + 1.0` copies its y
        "torch.compile(reduce-overhead) of cukiln.torch.decode_attention, caches static": compiled_in(
            lambda t, kc, vc: cukiln.torch.decode_attention(t, kc, vc, 64), q, k.clone(), v.clone(),
            mode="reduce-overhead", static=(1, 2)),
        "CUDA graph replay of cukiln.torch.decode_attention": replay,
        "decode breakdown: the Python path (cached plan, out=)": lambda: decode_api.RUNTIME.run(args, form, outputs),
        "decode breakdown: bound kernel launch (pack, context check, launch)": lambda: bound(values, stream),
        "decode breakdown: driver launch alone": bare_launch(bound, values, stream),
    }
