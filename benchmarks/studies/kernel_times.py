"""cukiln's own calls only, from whichever tree is installed, on the rope bench's dense shapes (out= with a freqs
table and in place with base), packed thd sequences and decode cases: median ms each (this tree's
tools/timing.py, so that two trees are timed alike), JSON to argv[1]. ab_trees.sh runs it for two trees."""
import json, sys, torch
import cukiln
import importlib.util, os
_spec = importlib.util.spec_from_file_location("timing", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "timing.py"))
_timing = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(_timing)
median_ms, rotating_sets, copy_tbps = _timing.median_ms, _timing.rotating_sets, _timing.copy_tbps
print("cukiln from", cukiln.__file__)

rows = []
def rec(name, calls, nbytes):
    ms = median_ms(calls)
    rows.append({"case": name, "ms": ms, "tbps": nbytes / ms / 1e9})

for shape in ((4096, 1, 128, 128), (512, 32, 24, 128), (4096, 2, 32, 128)):
    S, B, H, D = shape
    for view in ("sbhd", "bshd", "bhsd->bshd"):
        for dt in (torch.bfloat16,):
            freqs = torch.rand(S, 1, 1, D, device="cuda") * 100
            def make():
                if view == "sbhd": x, lay = torch.randn(S, B, H, D, device="cuda", dtype=dt), "sbhd"
                elif view == "bshd": x, lay = torch.randn(B, S, H, D, device="cuda", dtype=dt), "bshd"
                else: x, lay = torch.randn(B, H, S, D, device="cuda", dtype=dt).transpose(1, 2), "bshd"
                return x, torch.empty_like(x), lay
            xb = S * B * H * D * 2
            sets = rotating_sets(make, 2 * xb)
            rec(f"rope {shape} {view} bf16 out", [lambda s=s: cukiln.rope(s[0], freqs=freqs, layout=s[2], out=s[1]) for s in sets], 2 * xb + freqs.numel() * 4)
            rec(f"rope {shape} {view} bf16 inplace base", [lambda s=s: cukiln.rope(s[0], base=10000.0, layout=s[2], inplace=True) for s in sets], 2 * xb)
for n in (1, 16, 256):
    lens = [4096 * 16 // n] * n
    t = sum(lens)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
    freqs = torch.rand(max(lens), 128, device="cuda")
    sets = rotating_sets(lambda: torch.randn(t, 32, 128, device="cuda", dtype=torch.bfloat16), t * 32 * 128 * 4)
    rec(f"rope thd {n} seqs", [lambda x=x: cukiln.rope(x, freqs=freqs, layout="thd", cu_seqlens=cu, max_seqlen=max(lens), inplace=True) for x in sets], 2 * t * 32 * 128 * 2)
for b, T in ((1, 512), (1, 8192), (8, 512), (32, 2048), (128, 8192), (64, 1024)):
    def make():
        q = torch.randn(b, 32, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, 8, T, 128, device="cuda", dtype=torch.bfloat16)
        return q, k, torch.randn_like(k), torch.empty_like(q)
    nbytes = 2 * b * 8 * T * 128 * 2
    sets = rotating_sets(make, nbytes)
    rec(f"decode b={b} T={T}", [lambda s=s: cukiln.decode_attention(s[0], s[1], s[2], T, out=s[3]) for s in sets], nbytes)
json.dump({"copy_tbps": copy_tbps(), "rows": rows}, open(sys.argv[1], "w"), indent=1)
print("done", len(rows))
