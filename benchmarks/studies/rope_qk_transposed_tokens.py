"""rope_qk on (b, h, s, d) storage read as bshd (the bench's transposed case, GQA 32/8, s 4096, d 128): does the
number of tokens a block limit it? Tokens a block forced to 1, 2, 4, 8 (head rows divided accordingly) beside the
planner's own choice, each timed twice in mirrored order; prints ms and the ratio to a same-run copy.
Run on a GPU: python benchmarks/studies/rope_qk_transposed_tokens.py OUT.json"""
import json, sys, torch
import cukiln
from cukiln import rope_api, rope_plan
from cukiln.tools.timing import median_ms, rotating_sets, copy_tbps
orig = rope_plan.block_shape
def force(n):
    def shape(g, h, t, two, mx, mn):
        bx, by, bz = orig(g, h, t, False, mx, mn)
        by = max(1, min(-(-by // n), mx // (bx * n)))
        return bx, by, min(n, t)
    rope_plan.block_shape = shape if n else orig
    rope_api.PLANS = type(rope_api.PLANS)()
copy = copy_tbps()
b, hq, hk, s, d = 1, 32, 8, 4096, 128
cache = torch.rand(131072, d, device="cuda")
pos = torch.arange(s, device="cuda")
def make():
    return (torch.randn(b, hq, s, d, device="cuda").to(torch.bfloat16), torch.randn(b, hk, s, d, device="cuda").to(torch.bfloat16))
nbytes = 2 * b * s * (hq + hk) * d * 2 + s * d * 4
sets = rotating_sets(make, nbytes)
calls = [lambda q=q, k=k: cukiln.rope_qk(q.transpose(1, 2), k.transpose(1, 2), cos_sin_cache=cache, layout="bshd", positions=pos, inplace=True) for q, k in sets]
res = {}
for n in (0, 1, 2, 4, 8, 8, 4, 2, 1, 0):
    force(n)
    ms = median_ms(calls)
    res.setdefault(str(n), []).append(ms)
force(0)
for n, v in res.items():
    ms = sum(v) / len(v)
    print(f"tokens a block {n or 'rule'}: {ms*1e3:.2f} us  {nbytes / ms / 1e9 / copy:.3f} x copy")
json.dump({"copy": copy, "res": res}, open(sys.argv[1], "w"))
