"""Bounds from access patterns alone: kernels that only move the bytes a cukiln kernel moves, the same way,
with no arithmetic, timed beside the real kernels. They say how fast any kernel with that pattern can go
on this GPU, and so whether a target is the kernel's to reach.

    python benchmarks/access_bounds.py build DIR            # compile the pattern kernels for sm_90 (no GPU)
    python benchmarks/access_bounds.py run DIR [--out F]    # GPU: time them, print a table
    python benchmarks/access_bounds.py run DIR --cases 8x512,32x32768   # GPU: only these decode points (b x T)
    python benchmarks/access_bounds.py run DIR --cases 128x8192 --l2-promotions 0,64,128   # and the TMA patterns
                                                        # again with the L2 fetching that many bytes a request

Rope, partial rotary in place ([4096, 1, 128, 128] bf16, rotary_dim 32: the first 64 B of every 256 B
row are read and written): the in-place touch of those bytes with 1-8 pieces of 16 B a thread in flight,
with streaming (evict-first) hints, read-only and write-only halves, against the full-width out-of-place
copy (the call the issue's 3x compares with) and cukiln.rope both ways.

Decode (bf16, h_kv 8, d 128, the bench's cache slices): every (row, KV head) block streams its K and V
rows, through `cp.async` 16-byte copies into 2-4 shared-memory stages of 64 keys (the attention kernel's
copies, without its arithmetic), through plain 16-byte loads into registers, or warp-specialized: one producer
warp loading 64-key tiles by the TMA engine (2D tensor maps, plain or 128-byte swizzled boxes) into 2-4 stages
that 4 consumer warps release on mbarriers, against torch SDPA and cukiln.decode_attention on the same inputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cukiln.codegen import render

from raw_launch import allow_shared, build_cubin, launcher, load_functions, sweep_main

# The kernels use cukiln's own helpers (rendered headers): the 16-byte vector loads and stores of rope, with
# their evict-first variant, and the decode kernel's K/V copies into shared memory, with its L2 prefetch size.
SOURCE = r"""
#include "decode.cuh"

using Piece = cukiln::Vec<unsigned, 4>;

template <bool STREAMING>
__device__ __forceinline__ Piece load_piece(const char* p) {
  return cukiln::load_vec<unsigned, 4, STREAMING>(reinterpret_cast<const unsigned*>(p));
}

template <bool STREAMING>
__device__ __forceinline__ void store_piece(char* p, const Piece& v) {
  cukiln::store_vec<unsigned, 4, STREAMING>(reinterpret_cast<unsigned*>(p), v);
}

// Pieces i of a tensor of rows of 256 B whose first PIECES_PER_ROW * 16 B are touched: U pieces a thread,
// a warp's lanes on consecutive pieces. MODE 0: load then store back (xor key: 0 at run time, unknown to
// the compiler); 1: load only; 2: store only; 3: copy to out (same offsets).
template <int U, int PIECES_PER_ROW, int MODE, bool STREAMING>
__device__ __forceinline__ void touch(char* x, char* out, long long pieces, unsigned key, unsigned* sink) {
  const long long first = static_cast<long long>(blockIdx.x) * U * blockDim.x + threadIdx.x;
  Piece v[U];
  long long off[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long i = first + static_cast<long long>(u) * blockDim.x;
    const long long row = i / PIECES_PER_ROW;
    off[u] = i < pieces ? row * 256 + (i - row * PIECES_PER_ROW) * 16 : -1;
    if (MODE != 2 && off[u] >= 0) v[u] = load_piece<STREAMING>(x + off[u]);
    if (MODE == 2) v[u] = Piece{{key, key, key, key}};
  }
  unsigned acc = 0;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (off[u] < 0) continue;
    Piece w{{v[u].v[0] ^ key, v[u].v[1] ^ key, v[u].v[2] ^ key, v[u].v[3] ^ key}};
    if (MODE == 0 || MODE == 2) store_piece<STREAMING>(x + off[u], w);
    if (MODE == 3) store_piece<STREAMING>(out + off[u], w);
    if (MODE == 1) acc ^= w.v[0] ^ w.v[1] ^ w.v[2] ^ w.v[3];
  }
  if (MODE == 1 && acc == key + 1u) sink[0] = acc;  // never true for key 0 xor random data in practice
}

// One struct parameter, as cukiln's kernels take theirs (the sweeps' launcher packs one).
struct TouchArgs { char* x; char* out; long long pieces; unsigned key; unsigned* sink; };

#define TOUCH(name, U, P, MODE, S) \
  extern "C" __global__ void name(const TouchArgs a) { touch<U, P, MODE, S>(a.x, a.out, a.pieces, a.key, a.sink); }

TOUCH(partial_inplace_u1, 1, 4, 0, false)
TOUCH(partial_inplace_u2, 2, 4, 0, false)
TOUCH(partial_inplace_u4, 4, 4, 0, false)
TOUCH(partial_inplace_u8, 8, 4, 0, false)
TOUCH(partial_inplace_u4_streaming, 4, 4, 0, true)
TOUCH(partial_read_u4, 4, 4, 1, false)
TOUCH(partial_write_u4, 4, 4, 2, false)
TOUCH(full_inplace_u4, 4, 16, 0, false)
TOUCH(full_copy_u4, 4, 16, 3, false)

// Decode: block (row * heads + head, split) streams keys [split * keys, (split + 1) * keys) of its K and V
// rows (256 B a key, rows `head_pitch` bytes apart), 128 threads.
constexpr int kTileKeys = 64;
constexpr int kTileBytes = kTileKeys * 256;  // of K, and as much of V

__device__ __forceinline__ void copy_16(char* smem_dst, const char* src) {
  cukiln::decode::copy_to_shared<cukiln::bf16, 8>(reinterpret_cast<cukiln::bf16*>(smem_dst),
                                                  reinterpret_cast<const cukiln::bf16*>(src), true);
}

struct StreamArgs { const char* K; const char* V; long long head_pitch; int keys; unsigned* sink; };

template <int STAGES>
__device__ __forceinline__ void stream_cp_async(const char* K, const char* V, long long head_pitch, int keys,
                                                 unsigned* sink) {
  extern __shared__ __align__(16) char smem[];
  const char* k = K + blockIdx.x * head_pitch + static_cast<long long>(blockIdx.y) * keys * 256;
  const char* v = V + blockIdx.x * head_pitch + static_cast<long long>(blockIdx.y) * keys * 256;
  const int tiles = keys / kTileKeys;
  auto issue = [&](int tile) {
    char* slot = smem + (tile % STAGES) * 2 * kTileBytes;
#pragma unroll
    for (int i = 0; i < kTileBytes / 16 / 128; ++i) {
      const int off = (i * 128 + threadIdx.x) * 16;
      copy_16(slot + off, k + static_cast<long long>(tile) * kTileBytes + off);
      copy_16(slot + kTileBytes + off, v + static_cast<long long>(tile) * kTileBytes + off);
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) issue(s);
    cukiln::decode::commit_copies();
  }
  unsigned acc = 0;
  for (int t = 0; t < tiles; ++t) {
    if (t + STAGES - 1 < tiles) issue(t + STAGES - 1);
    cukiln::decode::commit_copies();
    cukiln::decode::wait_copies<STAGES - 1>();
    __syncthreads();
    const unsigned* slot = reinterpret_cast<const unsigned*>(smem + (t % STAGES) * 2 * kTileBytes);
    acc ^= slot[threadIdx.x * 4] ^ slot[kTileBytes / 4 + threadIdx.x * 4];
    __syncthreads();
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

extern "C" __global__ void __launch_bounds__(128) decode_cp_async_2(const StreamArgs a) {
  stream_cp_async<2>(a.K, a.V, a.head_pitch, a.keys, a.sink);
}
extern "C" __global__ void __launch_bounds__(128) decode_cp_async_3(const StreamArgs a) {
  stream_cp_async<3>(a.K, a.V, a.head_pitch, a.keys, a.sink);
}
extern "C" __global__ void __launch_bounds__(128) decode_cp_async_4(const StreamArgs a) {
  stream_cp_async<4>(a.K, a.V, a.head_pitch, a.keys, a.sink);
}

// Plain 16-byte loads into registers, 8 in flight a thread (4 of K, 4 of V).
__device__ __forceinline__ void stream_registers(const char* K, const char* V, long long head_pitch, int keys,
                                                 unsigned* sink) {
  const char* k = K + blockIdx.x * head_pitch + static_cast<long long>(blockIdx.y) * keys * 256;
  const char* v = V + blockIdx.x * head_pitch + static_cast<long long>(blockIdx.y) * keys * 256;
  const long long bytes = static_cast<long long>(keys) * 256;
  unsigned acc = 0;
  for (long long base = threadIdx.x * 16; base < bytes; base += 4 * 128 * 16) {
    Piece a[4], b[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long off = base + u * 128 * 16;
      if (off < bytes) { a[u] = load_piece<false>(k + off); b[u] = load_piece<false>(v + off); }
      else { a[u] = b[u] = Piece{{0, 0, 0, 0}}; }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= a[u].v[0] ^ a[u].v[3] ^ b[u].v[1] ^ b[u].v[2];
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

extern "C" __global__ void __launch_bounds__(128) decode_registers(const StreamArgs a) {
  stream_registers(a.K, a.V, a.head_pitch, a.keys, a.sink);
}

// Warp-specialized, by the TMA engine: one producer warp (one lane) loads each 64-key tile of K and of V with 2D
// tensor-map copies into a ring of STAGES shared stages, completing on the stage's "full" mbarrier (transaction
// bytes); 4 consumer warps wait on it, touch the tile and release the stage on its "empty" mbarrier, one arrival a
// warp. The cache as a 2D tensor of 128-element rows (keys; a (row, KV head)'s keys are `rows_per_head` rows apart),
// boxes of 64 keys x 128 elements (no swizzle) or 2 boxes of 64 keys x 64 (128-byte swizzle: what ldmatrix would
// read without bank conflicts).
using cukiln::TensorMap;
using cukiln::decode::mbar_arrive;
using cukiln::decode::mbar_expect;
using cukiln::decode::mbar_init;
using cukiln::decode::mbar_wait;
struct alignas(64) TmaArgs { TensorMap k_map; TensorMap v_map; long long rows_per_head; int keys; int pad; unsigned* sink; };

__device__ __forceinline__ void tma_2d(unsigned dst, const TensorMap* map, int x, int y, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar) : "memory");
}

// The same with an L2 eviction-priority hint: each byte is read once, so it may leave the L2 first.
__device__ __forceinline__ void tma_2d_evict_first(unsigned dst, const TensorMap* map, int x, int y, unsigned bar,
                                                   unsigned long long policy) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar), "l"(policy)
               : "memory");
}

template <bool EVICT_FIRST>
__device__ __forceinline__ void tma_box(unsigned dst, const TensorMap* map, int x, int y, unsigned bar,
                                        unsigned long long policy) {
  if (EVICT_FIRST) tma_2d_evict_first(dst, map, x, y, bar, policy); else tma_2d(dst, map, x, y, bar);
}

template <int STAGES, bool SWIZZLED, bool EVICT_FIRST = false>
__device__ __forceinline__ void stream_tma(const TmaArgs& a) {
  // the stages from a 1024-byte boundary (the 128-byte swizzle's), then the barriers (TMA_SHARED_BYTES)
  extern __shared__ __align__(16) char raw[];
  const unsigned raw0 = static_cast<unsigned>(__cvta_generic_to_shared(raw));
  const unsigned base = (raw0 + 1023u) & ~1023u;
  char* smem = raw + (base - raw0);
  const unsigned full0 = base + STAGES * 2 * kTileBytes, empty0 = full0 + 8 * STAGES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) { mbar_init(full0 + 8 * s, 1); mbar_init(empty0 + 8 * s, 4); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int tiles = a.keys / kTileKeys;
  const int row0 = static_cast<int>(blockIdx.x * a.rows_per_head + static_cast<long long>(blockIdx.y) * a.keys);
  if (warp == 4) {  // the producer
    if (lane == 0) {
      unsigned long long policy = 0;
      if (EVICT_FIRST) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        if (t >= STAGES) mbar_wait(empty0 + 8 * s, ((t / STAGES) - 1) & 1);
        mbar_expect(full0 + 8 * s, 2 * kTileBytes);
        const unsigned k_dst = base + s * 2 * kTileBytes, v_dst = k_dst + kTileBytes;
        const int y = row0 + t * kTileKeys;
        if (SWIZZLED) {
          tma_box<EVICT_FIRST>(k_dst, &a.k_map, 0, y, full0 + 8 * s, policy);
          tma_box<EVICT_FIRST>(k_dst + kTileBytes / 2, &a.k_map, 64, y, full0 + 8 * s, policy);
          tma_box<EVICT_FIRST>(v_dst, &a.v_map, 0, y, full0 + 8 * s, policy);
          tma_box<EVICT_FIRST>(v_dst + kTileBytes / 2, &a.v_map, 64, y, full0 + 8 * s, policy);
        } else {
          tma_box<EVICT_FIRST>(k_dst, &a.k_map, 0, y, full0 + 8 * s, policy);
          tma_box<EVICT_FIRST>(v_dst, &a.v_map, 0, y, full0 + 8 * s, policy);
        }
      }
    }
    return;
  }
  unsigned acc = 0;
  for (int t = 0; t < tiles; ++t) {
    const int s = t % STAGES;
    mbar_wait(full0 + 8 * s, (t / STAGES) & 1);
    const unsigned* slot = reinterpret_cast<const unsigned*>(smem + s * 2 * kTileBytes);
    acc ^= slot[threadIdx.x * 4] ^ slot[kTileBytes / 4 + threadIdx.x * 4];
    __syncwarp();
    if (lane == 0) mbar_arrive(empty0 + 8 * s);
  }
  if (acc == 0x9e3779b9u) a.sink[0] = acc;
}

#define TMA(name, ...) \
  extern "C" __global__ void __launch_bounds__(160) name(const __grid_constant__ TmaArgs a) { stream_tma<__VA_ARGS__>(a); }
TMA(decode_tma_2, 2, false)
TMA(decode_tma_3, 3, false)
TMA(decode_tma_4, 4, false)
TMA(decode_tma_3_swizzled, 3, true)
TMA(decode_tma_4_swizzled, 4, true)
TMA(decode_tma_3_swizzled_evict_first, 3, true, true)
"""

ROPE_KERNELS = ("partial_inplace_u1", "partial_inplace_u2", "partial_inplace_u4", "partial_inplace_u8",
                "partial_inplace_u4_streaming", "partial_read_u4", "partial_write_u4", "full_inplace_u4",
                "full_copy_u4")
DECODE_KERNELS = {"decode_cp_async_2": 2, "decode_cp_async_3": 3, "decode_cp_async_4": 4, "decode_registers": 0}
# The warp-specialized TMA stream: name -> (stages, swizzled); 160 threads (4 consumer warps and the producer).
TMA_KERNELS = {"decode_tma_2": (2, False), "decode_tma_3": (3, False), "decode_tma_4": (4, False),
               "decode_tma_3_swizzled": (3, True), "decode_tma_4_swizzled": (4, True),
               "decode_tma_3_swizzled_evict_first": (3, True)}
TMA_THREADS = 160


def tma_shared_bytes(stages: int) -> int:
    """The TMA stream's dynamic shared memory: its stages, 1 KB to align them, two mbarriers a stage."""
    return stages * 2 * 64 * 256 + 1024 + 16 * stages


def tensor_map(cache, swizzled: bool, l2_promotion: int | None = None) -> bytes:
    """A 2D tensor map of a bench cache slice's buffer (bf16 [b, h_kv, capacity, 128]): rows of 128 elements, boxes
    of 64 rows x 128 elements, or x 64 with the 128-byte swizzle; the L2 fetching ``l2_promotion`` bytes around each
    request (None: the runtime's, DECODE_WS_L2_PROMOTION; figures before 2026-12-03 were taken with 256)."""
    b, hkv, _, d = cache.shape
    assert cache.stride(2) == d and cache.stride(0) == hkv * cache.stride(1)
    from cukiln.driver import tensor_map
    from cukiln.generated.dispatch import DECODE_WS_L2_PROMOTION

    l2_promotion = DECODE_WS_L2_PROMOTION if l2_promotion is None else l2_promotion

    return tensor_map("bf16", cache.data_ptr(), (d, b * hkv * cache.stride(1) // d), (d * 2,),
                      (64 if swizzled else d, 64), swizzled, l2_promotion=l2_promotion)


ROPE_SHAPE = (4096, 1, 128, 128)
ROTARY_DIM = 32
# (b, T, split counts (each a whole number of 64-key tiles), rotate): the bench's grid points where cukiln trails SDPA at the tuned table's split
# count, and the b = 1 points of the speed-up targets over every useful split count, also L2-warm
# (one input set, as the anchor figures were taken). A pattern's figure is its best split count.
DECODE_CASES = ((8, 512, (2,), True), (32, 2048, (1,), True), (32, 8192, (1,), True), (8, 32768, (2,), True),
                (128, 2048, (1,), True), (1, 131072, (32,), True),
                (1, 8192, (4, 8, 16, 32, 64), True), (1, 8192, (4, 8, 16, 32, 64), False),
                (1, 32768, (8, 16, 32, 64, 128), True), (1, 32768, (8, 16, 32, 64, 128), False))
THREADS = 128
# ``--cases``: the pattern of the build's ws pipeline at d 128 (3 swizzled TMA stages), and a 3-stage cp.async stream.
GRID_KERNELS = {"decode_cp_async_3": 3}
GRID_TMA_KERNELS = {"decode_tma_3_swizzled": (3, True), "decode_tma_3_swizzled_evict_first": (3, True)}
# ``--l2-promotions``: the TMA patterns of --cases again with each of these L2 promotions (bytes the L2 fetches around
# a request; the runtime's tensor maps took 256 until this measured 128 faster), unswizzled boxes beside them. The
# other TMA patterns take the runtime's.
GRID_TMA_PROMOTED = {"decode_tma_3_swizzled": (3, True), "decode_tma_3": (3, False)}


def build(out_dir: Path) -> None:
    build_cubin(out_dir, SOURCE, "access_bounds", render.render_headers())


# --- GPU side -------------------------------------------------------------------------------------

def _rope_rows(functions, copy: float, stream: int) -> list[dict]:
    import torch

    import cukiln
    from cukiln.tools.timing import median_ms, rotating_sets, tbps

    s, b, h, d = ROPE_SHAPE
    nbytes = s * b * h * d * 2
    sets = rotating_sets(lambda: (torch.randn(ROPE_SHAPE, device="cuda", dtype=torch.bfloat16),
                                  torch.empty(ROPE_SHAPE, device="cuda", dtype=torch.bfloat16)), 2 * nbytes)
    freqs = torch.rand(s, 1, 1, d, device="cuda") * 100  # as `cukiln bench rope` makes them
    freqs_partial = torch.rand(s, 1, 1, ROTARY_DIM, device="cuda") * 100
    sink = torch.zeros(4, dtype=torch.int32, device="cuda")
    rows = []

    def row(name: str, calls, moved: int) -> None:
        ms = median_ms(calls)
        rows.append({"pattern": name, "us": ms * 1e3, "bytes": moved, "x_copy": tbps(moved, ms) / copy})

    partial_pieces = s * b * h * (ROTARY_DIM * 2 // 16)
    full_pieces = s * b * h * (d * 2 // 16)
    for name in ROPE_KERNELS:
        full = name.startswith("full")
        pieces = full_pieces if full else partial_pieces
        unroll = int(name.split("_u")[1].split("_")[0])
        grid = (-(-pieces // (unroll * THREADS)), 1, 1)
        moved = pieces * 16 * (1 if "read" in name or "write" in name else 2)
        calls = [launcher(functions[name], "<QQqI4xQ", (x.data_ptr(), out.data_ptr(), pieces, 0, sink.data_ptr()),
                          grid, (THREADS, 1, 1), 0, stream) for x, out in sets]
        row(name, calls, moved)
    row("torch copy_ (full width, out of place)", [lambda x=x, o=o: o.copy_(x) for x, o in sets], 2 * nbytes)
    row("cukiln.rope full width, out of place",
        [lambda x=x, o=o: cukiln.rope(x, freqs=freqs, out=o) for x, o in sets], 2 * nbytes)
    row(f"cukiln.rope rotary_dim {ROTARY_DIM}, in place",
        [lambda x=x: cukiln.rope(x, freqs=freqs_partial, inplace=True) for x, _ in sets],
        2 * partial_pieces * 16)
    return rows


def grid_cases(cases: list[tuple[int, int]]) -> tuple:
    """``--cases``: the given (b, T) points of the bench's grid, rotating inputs, over the split counts that share T
    out in whole tiles (at most 4096 blocks), each pattern at its best; the TMA producer of the ws pipeline
    (3 stages, 128-byte swizzle) and the 3-stage cp.async stream only."""
    from cukiln.tools.decode.bench import HEADS_KV

    rows = []
    for b, T in cases:
        counts = [s for s in (1, 2, 4, 8, 16, 32) if T % (64 * s) == 0 and b * HEADS_KV * s <= 4096]
        # fewer than 64 blocks reach a fraction of the SMs: only where no count gives more
        rows.append((b, T, tuple(s for s in counts if b * HEADS_KV * s >= 64 or s == counts[-1]), True))
    return tuple(rows)


def _decode_rows(functions, copy: float, stream: int, cases=DECODE_CASES, kernels=None, tma_kernels=None,
                 promotions=()) -> list[dict]:
    import torch

    import cukiln
    from cukiln.tools.decode.bench import HEADS_KV, inputs, kv_bytes, torch_sdpa
    from cukiln.tools.timing import median_ms, rotating_sets, tbps

    kernels = DECODE_KERNELS if kernels is None else kernels
    tma_kernels = TMA_KERNELS if tma_kernels is None else tma_kernels
    sink = torch.zeros(4, dtype=torch.int32, device="cuda")
    rows = []
    for b, T, split_counts, rotate in cases:
        nbytes = kv_bytes(b, T)
        sets = rotating_sets(lambda: inputs(b, T), nbytes) if rotate else [inputs(b, T)]
        case = {"batch": b, "T": T, "rotate": rotate, "kv_bytes": nbytes, "patterns": {}}

        def time(name: str, calls, splits: int | None = None) -> None:
            ms = median_ms(calls)
            best = case["patterns"].get(name)
            if best is None or ms * 1e3 < best["us"]:
                case["patterns"][name] = {"us": ms * 1e3, "x_copy": tbps(nbytes, ms) / copy, "splits": splits}
            case.setdefault("all", []).append({"pattern": name, "splits": splits, "us": ms * 1e3})

        time("torch SDPA", [lambda s=s: torch_sdpa(*s) for s in sets])
        outs = [torch.empty_like(s[0]) for s in sets]
        time("cukiln.decode_attention", [lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o)
                                         for s, o in zip(sets, outs)])
        for name, stages in kernels.items():
            shared = stages * 2 * 64 * 256
            for splits in split_counts:
                calls = []
                for q, k, v in sets:
                    head_pitch = k.stride(1) * 2
                    assert k.stride(0) == HEADS_KV * k.stride(1) and v.stride() == k.stride()
                    calls.append(launcher(functions[name], "<QQqi4xQ", (k.data_ptr(), v.data_ptr(), head_pitch,
                                                                        T // splits, sink.data_ptr()),
                                          (b * HEADS_KV, splits, 1), (THREADS, 1, 1), shared, stream))
                time(name, calls, splits)
        tma_runs = [(name, name, kernel, None) for name, kernel in tma_kernels.items()] + [
            (f"{name} L2 {promotion or 'none'}", name, kernel, promotion)
            for promotion in promotions for name, kernel in GRID_TMA_PROMOTED.items()]
        for label, name, (stages, swizzled), promotion in tma_runs:
            maps = [(tensor_map(k, swizzled, promotion), tensor_map(v, swizzled, promotion), k.stride(1) // k.shape[3])
                    for _, k, v in sets]
            for splits in split_counts:
                calls = [launcher(functions[name], "<128s128sqiiQ40x", (km, vm, per_head, T // splits, 0,
                                                                      sink.data_ptr()),
                                  (b * HEADS_KV, splits, 1), (TMA_THREADS, 1, 1), tma_shared_bytes(stages), stream)
                         for km, vm, per_head in maps]
                time(label, calls, splits)
        rows.append(case)
        print(f"b={b} T={T} rotate={rotate}: " + ", ".join(f"{n} {p['x_copy']:.3f}" for n, p in case["patterns"].items()))
        del sets, outs
        torch.cuda.empty_cache()
    return rows


def run(cubin_dir: Path, out_path: Path | None, cases: list[tuple[int, int]] | None = None,
        promotions: tuple[int, ...] = ()) -> None:
    import torch

    from cukiln.tools.timing import copy_tbps, run_metadata

    torch.cuda.init()
    copy = copy_tbps()
    resources = json.loads((cubin_dir / "index.json").read_text())
    functions = load_functions(cubin_dir / "access_bounds.cubin",
                               list(ROPE_KERNELS) + list(DECODE_KERNELS) + list(TMA_KERNELS))
    for name, stages in DECODE_KERNELS.items():
        if stages:
            allow_shared(functions[name], stages * 2 * 64 * 256)
    for name, (stages, _) in TMA_KERNELS.items():
        allow_shared(functions[name], tma_shared_bytes(stages))
    stream = torch.cuda.current_stream().cuda_stream
    print(f"1 GiB copy {copy:.3f} TB/s")
    if cases:  # the bench grid's points only: decode, the build's own access patterns
        rope = []
        decode = _decode_rows(functions, copy, stream, grid_cases(cases), GRID_KERNELS, GRID_TMA_KERNELS, promotions)
    else:
        rope = _rope_rows(functions, copy, stream)
        decode = _decode_rows(functions, copy, stream)
    result = {**run_metadata("access-bounds", "python benchmarks/access_bounds.py run DIR"), "copy_tbps": copy,
              "resources": resources, "rope_shape": ROPE_SHAPE, "rotary_dim": ROTARY_DIM, "rope": rope,
              "decode": decode}
    if out_path:
        out_path.write_text(json.dumps(result, indent=1))
    if rope:
        full = next(r["us"] for r in rope if r["pattern"] == "cukiln.rope full width, out of place")
        print(f"\nrope {list(ROPE_SHAPE)} bf16 (speedup = cukiln.rope full width out of place / this):")
        for r in rope:
            print(f"  {r['pattern']:42s} {r['us']:8.1f} us {r['x_copy']:6.3f}x copy  {full / r['us']:5.2f}x")
    print("decode (x copy of K+V read; patterns at their best split count; L2-warm: one input set):")
    names = list(decode[0]["patterns"])
    print("  b    T      inputs   " + " ".join(f"{n[:22]:>22s}" for n in names))
    for c in decode:
        print(f"  {c['batch']:<4d} {c['T']:<6d} {'rotating' if c['rotate'] else 'L2-warm':8s} "
              + " ".join(f"{c['patterns'][n]['x_copy']:22.3f}" for n in names))


def _promotion_list(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(","))


if __name__ == "__main__":
    sys.exit(sweep_main(sys.argv[1:], __doc__, build, run, {"--l2-promotions": {
        "dest": "promotions", "type": _promotion_list, "metavar": "BYTES,...",
        "help": "with --cases: the TMA patterns again with the L2 fetching each of these many bytes a request"}}))
