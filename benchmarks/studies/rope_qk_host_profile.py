"""Host µs per call on a GPU machine, rope_qk's plan-cache hit beside rope's and torch's add_, two rounds of
best-of-3 timeit, then a cProfile of the rope_qk hit. Run on a GPU: python benchmarks/studies/rope_qk_host_profile.py"""
import cProfile, pstats, timeit, torch, cukiln
from cukiln import rope_api
qkv = torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16)
q, k = qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)
cache = torch.rand(4096, 128, device="cuda"); pos = torch.zeros(1, device="cuda", dtype=torch.int64)
x = torch.randn(1, 1, 1, 64, device="cuda")
y = torch.randn(1, device="cuda")
cases = {
  "add_": lambda: y.add_(1.0),
  "rope_qk full": lambda: cukiln.rope_qk(q, k, cos_sin_cache=cache, positions=pos, layout="thd", inplace=True),
  "prepare qk": lambda: rope_api.prepare(q, k, cos_sin_cache=cache, positions=pos, layout="thd", inplace=True),
  "prepare q only (cache, pos)": lambda: rope_api.prepare(q, None, cos_sin_cache=cache, positions=pos, layout="thd", inplace=True),
  "prepare rope base": lambda: rope_api.prepare(x, None, base=10000.0, inplace=True),
  "rope full base": lambda: cukiln.rope(x, base=10000.0, inplace=True),
  "meta q": lambda: (q.shape, q.stride(), q.dtype, q.is_neg(), q.get_device(), q.data_ptr()),
  "meta cache": lambda: (cache.shape, cache.stride(), cache.dtype, cache.is_neg(), cache.get_device(), cache.data_ptr()),
}
for f in cases.values():
    for _ in range(1000): f()
torch.cuda.synchronize()
for rnd in range(2):
    for name, f in cases.items():
        n = 20000
        t = min(timeit.repeat(f, number=n, repeat=3)) / n * 1e6
        torch.cuda.synchronize()
        print(f"{name:32s} {t:7.2f} us", flush=True)
f = cases["prepare qk"]
pr = cProfile.Profile(); pr.enable()
for _ in range(20000): f()
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(14)
