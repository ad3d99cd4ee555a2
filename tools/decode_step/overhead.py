"""The decode step's host-time paths for `cukiln bench overhead`."""

from __future__ import annotations

from .bench import SETS, bare_step_launches, setup_case


def overhead_paths() -> dict:
    """name -> zero-argument callable for `cukiln bench overhead`: a decode step of one token (GQA 32/8, d 128,
    bf16, a cache of 64 tokens, lengths on the device) as cukiln.decode_step, the torch op eager, through the
    dispatcher, compiled (default and reduce-overhead modes) and replayed from a CUDA graph; cukiln.kv_append
    alone; and the step's kernels launched bare (the driver's share, the floor of any Python path)."""
    import torch

    import cukiln
    import cukiln.torch as ct
    from cukiln import decode_step_api

    from ..overhead import compiled, compiled_and_graphed, probe_ops, specialized_op

    s = setup_case(SETS[0], 1, 64)
    q, k, v, kc, vc, lens, table, out = (s[n] for n in ("q", "k", "v", "k_cache", "v_cache", "lens", "cos_sin",
                                                         "out"))

    def op_step(q, k, v, k_cache, v_cache, lens):
        return ct.decode_step(q, k, v, k_cache, v_cache, lens, cos_sin_cache=table)

    step_compiled, step_replay = compiled_and_graphed(op_step, q, k, v, kc, vc, lens)
    touch_step = probe_ops().touch_step_.default
    op_args = decode_step_api.arguments(q, k, v, kc, vc, lens, cos_sin_cache=table, return_lse=True)[0]
    return {
        "cukiln.decode_step (b=1, T=64, device lengths, out=)": lambda: cukiln.decode_step(
            q, k, v, kc, vc, lens, cos_sin_cache=table, out=out),
        "cukiln.decode_step (b=1, T=64, device lengths, allocates out)": lambda: cukiln.decode_step(
            q, k, v, kc, vc, lens, cos_sin_cache=table),
        "cukiln.kv_append (in place)": lambda: cukiln.kv_append(q, k, v, kc, vc, lens, cos_sin_cache=table,
                                                                inplace=True),
        "cukiln.torch.decode_step (eager)": lambda: op_step(q, k, v, kc, vc, lens),
        "op cukiln::decode_step through the dispatcher": lambda: torch.ops.cukiln.decode_step(*op_args),
        "op cukiln::decode_step specialized to the call's constants, through the dispatcher": specialized_op(
            "decode_step", op_args),
        "torch.compile(fullgraph) of cukiln.torch.decode_step": step_compiled,
        "floor: torch.compile(fullgraph) of a do-nothing op of the step's tensors (2 written), returning q": compiled(
            lambda *t: (touch_step(*t, table), t[0])[1], q, k, v, kc, vc, lens),
        "torch.compile(reduce-overhead) of cukiln.torch.decode_step": compiled(op_step, q, k, v, kc, vc, lens,
                                                                               mode="reduce-overhead"),
        "torch.compile(reduce-overhead) of cukiln.torch.decode_step, every input static": compiled(
            op_step, q, k, v, kc.clone(), vc.clone(), lens.clone(), mode="reduce-overhead", static=True),
        "CUDA graph replay of cukiln.torch.decode_step": step_replay,
        "decode_step breakdown: its kernels, bare driver launches": bare_step_launches(s),
    }
