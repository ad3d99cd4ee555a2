// cukiln decode-attention kernel body, shared by every decode module (one per element type).
// Rendered from templates/decode.cuh.j2 — edit the template, then run `cukiln build`.
//
// One query token per batch row (or a few: draft tokens to verify, each seeing the row's keys up to itself) attends
// to keys [start, end) of its row of a KV cache whose K and V are strided views (slices of larger buffers are read in
// place). A block serves one KV head of one row (and, split-KV, one contiguous share of its keys) for up to kHeadRows
// query rows: the query heads of its GQA group, for each of the row's tokens (PackedRows), so every K/V byte is read
// from memory once per block. K/V tiles of kKeys keys are staged in shared memory
// by asynchronous copies, several tiles in flight while one is used.
//
// The arithmetic runs on tensor cores (mma m16n8k16, fp32 accumulation), each warp taking a quarter of every
// tile's keys (16 of a 64-key tile, 32 of a 128-key one) in 16-key slices. A block's query heads are the 16 rows
// of the A operand (rows past the group are zero):
//   scores S[16 heads x 16 keys] = Q . K^T, then an online softmax in base 2 per warp,
//   O[16 heads x D] += P . V with P split into a rounded part and its rounding residual (two mma each),
//   so that the probabilities keep about 16 bits more than the element type holds;
// or, for a group of 8 heads or fewer (from sm_90 on), the same with keys as the rows and the heads as the 8
// columns (attend_tile_by_keys): S^T = K . Q^T and O^T += V^T . P^T, half the tensor-core work.
// The warps' partial results (their maximum, sum and O) are merged through shared memory at the end.
// Split-KV on sm_90 and later runs the splits of one (row, KV head) as one thread-block cluster: each
// block leaves its result in its own shared memory and the cluster merges them through distributed
// shared memory, so no second kernel and no partial results in global memory are needed (the combine
// kernel below serves earlier GPUs and more splits than a cluster holds).
// FP8 (e4m3) caches: the narrow pipeline stages their bytes and each warp widens its keys of a tile to q's type
// before the same tensor-core code (attend's C = unsigned char; fp8.cuh), or, for groups of 8 heads or fewer at the
// head dims of Fp8Rings, streams its own keys through a ring and widens them in registers (attend_fp8_chunk). cukiln.merge_attention's kernel
// (merge_parts) merges partial results of disjoint key sets by their log-sum-exps.
#pragma once
#include "fp8.cuh"

namespace cukiln {
namespace decode {

constexpr int kHeadRows = 16;  // query heads per block: the mma's 16 rows
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr double kLog2e = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;
// No math header under NVRTC: the two special values by their bits.
#define CUKILN_INF __int_as_float(0x7f800000)
#define CUKILN_NAN __int_as_float(0x7fffffff)

// Tile geometry of a variant's pipeline (decode_variants.Pipeline): keys per tile, the shared-memory row
// pitch in elements (16 bytes more than a row, so that the eight rows an ldmatrix phase reads start on
// distinct bank groups), the stages (tiles, all but one of them in flight; decode_abi.py sizes them) and
// the keys each warp takes of a tile, in 16-key slices (the mma's k).
template <int D, int Keys, int Stages>
struct Tile {
  static constexpr int kKeys = Keys, kPitch = D + 8, kStages = Stages;
  static constexpr int kKeysPerWarp = kKeys / kWarps, kSlices = kKeysPerWarp / 16;
};

// Element offset of (key row, column) in a K/V tile: rows Pitch elements apart (the padded tiles the cp.async
// pipelines fill), or the TMA engine's 128-byte swizzle (the warp-specialized pipelines): boxes of 128 bytes a row (64
// columns of 16-bit elements, 128 of an FP8 cache's bytes) whose rows have their 16-byte chunks permuted by the row's
// low 3 bits, so that the eight rows an ldmatrix phase reads fall on distinct bank groups.
template <int Pitch>
struct PaddedRows {
  static __device__ __forceinline__ int at(int row, int col) { return row * Pitch + col; }
};
template <int Keys, int ElementBytes = 2>
struct Swizzled128 {
  static constexpr int kBoxColumns = 128 / ElementBytes, kChunkElems = 16 / ElementBytes;
  static __device__ __forceinline__ int at(int row, int col) {
    return (col / kBoxColumns) * (Keys * kBoxColumns) + row * kBoxColumns
           + ((((col % kBoxColumns) / kChunkElems) ^ (row % 8)) * kChunkElems) + col % kChunkElems;
  }
};

// The barrier of the block's computing warps: all of them, or (Specialized: the warp-specialized kernel) all but the
// producer warps, which take no part in the block's merge: a named barrier of the kThreads consumer threads.
template <bool Specialized = false>
__device__ __forceinline__ void block_sync() {
  if constexpr (Specialized) {
    asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
  } else {
    __syncthreads();
  }
}

// The keys a row attends to. Out of range (end beyond the capacity, negative, start after end): the
// row is malformed and its output is NaN, since a device-resident length cannot be checked on the host.
struct KeyRange {
  int start, end;
  bool malformed;
};

struct RowLengths {
  const int* lens;
  long long len;
  const int* starts;
  long long start;
  long long capacity;

  __device__ __forceinline__ KeyRange of(int b) const {
    const long long e = lens != nullptr ? lens[b] : len;
    const long long s = starts != nullptr ? starts[b] : start;
    const bool bad = e < 0 || e > capacity || s < 0 || s > e;
    return {bad ? 0 : static_cast<int>(s), bad ? 0 : static_cast<int>(e), bad};
  }
};

// A cache row's query tokens (several a row: speculative verification, multi-token prediction; every attention kernel
// but a decode step's): row b has q_lens[b] of them (null: queries), its query rows b * queries + j. Token j of n attends to keys
// [kv_start, kv_lens - n + j + 1) (the caches hold the row's new tokens): the row's range (of) cut at the token's end
// (end_of). A token from n on (padding), and one before which the window starts, attend to no key (zeros, -inf);
// n out of [0, queries], or above the row's keys with several tokens a row, makes the row malformed. With one query
// a row, RowLengths' range.
struct TokenRows {
  RowLengths rows;
  const int* q_lens;
  int queries;

  __device__ __forceinline__ KeyRange of(int b, int& n) const {
    KeyRange range = rows.of(b);
    n = q_lens != nullptr ? q_lens[b] : queries;
    if (n < 0 || n > queries || (queries > 1 && n > range.end)) range = {0, 0, true};
    return range;
  }
  // The end of token j's keys, of a row of n tokens whose keys end at ``end``.
  static __device__ __forceinline__ int end_of(int j, int n, int end) { return j < n ? end - n + j + 1 : 0; }
};

// Where a block's query rows come from and go: row r of its tile (of kHeadRows) is query head head(r) of query row
// query_row(r) (q's and out's [rows, heads_q, D]). One query token a row (HeadRows): heads first_head + r of row b.
// Several (PackedRows): the n x group query rows of a (cache row, KV head), token-major (packed row p = token x group +
// head in the group), kHeadRows of them a block from ``first`` on, so that the keys are read once for all the tokens.
struct HeadRows {
  int b, first_head;
  __device__ __forceinline__ int query_row(int) const { return b; }
  __device__ __forceinline__ int head(int r) const { return first_head + r; }
};
struct PackedRows {
  int b, queries, group, kv_head, first;
  __device__ __forceinline__ int token(int r) const { return (first + r) / group; }
  __device__ __forceinline__ int query_row(int r) const { return b * queries + token(r); }
  __device__ __forceinline__ int head(int r) const { return kv_head * group + (first + r) % group; }
};

// K/V addressing: element j of key t of head h of row b. Three strides when the head dim is contiguous.
struct KvRows3 {
  long long sb, sh, st;
  __device__ __forceinline__ long long row(int b, int h, int t) const { return b * sb + h * sh + t * st; }
  __device__ __forceinline__ long long col(int j) const { return j; }
};
struct KvRows4 {
  long long sb, sh, st, sd;
  __device__ __forceinline__ long long row(int b, int h, int t) const { return b * sb + h * sh + t * st; }
  __device__ __forceinline__ long long col(int j) const { return j * sd; }
};

// A paged cache: a pool of pages with any strides (page, head, slot; the head dim contiguous), key t of row b at slot
// t % page size of page table[b][t / page size]. Holds the stride fields of KvRows3 (the page's in place of the row's)
// and the block table's (page sizes are powers of two: a shift and a mask).
struct KvPages {
  long long sp, sh, st;
  const int* table;  // int32 [batch][table_sb], row b's pages in order
  long long table_sb;
  int shift;  // log2(page size)
  int pages;  // pages in the pool: a table entry outside [0, pages) is malformed
};
template <typename Kv> struct IsPaged { static constexpr bool kValue = false; };
template <> struct IsPaged<KvPages> { static constexpr bool kValue = true; };

// q and out: [batch, heads_q, head_dim] with any strides (small: element-wise access).
struct Rows3 {
  long long sb, sh, sd;
  __device__ __forceinline__ long long at(int b, int h, int j) const { return b * sb + h * sh + j * sd; }
};

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// N elements from global to shared memory, or zeros when `valid` is false (rows past the keys: their
// probabilities are 0, and 0 x garbage could be NaN). Asynchronous copies for 4, 8 and 16 bytes (16
// bypasses L1: K/V are read once); one 16-bit element goes through registers.
template <typename T, int N>
__device__ __forceinline__ void copy_to_shared(T* dst, const T* src, bool valid) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
  } else if constexpr (kBytes == 8 || kBytes == 4) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared_address(dst)), "l"(src),
                 "n"(kBytes), "r"(valid ? kBytes : 0));
  } else {
    *dst = valid ? *src : T{0};
  }
}

// 2^x by the special-function unit, subnormal results flushed to 0: exp2(-inf) = 0. Softmax weights
// below 2^-126 of the row's largest vanish either way next to it.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Merges N partial results of one row, each with its running maximum m[s] and sum l[s] of exp2(logit -
// m[s]) (base 2): sets each one's weight w[s] = exp2(m[s] - top) / total, total = sum of exp2(m[s] - top)
// l[s] over the parts, top the largest maximum, and returns the merged log-sum-exp top + log2(total).
// No key in any part (every m = -inf, l = 0): weights 0 and -inf. A NaN anywhere (fmaxf passes over a
// NaN maximum, so it shows in the weights) makes every weight and the log-sum-exp NaN.
template <int N>
__device__ __forceinline__ float merge_weights(const float (&m)[N], const float (&l)[N], float (&w)[N]) {
  float top = -CUKILN_INF;
#pragma unroll
  for (int s = 0; s < N; ++s) top = fmaxf(top, m[s]);
  const float base = top == -CUKILN_INF ? 0.f : top;  // a finite base: -inf - -inf is NaN
  float total = 0.f;
#pragma unroll
  for (int s = 0; s < N; ++s) {
    w[s] = fast_exp2(m[s] - base);
    total += w[s] * l[s];
  }
  const float scale = total > 0.f ? 1.f / total : total == 0.f ? 0.f : CUKILN_NAN;
#pragma unroll
  for (int s = 0; s < N; ++s) w[s] *= scale;
  return total > 0.f ? base + log2f(total) : total == 0.f ? -CUKILN_INF : CUKILN_NAN;
}

// Thread-block clusters (sm_90 on). A launch without clusters is a cluster of one block.
__device__ __forceinline__ unsigned blocks_in_cluster() {
#if __CUDA_ARCH__ >= 900
  unsigned n;
  asm("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
#else
  return 1;
#endif
}
#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned rank_in_cluster() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every block of the cluster has arrived: the shared-memory writes before it are visible cluster-wide.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The cluster's last barrier: no block leaves while another may still read its shared memory (the reads are all
// used by then: relaxed).
__device__ __forceinline__ void cluster_release() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
// `p`'s place in the shared memory of the cluster's block `rank`, as a generic address: ordinary loads
// read it, so the compiler can issue many before their first use.
__device__ __forceinline__ const float* in_block(const float* p, unsigned rank) {
  unsigned long long remote;
  asm("mapa.u64 %0, %1, %2;\n" : "=l"(remote) : "l"(p), "r"(rank));
  return reinterpret_cast<const float*>(remote);
}
#endif
constexpr int kMaxClusterSplits = 8;  // splits merged in a cluster at most

// Batch-invariant mode (decode_abi.INVARIANT_SPLITS): a row's split count from its own key count alone, never
// from the grid, so that its result does not depend on the batch it is in or on the cache's capacity.
constexpr int kInvariantMaxSplits = 16;
__device__ __forceinline__ int invariant_splits(long long keys) {
  if (keys <= 2048) return 1;
  if (keys <= 8192) return 2;
  return 16;
}

// One output element merged from N splits' results `x` by their weights `w`, split by split in order. The
// cluster merge and the batch-invariant combine both merge through it, with the same weights (merge_weights):
// a split past a row's last (weight 0, result 0) adds an exact zero, so a row's bits depend neither on N nor on
// which of the two merges it.
template <int N>
__device__ __forceinline__ float weighted_sum(const float (&w)[N], const float (&x)[N]) {
  float o = 0.f;
#pragma unroll
  for (int s = 0; s < N; ++s) o += w[s] * x[s];
  return o;
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory"); }


// Copies keys [first, first + count) of one KV head into a [kKeys][kPitch] shared tile, zeros after them.
// Thread i copies pieces i, i + kThreads, ... of the tile (piece = V elements of one key).
template <typename T, int D, int V, class Geometry, typename Kv>
__device__ __forceinline__ void load_tile(T* tile, const T* base, const Kv& kv, int b, int h, int first, int count) {
  constexpr int kPieces = D / V;
  constexpr int kKeys = Geometry::kKeys;
  constexpr int kCopies = kKeys * kPieces / kThreads;  // per thread
  static_assert(kKeys * kPieces % kThreads == 0, "every thread copies the same number of pieces");
  if constexpr (kThreads % kPieces == 0 && kCopies <= 16) {
    // Every copy of a thread is the same piece of a key kStep keys further on: one address computed per
    // tile, then a constant step, the loop unrolled into straight-line copies (wide pieces only: narrow
    // ones would hold too many addresses in registers at once).
    constexpr int kStep = kThreads / kPieces;
    const int piece = threadIdx.x % kPieces, key0 = threadIdx.x / kPieces;
    const long long key_stride = kv.row(0, 0, 1), step = kStep * key_stride;
    const T* first_row = base + kv.row(b, h, first) + kv.col(piece * V);  // a key of the tile: a valid address
    const T* src = first_row + key0 * key_stride;
    T* dst = tile + key0 * Geometry::kPitch + piece * V;
    if (count == kKeys) {  // a whole tile (every tile but a row's last): no key to check
#pragma unroll
      for (int c = 0; c < kCopies; ++c, src += step) copy_to_shared<T, V>(dst + c * kStep * Geometry::kPitch, src, true);
    } else {
#pragma unroll
      for (int c = 0; c < kCopies; ++c, src += step) {
        const bool valid = key0 + c * kStep < count;
        copy_to_shared<T, V>(dst + c * kStep * Geometry::kPitch, valid ? src : first_row, valid);
      }
    }
  } else {
    // Unrolled in steps of 8: narrow copies have up to 48 pieces a thread, whose addresses (and, for the
    // 2-byte path, loaded values) would otherwise all be held in registers at once.
#pragma unroll 8
    for (int c = 0; c < kCopies; ++c) {
      const int i = threadIdx.x + c * kThreads;
      const int key = i / kPieces;
      const int piece = i - key * kPieces;
      const bool valid = key < count;
      copy_to_shared<T, V>(tile + key * Geometry::kPitch + piece * V,
                           base + kv.row(b, h, valid ? first + key : first) + kv.col(piece * V), valid);
    }
  }
}

// Keys [first, first + count) of one KV head of row b from paged K and V pools into a K and a V tile, zeros after them,
// piece by piece as load_tile's general path. Each key's page is looked up in the block table (read-only during the
// kernel: through the non-coherent cache, where the block's threads share its lines); a key whose table entry lies
// outside the pool is read as zeros and sets ``bad`` (the block's result becomes NaN: attend).
template <typename T, int D, int V, class Geometry>
__device__ __forceinline__ void load_paged_tiles(T* k_tile, T* v_tile, const T* k, const T* v, const KvPages& kp,
                                                 const KvPages& vp, int b, int h, int first, int count, bool& bad) {
  constexpr int kPieces = D / V;
  constexpr int kCopies = Geometry::kKeys * kPieces / kThreads;  // per thread
  static_assert(Geometry::kKeys * kPieces % kThreads == 0, "every thread copies the same number of pieces");
  const int* row_pages = kp.table + b * kp.table_sb;
  const int mask = (1 << kp.shift) - 1;
  // Every copy's page first (loads in flight together, a register each), then the copies: their addresses are made
  // one at a time, so that they are not all held at once.
  int page[kCopies];
#pragma unroll
  for (int c = 0; c < kCopies; ++c) {
    const int key = (threadIdx.x + c * kThreads) / kPieces;
    page[c] = __ldg(row_pages + ((first + (key < count ? key : 0)) >> kp.shift));
  }
  const T* k_head = k + h * kp.sh;
  const T* v_head = v + h * vp.sh;
#pragma unroll
  for (int c = 0; c < kCopies; ++c) {
    const int i = threadIdx.x + c * kThreads;
    const int key = i / kPieces;
    const int piece = i - key * kPieces;
    const bool valid = key < count;
    const bool inside = static_cast<unsigned>(page[c]) < static_cast<unsigned>(kp.pages);
    bad |= valid && !inside;
    const bool ok = valid && inside;
    const long long slot = (first + key) & mask;
    const int at = key * Geometry::kPitch + piece * V;
    copy_to_shared<T, V>(k_tile + at, ok ? k_head + page[c] * kp.sp + slot * kp.st + piece * V : k, ok);
    copy_to_shared<T, V>(v_tile + at, ok ? v_head + page[c] * vp.sp + slot * vp.st + piece * V : v, ok);
  }
}


// Four 8x8 matrices of 16-bit elements from shared memory; lane i supplies the address of row i % 8 of
// matrix i / 8 and receives, per matrix, the pair (row i / 4, columns 2 (i % 4), +1) — or with `.trans`
// the pair (rows 2 (i % 4), +1; column i / 4).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row)) : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row)) : "memory");
}

// An 8x8 matrix of 16-bit elements transposed across the warp: lane i holds (row i / 4, columns 2 (i % 4), +1) of
// the matrix before and of its transpose after.
__device__ __forceinline__ unsigned transpose_8x8(unsigned x) {
  unsigned r;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}


// The tensor-core step per element type: C[16x8] += A[16x16] . B[16x8], and packing fp32 pairs into an
// operand register (the lower column in the low half: the A operand's layout, or the B operand's after
// transpose_8x8) and reading them back.
template <typename T> struct Mma;
template <> struct Mma<bf16> {
  static __device__ __forceinline__ void run(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float low(unsigned r) { return to_float(bf16{static_cast<unsigned short>(r & 0xffffu)}); }
  static __device__ __forceinline__ float high(unsigned r) { return to_float(bf16{static_cast<unsigned short>(r >> 16)}); }
};
template <> struct Mma<f16> {
  static __device__ __forceinline__ void run(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float low(unsigned r) { return to_float(f16{static_cast<unsigned short>(r & 0xffffu)}); }
  static __device__ __forceinline__ float high(unsigned r) { return to_float(f16{static_cast<unsigned short>(r >> 16)}); }
};

// The keys of a tile that each of a thread's two query rows attends to (heads as the mma's rows: rows lane / 4 and
// lane / 4 + 8; keys as its rows: the heads of columns 2 (lane % 4) and + 1): the tile's count for both with one query
// token a row (every row's keys alike), or each token's own (causal among a row's new tokens).
struct TileCounts {
  int row[2];
};

// The keys each of a thread's two query rows (``row0``, ``row1`` of the block's) lacks at its split's end ``hi``: a
// token's end is at most 15 keys before its row's (TokenRows::end_of), so 0 to 15, or kNone (a padding token: no key at
// all), in a byte each of one register (the loops' registers are few to spare); then a tile's count of keys from key
// ``first`` on, per row (``count``: the tile's).
struct RowLacks {
  static constexpr unsigned kNone = 0xffu;
  unsigned bytes;

  template <class Place>
  static __device__ __forceinline__ RowLacks of(const Place& place, int rows, int tokens, int end, int hi, int row0,
                                                int row1) {
    const auto lack = [&](int r) {
      const int token_end = r < rows ? TokenRows::end_of(place.token(r), tokens, end) : end;
      return r < rows && place.token(r) >= tokens ? kNone : static_cast<unsigned>(max(0, hi - token_end));
    };
    return RowLacks{lack(row0) | lack(row1) << 8};
  }
  __device__ __forceinline__ TileCounts counts(int hi, int first, int count) const {
    const auto of = [&](unsigned lack) { return lack == kNone ? 0 : min(count, hi - first - static_cast<int>(lack)); };
    return TileCounts{of(bytes & 0xffu), of(bytes >> 8)};
  }
};

struct Scoring {
  float scale_log2;  // scale * log2(e), without softcap
  float scale_over_cap, cap_log2;  // softcap: logit = cap * tanh(dot * scale / cap), in base-2 units

  // Dot products that come out ``factor`` times the true ones (an FP8 cache's key scale, folded in) or ``1 / divisor``
  // times them (a query multiplied into f16's range) scored as the true ones.
  __device__ __forceinline__ void times(float factor) {
    scale_log2 *= factor;
    scale_over_cap *= factor;
  }
  __device__ __forceinline__ void over(float divisor) {
    scale_log2 /= divisor;
    scale_over_cap /= divisor;
  }

  // Logits in base-2 units of one warp's scores, -inf past each row's count of keys (``count.row[e / 2]``: rows r0,
  // r0 + 8). The softcap test is made once per tile (the same way by every thread), not per score.
  template <int N>
  __device__ __forceinline__ void apply(float (&s)[N][4], int key0, int lane, const TileCounts& count) const {
    const bool capped = cap_log2 > 0.f;
#pragma unroll
    for (int nt = 0; nt < N; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + nt * 8 + (lane % 4) * 2 + (e & 1);
        const float logit = capped ? cap_log2 * tanhf(s[nt][e] * scale_over_cap) : s[nt][e] * scale_log2;
        s[nt][e] = key < count.row[e / 2] ? logit : -CUKILN_INF;
      }
    }
  }
  // The same for scores laid out with keys as the rows (attend_tile_by_keys): key lane / 4, + 8 for e >= 2; the
  // heads (rows of the query tile) are the columns, ``count.row[e % 2]``.
  template <int N>
  __device__ __forceinline__ void apply_by_keys(float (&s)[N][4], int key0, int lane, const TileCounts& count) const {
    const bool capped = cap_log2 > 0.f;
#pragma unroll
    for (int sl = 0; sl < N; ++sl) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + sl * 16 + lane / 4 + (e / 2) * 8;
        const float logit = capped ? cap_log2 * tanhf(s[sl][e] * scale_over_cap) : s[sl][e] * scale_log2;
        s[sl][e] = key < count.row[e % 2] ? logit : -CUKILN_INF;
      }
    }
  }
};

// Where a block writes its result: the final output (one pass, or a cluster's merged splits) or, split-KV
// merged by the combine kernel (partial_out given), its split's partial result. A launch-wide choice made
// at run time: the branch is taken the same way by every thread, and it is in the epilogue only, so one
// kernel serves every mode and the build compiles it once.
template <typename T, int D>
struct Sink {
  T* out;
  Rows3 out_rows;
  float* lse;  // null when not asked for (one pass)
  float* partial_out;  // [batch, heads_q, num_splits, D], or null for one pass
  float* partial_lse;  // [batch, heads_q, num_splits]
  int heads_q, num_splits, split;
  int batch_invariant;  // splits by the row's own key count; split results carry base-2 log-sum-exps

  __device__ __forceinline__ long long slot(int b, int qh) const {
    return (static_cast<long long>(b) * heads_q + qh) * num_splits + split;
  }
  __device__ __forceinline__ bool split_kv() const { return partial_out != nullptr; }
  // The splits a row's keys are shared out over: the grid's, or (batch-invariant) the row's own count.
  __device__ __forceinline__ int splits_of(const KeyRange& range) const {
    return batch_invariant ? invariant_splits(range.end - range.start) : num_splits;
  }
  __device__ __forceinline__ void put(int b, int qh, int j, float value) const {
    if (split_kv()) {
      partial_out[slot(b, qh) * D + j] = value;
    } else {
      out[out_rows.at(b, qh, j)] = from_float<T>(value);
    }
  }
  __device__ __forceinline__ void put_lse(int b, int qh, float value) const {
    if (split_kv()) {
      partial_lse[slot(b, qh)] = value;
    } else if (lse != nullptr) {
      lse[static_cast<long long>(b) * heads_q + qh] = value;
    }
  }
};


// Kernel arguments from a variant's parameter struct (every attention variant has these fields; K/V
// addressing is the entry point's, by its stride count).
template <class P>
__device__ __forceinline__ Rows3 out_rows_of(const P& p) {
  return Rows3{p.out_sb, p.out_sh, p.out_sd};
}

template <class P>
__device__ __forceinline__ RowLengths lengths_of(const P& p) {
  return RowLengths{static_cast<const int*>(p.kv_lens), p.kv_len, static_cast<const int*>(p.kv_start),
                    p.kv_start_value, p.capacity};
}
// The same with several query tokens a cache row (every attention kernel's struct has the fields but a step's).
template <class P>
__device__ __forceinline__ TokenRows token_rows_of(const P& p) {
  return TokenRows{lengths_of(p), static_cast<const int*>(p.q_lens), static_cast<int>(p.queries)};
}

template <class P>
__device__ __forceinline__ Scoring scoring_of(const P& p) {
  return Scoring{static_cast<float>(p.scale * kLog2e), static_cast<float>(p.softcap > 0 ? p.scale / p.softcap : 0.0),
                 static_cast<float>(p.softcap * kLog2e)};
}

template <typename T, int D, class P>
__device__ __forceinline__ Sink<T, D> sink_of(const P& p) {
  return Sink<T, D>{static_cast<T*>(p.out), out_rows_of(p), static_cast<float*>(p.lse),
                    static_cast<float*>(p.partial_out), static_cast<float*>(p.partial_lse),
                    static_cast<int>(p.heads_q), static_cast<int>(p.num_splits), static_cast<int>(blockIdx.x),
                    static_cast<int>(p.batch_invariant)};
}

#if __CUDA_ARCH__ >= 900
// Split-KV within a cluster: the splits' results (`own_o`, `own_lse` (base 2) in every block's shared
// memory) merged by their log-sum-exp weights (merge_weights: no key in any split gives 0 and -inf, a NaN
// anywhere NaN), the weights past `own_o` in each block's own shared memory.
// Specialized: the block's computing warps only (block_sync); its producer warps meet the two cluster barriers in
// cluster_merge_barriers.
template <typename T, int D, bool Specialized = false, class Place>
__device__ __forceinline__ void merge_cluster(float* own_o, const float* own_lse, int rows, const Place& place,
                                              const Sink<T, D>& sink) {
  const unsigned n = blocks_in_cluster(), rank = rank_in_cluster();
  float* split_weight = own_o + kHeadRows * D;  // [kMaxClusterSplits][kHeadRows]
  float* merged_lse = split_weight + kMaxClusterSplits * kHeadRows;  // [kHeadRows]
  cluster_sync();  // every split's result is written
  // Per row, once: each split's weight (its output rows are normalized: a sum of 1 each).
  if (threadIdx.x < rows) {
    const int r = threadIdx.x;
    float lses[kMaxClusterSplits], ones[kMaxClusterSplits], w[kMaxClusterSplits];
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      const bool mine = s < static_cast<int>(n);
      lses[s] = mine ? *in_block(own_lse + r, s) : -CUKILN_INF;
      ones[s] = mine ? 1.f : 0.f;
    }
    merged_lse[r] = merge_weights(lses, ones, w);
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) split_weight[s * kHeadRows + r] = w[s];
  }
  block_sync<Specialized>();
  // The outputs shared out over the cluster's threads; every split's element in flight before the sum.
  for (int i = rank * kThreads + threadIdx.x; i < rows * D; i += n * kThreads) {
    const int r = i / D, j = i % D;
    float outs[kMaxClusterSplits], w[kMaxClusterSplits];
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      outs[s] = s < static_cast<int>(n) ? *in_block(own_o + i, s) : 0.f;
      w[s] = split_weight[s * kHeadRows + r];
    }
    sink.put(place.query_row(r), place.head(r), j, weighted_sum(w, outs));
    if (j == 0) sink.put_lse(place.query_row(r), place.head(r), merged_lse[r] * kLn2);
  }
  cluster_release();
}

// merge_cluster's cluster barriers, for a warp that takes no part in its work (the ws pipelines' producers): met
// rather than left to the barriers' treatment of exited threads, so that the two sides' counts read alike here.
__device__ __forceinline__ void cluster_merge_barriers() {
  cluster_sync();
  cluster_release();
}
#endif

// The keys [lo, hi) of split ``split`` of ``num_splits``: an equal share of the row's range, rounded up to
// whole tiles of kKeys so that only the row's last tile can be partial (trailing splits may get no keys).
// 64-bit: the rounding may overshoot.
template <int kKeys>
__device__ __forceinline__ void split_range(const KeyRange& range, int split, int num_splits, int& lo, int& hi) {
  const long long share = (static_cast<long long>(range.end - range.start) + num_splits - 1) / num_splits;
  const long long per_split = (share + kKeys - 1) / kKeys * kKeys;
  lo = static_cast<int>(min(static_cast<long long>(range.end), range.start + split * per_split));
  hi = static_cast<int>(min(static_cast<long long>(range.end), lo + per_split));
}

// The query rows of the block into shared memory (any strides, so element by element): every load issued
// before any store, so that the block waits for one round trip to memory here, not one per batch of loads.
template <typename T, int D, int kPitch, class Place>
__device__ __forceinline__ void load_query(T* q_tile, const T* q, const Rows3& q_rows, const Place& place, int rows) {
  constexpr int kPerThread = kHeadRows * D / kThreads;
  static_assert(kHeadRows * D % kThreads == 0, "every thread loads the same number of query elements");
  T values[kPerThread];
#pragma unroll
  for (int c = 0; c < kPerThread; ++c) {
    const int i = threadIdx.x + c * kThreads, r = i / D, j = i % D;
    values[c] = r < rows ? q[q_rows.at(place.query_row(r), place.head(r), j)] : T{0};
  }
#pragma unroll
  for (int c = 0; c < kPerThread; ++c) {
    const int i = threadIdx.x + c * kThreads;
    q_tile[(i / D) * kPitch + i % D] = values[c];
  }
}

// One warp's running attention over its keys of every tile, as the mma fragments lay it out: rows
// r0 = lane / 4 and r0 + 8 (query heads), columns 2 (lane % 4) + {0, 1} of each 8-wide column tile (keys for
// scores, head-dim elements for O).
template <int D>
struct Running {
  float m[2] = {-CUKILN_INF, -CUKILN_INF};  // running maximum logit per row (base 2)
  float l[2] = {0.f, 0.f};  // this thread's part of the running sum of exp2(logit - m)
  float acc[D / 8][4];
  __device__ __forceinline__ Running() {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  }
};

// The online softmax's step for one row (a query head): its running maximum ``m`` raised to the tile's (already
// reduced over the row's lanes) and its running sum ``l`` rescaled; the correction for O and the base the tile's
// exponents are taken from. The base is finite: a row with no key yet keeps m = -inf (and -inf - -inf is NaN),
// while exp2(-inf) is 0 both for masked keys and for a first correction.
__device__ __forceinline__ void raise_maximum(float& m, float& l, float tile_max, float& correction, float& base) {
  const float m_old = m;
  m = fmaxf(m, tile_max);
  base = m == -CUKILN_INF ? 0.f : m;
  correction = fast_exp2(m_old - base);
  l *= correction;
}

// This warp's keys of one K/V tile (``count`` of its keys valid) into ``run``: scores against the query's A
// fragments (``a(kk)``, per 16-element step of the head dim), online softmax, O += P . V. Rows from ``rows`` on
// are padding (no query head; never written out): their probabilities are zeros, which the tensor cores multiply
// at less power than the ones their zero scores would give, and a row's arithmetic does not depend on another's.
template <typename T, int D, class Geometry, class QueryFragment, class Layout = PaddedRows<Geometry::kPitch>>
__device__ __forceinline__ void attend_tile(Running<D>& run, const T* k_tile, const T* v_tile, const TileCounts& count,
                                            int rows, const Scoring& scoring, const QueryFragment& a_of) {
  using M = Mma<T>;
  constexpr int kSlices = Geometry::kSlices;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // ldmatrix row addresses: the matrix (lane / 8) and row (lane % 8) this lane points at.
  const int mat = lane / 8, mrow = lane % 8;
  const int key0 = warp * Geometry::kKeysPerWarp;
  // Scores of this warp's keys: two 8-key column tiles a slice, summed over the head dim in two
  // independent chains (even and odd 16-element steps), so that one mma's latency overlaps the other's.
  float s[2 * kSlices][4] = {}, s_odd[2 * kSlices][4] = {};  // zero-initialized
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    unsigned a_shared[4];
    const unsigned (&a)[4] = a_of(kk, a_shared);
    float (&chain)[2 * kSlices][4] = kk % 2 == 0 ? s : s_odd;
#pragma unroll
    for (int sl = 0; sl < kSlices; ++sl) {
      unsigned bk[4];
      ldmatrix_x4(bk, k_tile + Layout::at(key0 + sl * 16 + (mat / 2) * 8 + mrow, kk * 16 + (mat % 2) * 8));
      M::run(chain[2 * sl], a, bk[0], bk[1]);
      M::run(chain[2 * sl + 1], a, bk[2], bk[3]);
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2 * kSlices; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] += s_odd[nt][e];
  }
  // Online softmax per row: logits, masking past `count`, the new maximum over the row's 4 lanes.
  scoring.apply(s, key0, lane, count);
  float tile_max[2] = {-CUKILN_INF, -CUKILN_INF};
#pragma unroll
  for (int nt = 0; nt < 2 * kSlices; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[nt][e]);
  }
  float correction[2], m_base[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
    raise_maximum(run.m[i], run.l[i], tile_max[i], correction[i], m_base[i]);
  }
  // The A operand of P . V per slice: (row r0, keys 0-7), (r0 + 8, 0-7), (r0, 8-15), (r0 + 8, 8-15).
  unsigned p_hi[kSlices][4], p_lo[kSlices][4];
  const bool real_row[2] = {lane / 4 < rows, lane / 4 + 8 < rows};
#pragma unroll
  for (int nt = 0; nt < 2 * kSlices; ++nt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float p0 = real_row[half] ? fast_exp2(s[nt][2 * half] - m_base[half]) : 0.f;
      const float p1 = real_row[half] ? fast_exp2(s[nt][2 * half + 1] - m_base[half]) : 0.f;
      run.l[half] += p0 + p1;
      const unsigned rounded = M::pack(p0, p1);
      p_hi[nt / 2][(nt % 2) * 2 + half] = rounded;
      p_lo[nt / 2][(nt % 2) * 2 + half] = M::pack(p0 - M::low(rounded), p1 - M::high(rounded));
    }
  }
  // O is rescaled only when a row's maximum grew somewhere in the warp (past the first tiles, seldom).
  if (__any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f)) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      run.acc[n][0] *= correction[0];
      run.acc[n][1] *= correction[0];
      run.acc[n][2] *= correction[1];
      run.acc[n][3] *= correction[1];
    }
  }
  // O += P . V over this warp's keys, two 8-wide column tiles of the head dim per ldmatrix.
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
#pragma unroll
    for (int sl = 0; sl < kSlices; ++sl) {
      unsigned bv[4];
      ldmatrix_x4_trans(bv, v_tile + Layout::at(key0 + sl * 16 + (mat % 2) * 8 + mrow, n * 16 + (mat / 2) * 8));
      M::run(run.acc[2 * n], p_hi[sl], bv[0], bv[1]);
      M::run(run.acc[2 * n], p_lo[sl], bv[0], bv[1]);
      M::run(run.acc[2 * n + 1], p_hi[sl], bv[2], bv[3]);
      M::run(run.acc[2 * n + 1], p_lo[sl], bv[2], bv[3]);
    }
  }
}

// A query group of 8 heads or fewer computed the other way round: S^T = K . Q^T and O^T = V^T . P^T, keys and
// head-dim elements as the mma's 16 rows, the query heads as its 8 columns. The heads-as-rows tile above pads the
// group to 16 rows (a quarter used at GQA 4, a half at 8); here the tensor cores do half its work, and the query's B
// fragments and O take half its registers. The running state as the fragments lay it out: columns (heads)
// 2 (lane % 4) + {0, 1}; rows lane / 4 and lane / 4 + 8 of each 16-row tile (keys for scores, head-dim elements
// for O).
// (Fp8Rows: attend_fp8_chunk's O, whose rows are each lane's own head-dim elements: fp8_value_element.)
template <int D, bool Fp8Rows = false>
struct RunningByKeys {
  float m[2] = {-CUKILN_INF, -CUKILN_INF};  // running maximum logit per head (base 2)
  float l[2] = {0.f, 0.f};  // this thread's part of the running sum of exp2(logit - m)
  float acc[D / 16][4];  // O^T, 16 head-dim elements by 8 heads per tile
  __device__ __forceinline__ RunningByKeys() {
#pragma unroll
    for (int n = 0; n < D / 16; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  }
};

// The query's B fragments for attend_tile_by_keys (heads 0-7 of the query tile; two 16-element steps of the head dim
// per ldmatrix, the last one alone where their count is odd).
template <typename T, int D, int kPitch>
__device__ __forceinline__ void query_columns(unsigned (&q)[D / 16][2], const T* q_tile) {
  const int lane = threadIdx.x % 32, mat = lane / 8, mrow = lane % 8;
#pragma unroll
  for (int kk = 0; kk + 1 < D / 16; kk += 2) {
    unsigned r[4];
    ldmatrix_x4(r, q_tile + mrow * kPitch + kk * 16 + mat * 8);
    q[kk][0] = r[0];
    q[kk][1] = r[1];
    q[kk + 1][0] = r[2];
    q[kk + 1][1] = r[3];
  }
  if constexpr (D / 16 % 2 == 1) ldmatrix_x2(q[D / 16 - 1], q_tile + mrow * kPitch + (D / 16 - 1) * 16 + (mat % 2) * 8);
}

// --- FP8 (e4m3) caches in per-warp rings, widened in registers --------------------------------------------------------
// For a group of 8 heads or fewer (keys as the mma's rows), from sm_90 on, at head dims 64, 128 and 256: each warp
// stages its own 16-key chunks of K and V bytes in a ring of its own (no block barrier a tile) and builds its tensor-core
// fragments from the bytes in registers, with no widened copy in shared memory. The dot product over the head dim
// does not depend on the order of its terms, so a lane's K fragment takes whole 16-byte chunks of each key's row, and
// q's B fragments are gathered in the same order (fp8_key_element). O's rows are head-dim elements: a lane's V
// fragments take one 16-byte chunk (8 bytes at 64, two chunks at 256) of its keys' rows, and its O elements are
// those (fp8_value_element), which leave_running writes in their place.
template <int D>
struct Fp8Rings {
  static constexpr bool kServes = D == 64 || D == 128 || D == 256;  // decode_abi.FP8_RING_HEAD_DIMS
  static constexpr int kChunks = D / 16;  // 16-byte chunks of a key's row
  static constexpr int kChunkKeys = 16;  // keys a warp stages at a time: one slice of the mma
  static constexpr int kStageBytes = 2 * kChunkKeys * D;  // K, then V
  static constexpr int kKeyGranules = D / 64;  // 16-byte chunks of a key a lane reads for the scores
  static constexpr int kValueBytes = D / 8;  // bytes of a key a lane reads for O
  static constexpr int kValueWords = kValueBytes / 4;
  // Where chunk ``chunk`` of a key's row lies in a stage: the eight lanes of a 16-byte load's phase read keys r and
  // r + 1 (K: chunks c of 4 lanes each) or keys 0, 2, 4, 6 (V: chunks r, r + 1), which rows of a multiple of 128 bytes
  // would put on the same banks; XOR-ing the chunk index by the key's low bits spreads them.
  static __device__ __forceinline__ int k_chunk(int key, int chunk) { return kChunks % 8 == 0 ? chunk ^ ((key & 1) << 2) : chunk; }
  static __device__ __forceinline__ int v_chunk(int key, int chunk) { return kChunks % 8 == 0 ? chunk ^ (key & 6) : chunk; }
  // The chunk of a key's row that granule i of lane c (of the key's four lanes) reads for the scores.
  static __device__ __forceinline__ int key_chunk(int c, int i) { return 4 * i + c; }
};

// The same reads from a tile the TMA engine wrote in the 128-byte swizzle (the ws pipelines' FP8 kernels; head dim 128,
// a key's row one 128-byte line): chunk c of key r lies at c ^ (r % 8). A lane's granules are chunks 2c and 2c + 1,
// so that the eight lanes of a load phase (keys r and r + 1, c = 0-3) read eight distinct chunks; V's reads (keys 2c,
// 2c + 1 at chunk r) are spread by the swizzle itself.
template <int D>
struct Fp8Swizzled : Fp8Rings<D> {
  static_assert(D == 128, "a key's row is one 128-byte line of the swizzle");
  static __device__ __forceinline__ int k_chunk(int key, int chunk) { return chunk ^ (key & 7); }
  static __device__ __forceinline__ int v_chunk(int key, int chunk) { return chunk ^ (key & 7); }
  static __device__ __forceinline__ int key_chunk(int c, int i) { return Fp8Rings<D>::kKeyGranules * c + i; }
};

// The head-dim element of step s's K bytes 0-3 of lane c (of its key's four lanes): granule s / 4 of the lane's
// (its chunk R::key_chunk), word s % 4.
template <class R>
__device__ __forceinline__ int fp8_key_element(int s, int c) { return 16 * R::key_chunk(c, s / 4) + 4 * (s % 4); }
// The head-dim element of byte ``beta`` of lane row r's V bytes: its 8-byte piece r (head dim 64), or chunk r and
// then chunk r + 8 (128, 256).
template <int D>
__device__ __forceinline__ int fp8_value_element(int r, int beta) {
  constexpr int kGranule = Fp8Rings<D>::kValueBytes < 16 ? Fp8Rings<D>::kValueBytes : 16;
  return ((beta / kGranule) * 8 + r) * kGranule + beta % kGranule;
}


// The online softmax of a warp's scores S^T (keys as rows: kept for the heads, 2 (lane % 4) + {0, 1}): each head's
// maximum over this thread's keys, then over the 8 lanes sharing its heads; the running state rescaled; and the B
// operand of O^T += V^T . P^T per slice: keys 0-7 and 8-15 of this thread's column (head lane / 4), each the
// transpose of the scores' 8x8 block, the rounded probabilities (p_hi) and their rounding residuals (p_lo).
template <typename T, int D, bool Fp8Rows, int N>
__device__ __forceinline__ void probabilities_by_keys(RunningByKeys<D, Fp8Rows>& run, float (&s)[N][4], int key0,
                                                      int lane, const TileCounts& count, int rows,
                                                      const Scoring& scoring, unsigned (&p_hi)[N][2],
                                                      unsigned (&p_lo)[N][2]) {
  using M = Mma<T>;
  // Online softmax per head: the maximum over this thread's keys, then over the 8 lanes sharing its heads.
  scoring.apply_by_keys(s, key0, lane, count);
  float tile_max[2] = {-CUKILN_INF, -CUKILN_INF};
#pragma unroll
  for (int sl = 0; sl < N; ++sl) {
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e % 2] = fmaxf(tile_max[e % 2], s[sl][e]);
  }
  float correction[2], m_base[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int lanes = 4; lanes <= 16; lanes *= 2) tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], lanes));
    raise_maximum(run.m[i], run.l[i], tile_max[i], correction[i], m_base[i]);
  }
  const bool real_head[2] = {2 * (lane % 4) < rows, 2 * (lane % 4) + 1 < rows};
#pragma unroll
  for (int sl = 0; sl < N; ++sl) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float p0 = real_head[0] ? fast_exp2(s[sl][2 * half] - m_base[0]) : 0.f;
      const float p1 = real_head[1] ? fast_exp2(s[sl][2 * half + 1] - m_base[1]) : 0.f;
      run.l[0] += p0;
      run.l[1] += p1;
      const unsigned rounded = M::pack(p0, p1);
      p_hi[sl][half] = transpose_8x8(rounded);
      p_lo[sl][half] = transpose_8x8(M::pack(p0 - M::low(rounded), p1 - M::high(rounded)));
    }
  }
  if (__any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f)) {
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      run.acc[n][0] *= correction[0];
      run.acc[n][1] *= correction[1];
      run.acc[n][2] *= correction[0];
      run.acc[n][3] *= correction[1];
    }
  }}

// attend_tile for a group of ``rows`` <= 8 heads, keys as the mma's rows (RunningByKeys). The probabilities P^T
// leave the scores' accumulators as the rows of 8x8 matrices and enter P . V as columns, so each is transposed in
// registers (transpose_8x8) on the way.
template <typename T, int D, class Geometry, class Layout>
__device__ __forceinline__ void attend_tile_by_keys(RunningByKeys<D>& run, const T* k_tile, const T* v_tile,
                                                    const TileCounts& count, int rows, const Scoring& scoring,
                                                    const unsigned (&q)[D / 16][2]) {
  using M = Mma<T>;
  constexpr int kSlices = Geometry::kSlices;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int mat = lane / 8, mrow = lane % 8;
  const int key0 = warp * Geometry::kKeysPerWarp;
  // S^T per slice of 16 keys, summed over the head dim in two independent chains (even and odd steps).
  float s[kSlices][4] = {}, s_odd[kSlices][4] = {};  // zero-initialized
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    float (&chain)[kSlices][4] = kk % 2 == 0 ? s : s_odd;
#pragma unroll
    for (int sl = 0; sl < kSlices; ++sl) {
      unsigned ak[4];  // keys 0-7 and 8-15 of the slice, head-dim elements 0-7 and 8-15 of the step
      ldmatrix_x4(ak, k_tile + Layout::at(key0 + sl * 16 + (mat % 2) * 8 + mrow, kk * 16 + (mat / 2) * 8));
      M::run(chain[sl], ak, q[kk][0], q[kk][1]);
    }
  }
#pragma unroll
  for (int sl = 0; sl < kSlices; ++sl) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[sl][e] += s_odd[sl][e];
  }
  unsigned p_hi[kSlices][2], p_lo[kSlices][2];
  probabilities_by_keys<T>(run, s, key0, lane, count, rows, scoring, p_hi, p_lo);
  // O^T += V^T . P^T: 16 head-dim elements a step, V^T's A fragments by transposing loads of the V rows.
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
#pragma unroll
    for (int sl = 0; sl < kSlices; ++sl) {
      unsigned av[4];  // head-dim elements 0-7 and 8-15 of the step, keys 0-7 and 8-15 of the slice
      ldmatrix_x4_trans(av, v_tile + Layout::at(key0 + sl * 16 + (mat / 2) * 8 + mrow, n * 16 + (mat % 2) * 8));
      M::run(run.acc[n], av, p_hi[sl][0], p_hi[sl][1]);
      M::run(run.acc[n], av, p_lo[sl][0], p_lo[sl][1]);
    }
  }
}

// An FP8 cache's value scale, applied to a warp's O before the merge (the row's weights and lse do not see it).
template <class Run>
__device__ __forceinline__ void scale_output(Run& run, float value_scale) {
#pragma unroll
  for (auto& tile : run.acc) {
#pragma unroll
    for (float& x : tile) x *= value_scale;
  }
}

// A warp's running state in shared memory for finish_block: its maxima and sums per query head ([kHeadRows] each
// at part_m and part_l) and its O ([kHeadRows][D] at part_o), each laid out as the running state is.
template <int D>
__device__ __forceinline__ void leave_running(Running<D>& run, float* part_m, float* part_l, float* part_o) {
  const int lane = threadIdx.x % 32, r0 = lane / 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    run.l[i] += __shfl_xor_sync(0xffffffffu, run.l[i], 1);
    run.l[i] += __shfl_xor_sync(0xffffffffu, run.l[i], 2);
  }
  if (lane % 4 == 0) {
    part_m[r0] = run.m[0];
    part_m[r0 + 8] = run.m[1];
    part_l[r0] = run.l[0];
    part_l[r0 + 8] = run.l[1];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    float* o = part_o + r0 * D + n * 8 + (lane % 4) * 2;
    o[0] = run.acc[n][0];
    o[1] = run.acc[n][1];
    o[8 * D] = run.acc[n][2];
    o[8 * D + 1] = run.acc[n][3];
  }
}
template <int D, bool Fp8Rows>
__device__ __forceinline__ void leave_running(RunningByKeys<D, Fp8Rows>& run, float* part_m, float* part_l, float* part_o) {
  static_assert(kHeadRows == 16, "heads 0-7 and the 8 rows past them fill a warp's kHeadRows");
  const int lane = threadIdx.x % 32, head = 2 * (lane % 4);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int lanes = 4; lanes <= 16; lanes *= 2) run.l[i] += __shfl_xor_sync(0xffffffffu, run.l[i], lanes);
  }
  if (lane < 8) {  // heads 0-7, and the rows past them (no head: no keys) as an empty running state
    const bool padding = lane >= 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      part_m[head + i + (padding ? 8 : 0)] = padding ? -CUKILN_INF : run.m[i];
      part_l[head + i + (padding ? 8 : 0)] = padding ? 0.f : run.l[i];
    }
  }
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      // the head-dim element of row lane / 4 (+ 8 for e >= 2) of tile n
      const int j = Fp8Rows ? fp8_value_element<D>(lane / 4, 2 * n + e / 2) : n * 16 + lane / 4 + (e / 2) * 8;
      part_o[(head + e % 2) * D + j] = run.acc[n][e];
    }
  }
}

// The block's result from its warps' running states: each leaves its maxima, sums and O in shared memory
// (over the K/V stages, now idle); per row, once, each warp's weight and the row's log-sum-exp (base 2); then
// every output element is the weighted sum of the warps' O, written to the sink, or kept in shared memory
// for the cluster's merge when the block is one split of a cluster.
template <typename T, int D, class Geometry, bool Specialized = false, int RegionBytes = 0, class Run, class Place>
__device__ __forceinline__ void finish_block(Run& run, unsigned char* shared, int rows, const Place& place,
                                             const Sink<T, D>& sink) {
  constexpr int kTileElems = Geometry::kKeys * Geometry::kPitch;
  const int warp = threadIdx.x / 32;
  float* part_m = reinterpret_cast<float*>(shared);  // [kWarps][kHeadRows]
  float* part_l = part_m + kWarps * kHeadRows;  // [kWarps][kHeadRows]
  float* part_o = part_l + kWarps * kHeadRows;  // [kWarps][kHeadRows][D]
  leave_running(run, part_m + warp * kHeadRows, part_l + warp * kHeadRows, part_o + warp * kHeadRows * D);
  block_sync<Specialized>();
  float* weight = part_o + kWarps * kHeadRows * D;  // [kWarps][kHeadRows]
  float* row_lse = weight + kWarps * kHeadRows;  // [kHeadRows]
  // A split of a cluster keeps its result in its shared memory for the cluster's merge (past these).
  float* own_o = row_lse + kHeadRows;  // [kHeadRows][D]
  static_assert(((2 + D + 1) * kWarps * kHeadRows + kHeadRows * (1 + D) + (kMaxClusterSplits + 1) * kHeadRows) * 4 <=
                    (RegionBytes > 0 ? RegionBytes : Geometry::kStages * 2 * kTileElems * sizeof(T)),
                "the warps' partial results, the weights and the block's own result fit over the K/V stages");
  if (threadIdx.x < kHeadRows) {
    const int r = threadIdx.x;
    float pm[kWarps], pl[kWarps], w[kWarps];
#pragma unroll
    for (int k = 0; k < kWarps; ++k) {
      pm[k] = part_m[k * kHeadRows + r];
      pl[k] = part_l[k * kHeadRows + r];
    }
    row_lse[r] = merge_weights(pm, pl, w);
#pragma unroll
    for (int k = 0; k < kWarps; ++k) weight[k * kHeadRows + r] = w[k];
  }
  block_sync<Specialized>();
  const bool clustered = blocks_in_cluster() > 1;
  for (int i = threadIdx.x; i < rows * D; i += kThreads) {
    const int r = i / D, j = i % D;
    float o = 0.f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) o += weight[k * kHeadRows + r] * part_o[(k * kHeadRows + r) * D + j];
    if (clustered) {
      own_o[i] = o;
    } else {
      sink.put(place.query_row(r), place.head(r), j, o);
      // natural log, except a batch-invariant split's: its merge takes base 2, as the cluster merge does
      if (j == 0) {
        sink.put_lse(place.query_row(r), place.head(r),
                     sink.split_kv() && sink.batch_invariant ? row_lse[r] : row_lse[r] * kLn2);
      }
    }
  }
#if __CUDA_ARCH__ >= 900
  if (clustered) merge_cluster<T, D, Specialized>(own_o, row_lse, rows, place, sink);
#endif
}

// --- FP8 (e4m3) caches -------------------------------------------------------------------------------------------------
// A cache of e4m3 bytes is staged as it is, half the bytes of a 16-bit one; each warp widens its own keys of a tile to
// q's type in shared memory (widen_rows, fp8.cuh's widen4) before the tensor cores read them as a 16-bit tile's.
template <typename A, typename B> struct SameType { static constexpr bool kValue = false; };
template <typename A> struct SameType<A, A> { static constexpr bool kValue = true; };
template <typename V, V X> struct Constant { static constexpr V value = X; };
template <bool Condition, class A, class B> struct Select { using type = A; };
template <class A, class B> struct Select<false, A, B> { using type = B; };

// Rows [0, Rows) of an FP8 K tile and V tile (``k``, ``v``: D bytes a row) widened to T into ``k_dst`` / ``v_dst``
// (rows Pitch elements apart) by one warp, 8 bytes a lane at a time (a half-warp reads 128 contiguous bytes, a
// quarter-warp writes 128). A batch of loads is issued before its first store (which the compiler may not move them
// past: both are shared memory), so the warp waits for one round trip a batch, not one per piece. The NaN code is looked for once
// per word, and only a warp that holds one widens again with the NaN-keeping form (a cache holds NaN only where an
// input did).
template <typename T, int D, int Pitch, int Rows>
__device__ __forceinline__ void widen_rows(T* k_dst, T* v_dst, const unsigned char* k, const unsigned char* v) {
  constexpr int kPieces = Rows * D / 8 / 32;  // per lane, of each tile
  // pieces of each tile in flight at once: 4 (or 3 or 2) at a time, within the registers
  constexpr int kBatch = kPieces % 4 == 0 ? 4 : kPieces % 3 == 0 ? 3 : kPieces % 2 == 0 ? 2 : 1;
  static_assert(Rows * D / 8 % 32 == 0 && kPieces % kBatch == 0, "every lane widens the same number of pieces");
  const int lane = threadIdx.x % 32;
  unsigned nan_bytes = 0u;
  const auto widen_all = [&](auto nan) {
#pragma unroll
    for (int c0 = 0; c0 < kPieces; c0 += kBatch) {
      uint2 raw[2][kBatch];
#pragma unroll
      for (int c = 0; c < kBatch; ++c) {
        const int i = lane + 32 * (c0 + c), r = i / (D / 8), col = (i % (D / 8)) * 8;
        raw[0][c] = *reinterpret_cast<const uint2*>(k + r * D + col);
        raw[1][c] = *reinterpret_cast<const uint2*>(v + r * D + col);
      }
#pragma unroll
      for (int c = 0; c < kBatch; ++c) {
        const int i = lane + 32 * (c0 + c), r = i / (D / 8), col = (i % (D / 8)) * 8;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          uint4 wide;
          widen4<T, decltype(nan)::value>(raw[t][c].x, wide.x, wide.y);
          widen4<T, decltype(nan)::value>(raw[t][c].y, wide.z, wide.w);
          if constexpr (!decltype(nan)::value) nan_bytes |= e4m3_nan_bytes(raw[t][c].x) | e4m3_nan_bytes(raw[t][c].y);
          *reinterpret_cast<uint4*>((t == 0 ? k_dst : v_dst) + r * Pitch + col) = wide;
        }
      }
    }
  };
  widen_all(Constant<bool, false>{});
  if (__any_sync(0xffffffffu, nan_bytes != 0u)) widen_all(Constant<bool, true>{});
}

// An FP8 tile's geometry in shared memory: rows of D bytes, unpadded (only widen_rows reads them).
template <int D, int Keys>
struct Fp8Tile {
  static constexpr int kKeys = Keys, kPitch = D;
};

// Keys [first, first + kChunkKeys) of K and V (bytes), zeros from ``end`` on, into one warp's ``stage``, each key's
// chunks where Fp8Rings places them. Lane l copies chunk l % (D / 16) of every (32 / (D / 16))-th key. Paged caches:
// each key's page looked up as load_paged_tiles does (a key whose table entry lies outside the pool is read as zeros
// and sets ``bad``).
template <int D, typename Kv>
__device__ __forceinline__ void load_fp8_chunk(unsigned char* stage, const unsigned char* k, const unsigned char* v,
                                               const Kv& k_rows, const Kv& v_rows, int b, int h, int first, int end,
                                               bool& bad) {
  using R = Fp8Rings<D>;
  constexpr int kKeyStep = 32 / R::kChunks, kCopies = R::kChunkKeys / kKeyStep;
  const int lane = threadIdx.x % 32, chunk = lane % R::kChunks, key0 = lane / R::kChunks;
#pragma unroll
  for (int c = 0; c < kCopies; ++c) {
    const int key = key0 + c * kKeyStep;
    const bool valid = first + key < end;
    const int t = valid ? first + key : first;  // a key of the chunk: a valid address
    const unsigned char* k_src;
    const unsigned char* v_src;
    bool ok = valid;
    if constexpr (IsPaged<Kv>::kValue) {
      const int page = __ldg(k_rows.table + b * k_rows.table_sb + (t >> k_rows.shift));
      const bool inside = static_cast<unsigned>(page) < static_cast<unsigned>(k_rows.pages);
      bad |= valid && !inside;
      ok = valid && inside;
      const long long slot = t & ((1 << k_rows.shift) - 1);
      k_src = ok ? k + h * k_rows.sh + page * k_rows.sp + slot * k_rows.st + chunk * 16 : k;
      v_src = ok ? v + h * v_rows.sh + page * v_rows.sp + slot * v_rows.st + chunk * 16 : v;
    } else {
      k_src = k + k_rows.row(b, h, t) + chunk * 16;
      v_src = v + v_rows.row(b, h, t) + chunk * 16;
    }
    copy_to_shared<unsigned char, 16>(stage + key * D + R::k_chunk(key, chunk) * 16, k_src, ok);
    copy_to_shared<unsigned char, 16>(stage + R::kChunkKeys * D + key * D + R::v_chunk(key, chunk) * 16, v_src, ok);
  }
}

// Two e4m3 bytes to two f16 (exact; NaN to NaN), for each half of ``w``: bytes 0-1 into ``lo``, 2-3 into ``hi``.
__device__ __forceinline__ void e4m3x4_to_f16(unsigned w, unsigned& lo, unsigned& hi) {
#if __CUDA_ARCH__ >= 890
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi) : "r"(w));
#else
  __trap();  // the kernels that call it run from sm_90 on
#endif
}

// The power of two that the FP8 kernels' f16 arithmetic multiplies q by: 1 for an f16 query; for a bf16 one, what brings
// the largest magnitude of the block's ``rows`` query rows into [2^14, 2^15), below f16's largest. Each element is then
// exact as f16 down to 2^-28 of the largest (f16's subnormals round those below, and those under 2^-38 of it become
// 0: far under the fp32 rounding of the dot products they enter). A zero or non-finite largest magnitude: 1.
template <typename T, int D, int kPitch>
__device__ __forceinline__ float query_scale(const T* q_tile, int rows) {
  if constexpr (SameType<T, f16>::kValue) {
    return 1.f;
  } else {
    float largest = 0.f;
    for (int i = threadIdx.x % 32; i < rows * D; i += 32) {
      largest = fmaxf(largest, fabsf(to_float(q_tile[(i / D) * kPitch + i % D])));
    }
#pragma unroll
    for (int lanes = 1; lanes < 32; lanes *= 2) largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, lanes));
    if (!(largest > 0.f) || isinf(largest)) return 1.f;
    const int exponent = min(126, max(-126, 14 - ((__float_as_int(largest) >> 23) - 127)));
    return __int_as_float((127 + exponent) << 23);
  }
}

// q's B fragments for attend_fp8_chunk, in f16, times the block's query_scale (taken out of ``scoring`` again): each
// lane's head (lane / 4), at the elements its K fragments hold (R: where they lie, Fp8Rings or Fp8Swizzled).
template <typename T, int D, int kPitch, class R = Fp8Rings<D>>
__device__ __forceinline__ void fp8_query_columns(unsigned (&q)[D / 16][2], const T* q_tile, int rows, Scoring& scoring) {
  const float scale = query_scale<T, D, kPitch>(q_tile, rows);
  scoring.over(scale);
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int s = 0; s < D / 16; ++s) {
    const T* at = q_tile + (lane / 4) * kPitch + fp8_key_element<R>(s, lane % 4);
    q[s][0] = Mma<f16>::pack(to_float(at[0]) * scale, to_float(at[1]) * scale);
    q[s][1] = Mma<f16>::pack(to_float(at[2]) * scale, to_float(at[3]) * scale);
  }
}

// One warp's 16 keys (K and V rows ``keys``, ``values``: a stage of its ring, or its share of a ws stage) for a group of
// ``rows`` <= 8 heads, keys as the mma's rows: as attend_tile_by_keys, the fragments built from the bytes in registers
// (R: where each key's chunks lie) by the conversion instruction, two bytes to two f16 at a time (exact; the e4m3
// NaN to NaN), and the scores and O computed in f16 x f16 -> fp32 whatever q's type (q's fragments: fp8_query_columns).
template <typename T, int D, class R = Fp8Rings<D>>
__device__ __forceinline__ void attend_fp8_chunk(RunningByKeys<D, true>& run, const unsigned char* keys,
                                                 const unsigned char* values, const TileCounts& count, int rows,
                                                 const Scoring& scoring, const unsigned (&q)[D / 16][2]) {
  const int lane = threadIdx.x % 32, r = lane / 4, c = lane % 4;
  // K: keys r and r + 8, the lane's granules (chunks 4 i + c); V: keys 2c, 2c + 1, 2c + 8, 2c + 9, its bytes
  unsigned key_words[2][R::kKeyGranules * 4], value_words[4][R::kValueWords];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = r + 8 * half;
#pragma unroll
    for (int i = 0; i < R::kKeyGranules; ++i) {
      const uint4 w = *reinterpret_cast<const uint4*>(keys + key * D + R::k_chunk(key, R::key_chunk(c, i)) * 16);
      key_words[half][4 * i] = w.x;
      key_words[half][4 * i + 1] = w.y;
      key_words[half][4 * i + 2] = w.z;
      key_words[half][4 * i + 3] = w.w;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int key = 2 * c + (j & 1) + 8 * (j / 2);
    if constexpr (R::kValueBytes == 8) {  // head dim 64: 8 bytes of chunk r / 2
      const uint2 w = *reinterpret_cast<const uint2*>(values + key * D + R::v_chunk(key, r / 2) * 16 + (r % 2) * 8);
      value_words[j][0] = w.x;
      value_words[j][1] = w.y;
    } else {
#pragma unroll
      for (int g = 0; g < R::kValueBytes / 16; ++g) {
        const uint4 w = *reinterpret_cast<const uint4*>(values + key * D + R::v_chunk(key, 8 * g + r) * 16);
        value_words[j][4 * g] = w.x;
        value_words[j][4 * g + 1] = w.y;
        value_words[j][4 * g + 2] = w.z;
        value_words[j][4 * g + 3] = w.w;
      }
    }
  }
  using M = Mma<f16>;
  float s[1][4] = {}, s_odd[1][4] = {};
#pragma unroll
  for (int step = 0; step < D / 16; ++step) {
    // K fragment: keys r, r + 8 (a[0], a[1]) at bytes 0-1 of the step's word, then at bytes 2-3 (a[2], a[3])
    unsigned a[4];
    e4m3x4_to_f16(key_words[0][step], a[0], a[2]);
    e4m3x4_to_f16(key_words[1][step], a[1], a[3]);
    M::run(step % 2 == 0 ? s[0] : s_odd[0], a, q[step][0], q[step][1]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) s[0][e] += s_odd[0][e];
  unsigned p_hi[1][2], p_lo[1][2];
  probabilities_by_keys<f16>(run, s, 0, lane, count, rows, scoring, p_hi, p_lo);
  // O^T += V^T . P^T, tile n: rows r and r + 8 are the lane's V bytes 2n and 2n + 1 (fp8_value_element), columns
  // keys 2c, 2c + 1 (a[0], a[1]) and 2c + 8, 2c + 9 (a[2], a[3]); one selector pairs byte b of a key pair's two words
  // (low half) and byte b + 1 (high half)
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    const int word = n / 2, byte = 2 * (n % 2);
    const unsigned pairs = byte | (4 + byte) << 4 | (byte + 1) << 8 | (5 + byte) << 12;
    unsigned a[4];
    e4m3x4_to_f16(byte_perm(value_words[0][word], value_words[1][word], pairs), a[0], a[1]);
    e4m3x4_to_f16(byte_perm(value_words[2][word], value_words[3][word], pairs), a[2], a[3]);
    M::run(run.acc[n], a, p_hi[0][0], p_hi[0][1]);
    M::run(run.acc[n], a, p_lo[0][0], p_lo[0][1]);
  }
}

// The attention of one block: cache row blockIdx.z, KV head blockIdx.y / head_groups (its query rows from packed row
// (blockIdx.y % head_groups) * kHeadRows on: PackedRows, the heads of its GQA group for each of the row's query
// tokens), keys of split blockIdx.x. The prologue (the split's keys, the
// first tiles in flight, the query), the loop over the split's K/V tiles (attend_tile) and the epilogue
// (finish_block).
// C: the caches' element type, T (q's) or FP8 (unsigned char: staged as bytes, widened per warp, ``scales`` applied).
template <typename T, int D, int V, int Keys, int Stages, typename Kv, typename C = T>
__device__ __forceinline__ void attend(const T* q, Rows3 q_rows, const C* k, const C* v, Kv k_rows, Kv v_rows,
                                       TokenRows lengths, int group, int head_groups, Scoring scoring,
                                       Sink<T, D> sink, CacheScales scales = {}) {
  using Geometry = Tile<D, Keys, Stages>;
  constexpr bool kWiden = !SameType<C, T>::kValue;
  using Staged = typename Select<kWiden, Fp8Tile<D, Keys>, Geometry>::type;
  constexpr int kKeys = Geometry::kKeys;
  constexpr int kPitch = Geometry::kPitch;
  constexpr int kStages = Geometry::kStages;
  constexpr int kTileElems = kKeys * Staged::kPitch;  // of a staged tile, in C elements
  // an FP8 cache's widened keys: each warp's own K and V rows of the current tile, in T
  constexpr int kWidenedElems = kWiden ? kWarps * 2 * Geometry::kKeysPerWarp * kPitch : 0;
  constexpr int kRegionBytes = kWidenedElems * static_cast<int>(sizeof(T)) + kStages * 2 * kTileElems * static_cast<int>(sizeof(C));
  static_assert(kKeys == kWarps * Geometry::kKeysPerWarp && D % 16 == 0, "tile shape");

  const int b = blockIdx.z;
  const int kv_head = blockIdx.y / head_groups;
  const int rows = min(kHeadRows, lengths.queries * group - (blockIdx.y % head_groups) * kHeadRows);  // its query rows
  // (made where used from the block's index and the kernel's arguments, which need no register through the loop)
  const auto place = [&] {
    return PackedRows{static_cast<int>(blockIdx.z), lengths.queries, group, static_cast<int>(blockIdx.y) / head_groups,
                      static_cast<int>(blockIdx.y % head_groups) * kHeadRows};
  };
  const int lane = threadIdx.x % 32;

  extern __shared__ __align__(16) unsigned char shared[];
  T* widened = reinterpret_cast<T*>(shared);  // FP8: [kWarps][K, V][kKeysPerWarp][kPitch]
  C* tiles = reinterpret_cast<C*>(shared + kWidenedElems * sizeof(T));  // [kStages][K, V][kKeys][Staged::kPitch]
  T* q_tile = reinterpret_cast<T*>(tiles + kStages * 2 * kTileElems);  // [kHeadRows][kPitch], rows past the group zero
  if constexpr (kWiden) {  // this KV head's key scale, in the logits' scale
    scoring.times(scales.key(blockIdx.y / head_groups));
  }

  // Inputs (q, K/V, lengths) may come from the kernel before this one, and outputs or workspace may
  // reuse memory it reads: nothing is touched before it has finished.
  wait_for_prerequisite_grid();
  // Split-KV: the combine grid (small: no shared memory) may be placed now. Not for one pass: a large
  // grid placed early, into whatever slots this one leaves, starts unevenly spread (measured 10 % slower).
  if (sink.split_kv()) allow_dependent_launch();
  int tokens;  // the row's query tokens
  const KeyRange range = lengths.of(b, tokens);
  if (range.malformed) {
    for (int i = threadIdx.x; i < rows * D; i += kThreads) sink.put(place().query_row(i / D), place().head(i / D), i % D, CUKILN_NAN);
    if (threadIdx.x < rows) sink.put_lse(place().query_row(threadIdx.x), place().head(threadIdx.x), CUKILN_NAN);
    return;
  }
  int lo, hi;
  split_range<kKeys>(range, sink.split, sink.splits_of(range), lo, hi);
  const int tiles_n = (hi - lo + kKeys - 1) / kKeys;
  // paged caches: whether a key of the split had a table entry outside the pool (then the block's result is NaN)
  constexpr bool kPaged = IsPaged<Kv>::kValue;
  bool bad_page = false, poisoned = false;

  // Tiles t = 0 .. kStages - 2 go in flight at once; tile t lives in stage t % kStages. Every step
  // commits one copy group, empty or not, so "tile t has landed" is always "at most kStages - 2 groups
  // pending" (a compile-time count, as cp.async.wait_group needs).
  const auto load_keys = [&](int t) {
    if (t < tiles_n) {
      C* stage = tiles + (t % kStages) * 2 * kTileElems;
      const int first = lo + t * kKeys, count = min(kKeys, hi - first);
      if constexpr (kPaged) {
        load_paged_tiles<C, D, V, Staged>(stage, stage + kTileElems, k, v, k_rows, v_rows, b, kv_head, first, count,
                                          bad_page);
      } else {
        load_tile<C, D, V, Staged>(stage, k, k_rows, b, kv_head, first, count);
        load_tile<C, D, V, Staged>(stage + kTileElems, v, v_rows, b, kv_head, first, count);
      }
    }
    commit_copies();
  };
  // each of this thread's two query rows' keys per tile (RowLacks)
  const auto lacking = [&](int row0, int row1) { return RowLacks::of(place(), rows, tokens, range.end, hi, row0, row1); };
  const auto counts_of = [&](RowLacks lacks, int first, int count) { return lacks.counts(hi, first, count); };
#if __CUDA_ARCH__ >= 900
  if constexpr (kWiden && Fp8Rings<D>::kServes) {
    if (rows <= 8) {  // keys as the mma's rows, each warp's keys in a ring of its own (attend_fp8_chunk)
      using R = Fp8Rings<D>;
      constexpr int kRing = kRegionBytes / (kWarps * R::kStageBytes);  // stages a warp, over the narrow path's region
      static_assert(kRing >= 2, "a chunk in flight while one is read");
      constexpr int kStride = kWarps * R::kChunkKeys;  // keys from one of a warp's chunks to its next
      const int warp = threadIdx.x / 32, first0 = lo + warp * R::kChunkKeys;
      const int chunks = first0 < hi ? (hi - first0 + kStride - 1) / kStride : 0;
      unsigned char* ring = shared + warp * kRing * R::kStageBytes;
      // chunk i in stage i % kRing; one copy group committed per chunk, empty or not (as load_keys)
      const auto load_chunk = [&](int i) {
        if (i < chunks) {
          load_fp8_chunk<D>(ring + (i % kRing) * R::kStageBytes, k, v, k_rows, v_rows, b, kv_head, first0 + i * kStride,
                            hi, bad_page);
        }
        commit_copies();
      };
#pragma unroll
      for (int i = 0; i < kRing - 1; ++i) load_chunk(i);
      load_query<T, D, kPitch>(q_tile, q, q_rows, place(), rows);
      __syncthreads();  // the query tile is written
      RunningByKeys<D, true> run;
      unsigned q_cols[D / 16][2];
      fp8_query_columns<T, D, kPitch>(q_cols, q_tile, rows, scoring);
      const RowLacks lacks = lacking(2 * (lane % 4), 2 * (lane % 4) + 1);
      for (int i = 0; i < chunks; ++i) {
        load_chunk(i + kRing - 1);  // into the stage of chunk i - 1, which this warp is done with
        wait_copies<kRing - 1>();
        __syncwarp();  // chunk i, copied by every lane, is visible to the warp
        const int first = first0 + i * kStride;
        const unsigned char* stage = ring + (i % kRing) * R::kStageBytes;
        attend_fp8_chunk<T, D>(run, stage, stage + R::kChunkKeys * D,
                               counts_of(lacks, first, min(R::kChunkKeys, hi - first)), rows, scoring, q_cols);
        __syncwarp();  // read before the copies of chunk i + kRing overwrite its stage
      }
      wait_copies<0>();  // only empty groups can be pending here
      scale_output(run, scales.value(kv_head));
      // every warp is done with its ring, over which finish_block merges; a malformed table entry: NaN (as poison)
      if constexpr (kPaged) {
        if (__syncthreads_or(bad_page)) run.m[0] = run.m[1] = CUKILN_NAN;
      } else {
        __syncthreads();
      }
      finish_block<T, D, Geometry, false, kRegionBytes>(run, shared, rows, place(), sink);
      return;
    }
  }
#endif
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) load_keys(t);
  load_query<T, D, kPitch>(q_tile, q, q_rows, place(), rows);

  // Every tile of the split through ``attend_one(k_tile, v_tile, count, first)`` (16-bit tiles: an FP8 cache's widened
  // first, each warp its own rows, which are all it reads).
  const auto walk = [&](auto&& attend_tile16) {
    const auto attend_one = [&](const C* k_tile, const C* v_tile, int count, int first) {
      if constexpr (kWiden) {
        constexpr int kOwn = Geometry::kKeysPerWarp;
        const int warp = threadIdx.x / 32, key0 = warp * kOwn;
        T* own = widened + warp * 2 * kOwn * kPitch;
        widen_rows<T, D, kPitch, kOwn>(own, own + kOwn * kPitch,
                                       reinterpret_cast<const unsigned char*>(k_tile) + key0 * D,
                                       reinterpret_cast<const unsigned char*>(v_tile) + key0 * D);
        __syncwarp();
        // the tile's rows as attend_tile addresses them: the warp's own from key0 on
        attend_tile16(own - key0 * kPitch, own + kOwn * kPitch - key0 * kPitch, count, first);
        __syncwarp();  // read before the next tile's widening overwrites them
      } else {
        attend_tile16(k_tile, v_tile, count, first);
      }
    };
    for (int t = 0; t < tiles_n; ++t) {
      const int count = min(kKeys, hi - lo - t * kKeys);
      wait_copies<kStages - 2>();
      // Tile t is visible to every warp, and every warp is done with tile t - 1, whose stage the copies
      // of tile t + kStages - 1 (issued next) overwrite.
      __syncthreads();
      load_keys(t + kStages - 1);
      const C* k_tile = tiles + (t % kStages) * 2 * kTileElems;
      attend_one(k_tile, k_tile + kTileElems, count, lo + t * kKeys);
    }
    wait_copies<0>();  // only empty groups can be pending here; the merge below reuses the stages
    if constexpr (kPaged) {
      poisoned = __syncthreads_or(bad_page);
    } else {
      __syncthreads();
    }
  };
  // A malformed table entry: every warp's running maximum NaN, which the merges carry into the output and lse.
  const auto poison = [&](auto& run) {
    if (poisoned) run.m[0] = run.m[1] = CUKILN_NAN;
  };
  // A group of 8 heads or fewer: keys as the mma's rows (attend_tile_by_keys). From sm_90 on: sm_80's narrow kernel at
  // head dim 128 would spill under its register cap (3 blocks per SM), and sm_80 keeps one form in every pipeline.
#if __CUDA_ARCH__ >= 900
  if (rows <= 8) {
    __syncthreads();  // the query tile is written
    RunningByKeys<D> run;
    unsigned q_cols[D / 16][2];
    query_columns<T, D, kPitch>(q_cols, q_tile);
    const RowLacks lacks = lacking(2 * (lane % 4), 2 * (lane % 4) + 1);
    walk([&](const T* k_tile, const T* v_tile, int count, int first) {
      attend_tile_by_keys<T, D, Geometry, PaddedRows<kPitch>>(run, k_tile, v_tile, counts_of(lacks, first, count), rows,
                                                               scoring, q_cols);
    });
    if constexpr (kWiden) scale_output(run, scales.value(kv_head));
    poison(run);
    finish_block<T, D, Geometry, false, kRegionBytes>(run, shared, rows, place(), sink);
    return;
  }
#endif
  Running<D> run;
  // The query's A fragments, the same for every tile: held in registers where the head dim is small
  // enough to leave room (32 registers at 128), read from shared memory per tile otherwise.
  const int mat = lane / 8, mrow = lane % 8;
  constexpr bool kQueryInRegisters = D <= 128;
  unsigned q_regs[kQueryInRegisters ? D / 16 : 1][4];
  const auto query_fragment = [&](unsigned (&a)[4], int kk) {
    ldmatrix_x4(a, q_tile + ((mat % 2) * 8 + mrow) * kPitch + kk * 16 + (mat / 2) * 8);
  };
  if constexpr (kQueryInRegisters) {
    __syncthreads();  // the query tile is written
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) query_fragment(q_regs[kk], kk);
  }
  // The A fragment of 16-element step kk: from the registers, or read into ``scratch`` from shared memory.
  const auto a_of = [&](int kk, unsigned (&scratch)[4]) -> const unsigned (&)[4] {
    if constexpr (kQueryInRegisters) {
      return q_regs[kk];
    } else {
      query_fragment(scratch, kk);
      return scratch;
    }
  };

  const RowLacks lacks = lacking(lane / 4, lane / 4 + 8);
  walk([&](const T* k_tile, const T* v_tile, int count, int first) {
    attend_tile<T, D, Geometry>(run, k_tile, v_tile, counts_of(lacks, first, count), rows, scoring, a_of);
  });
  if constexpr (kWiden) scale_output(run, scales.value(kv_head));
  poison(run);
  finish_block<T, D, Geometry, false, kRegionBytes>(run, shared, rows, place(), sink);
}

// Sum (or maximum) over the block of one value per thread; every thread gets the result.
template <int Threads, bool Max>
__device__ __forceinline__ float block_reduce(float value, float* scratch) {
#pragma unroll
  for (int lanes = 16; lanes >= 1; lanes /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, lanes);
    value = Max ? fmaxf(value, other) : value + other;
  }
  __syncthreads();  // scratch may still be read from the previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  value = scratch[0];
#pragma unroll
  for (int w = 1; w < Threads / 32; ++w) value = Max ? fmaxf(value, scratch[w]) : value + scratch[w];
  return value;
}

// Merges the per-split results of one (row, query head) — block blockIdx.x = row * heads_q + head — by
// their log-sum-exp weights. A NaN partial (malformed row) makes the output NaN; no keys at all gives 0
// and -inf. The first kPrefetch splits' partial results are read together with the log-sum-exps (one
// round trip to L2 instead of two, when the attention grid has just finished); further splits' weights
// go through shared memory a chunk at a time, so that each thread sums its output elements over many
// splits with independent loads in flight.
template <typename T, int D, int Threads>
__device__ __forceinline__ void combine(const float* partial_out, const float* partial_lse, T* out, Rows3 out_rows,
                                        float* lse, int heads_q, int num_splits) {
  constexpr int kChunk = 1024;
  constexpr int kPrefetch = 32;
  constexpr int kPerThread = (D + Threads - 1) / Threads;
  __shared__ float weights[kChunk];
  __shared__ float scratch[Threads / 32];
  wait_for_prerequisite_grid();
  const int b = blockIdx.x / heads_q, qh = blockIdx.x % heads_q;
  const float* lses = partial_lse + static_cast<long long>(blockIdx.x) * num_splits;
  const float* outs = partial_out + static_cast<long long>(blockIdx.x) * num_splits * D;
  // The maximum log-sum-exp, a NaN counted as +inf (above any finite one, and +inf itself only comes
  // with a NaN result): one reduction finds both.
  float top = -CUKILN_INF;
  for (int s = threadIdx.x; s < num_splits; s += Threads) top = fmaxf(top, isnan(lses[s]) ? CUKILN_INF : lses[s]);
  float early[kPerThread][kPrefetch];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int j = threadIdx.x + i * Threads;
#pragma unroll
    for (int s = 0; s < kPrefetch; ++s) early[i][s] = j < D && s < num_splits ? outs[static_cast<long long>(s) * D + j] : 0.f;
  }
  top = block_reduce<Threads, true>(top, scratch);
  const bool any_nan = top == CUKILN_INF;
  const bool empty = top == -CUKILN_INF;
  float total = 0.f;
  if (!empty && !any_nan) {
    for (int s = threadIdx.x; s < num_splits; s += Threads) total += expf(lses[s] - top);
  }
  total = block_reduce<Threads, false>(total, scratch);
  const float inv_total = total > 0.f ? 1.f / total : 0.f;

  float sum[kPerThread] = {};
  for (int first = 0; first < num_splits && !empty && !any_nan; first += kChunk) {
    const int n = min(kChunk, num_splits - first);
    __syncthreads();  // the previous chunk's weights are used up
    for (int s = threadIdx.x; s < n; s += Threads) weights[s] = expf(lses[first + s] - top) * inv_total;
    __syncthreads();
    const int done = first == 0 ? min(kPrefetch, n) : 0;  // splits already read
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int j = threadIdx.x + i * Threads;
      if (j < D) {
        float acc = 0.f;
#pragma unroll
        for (int s = 0; s < kPrefetch; ++s) acc = s < done ? fmaf(weights[s], early[i][s], acc) : acc;
        const float* column = outs + static_cast<long long>(first) * D + j;
#pragma unroll 8
        for (int s = done; s < n; ++s) acc = fmaf(weights[s], column[static_cast<long long>(s) * D], acc);
        sum[i] += acc;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int j = threadIdx.x + i * Threads;
    if (j < D) out[out_rows.at(b, qh, j)] = from_float<T>(any_nan ? CUKILN_NAN : sum[i]);
  }
  if (threadIdx.x == 0 && lse != nullptr) {
    lse[blockIdx.x] = any_nan ? CUKILN_NAN : empty ? -CUKILN_INF : top + logf(total);
  }
}

// cukiln.merge_attention: k partial attention results of one (row, head) — block blockIdx.x = row * heads + head —
// over disjoint key sets merged into the attention over their union: out = sum of exp(lse_i - lse) out_i, lse = log sum
// exp(lse_i), in fp32 (natural logs). Every thread takes the weights itself (k is a handful: a rank's or a page's
// parts), so a block needs no shared memory nor barrier. No key in any part (every lse -inf): zeros and -inf; a NaN
// lse anywhere: NaN output and lse. Attention sinks (p.sinks, gpt-oss's: a logit per head): one more part, of output
// zero and lse the head's sink, so that it joins the softmax's denominator alone (a row without keys: zeros, lse the
// sink).
template <typename T, class P>
__device__ __forceinline__ void merge_parts(const P& p) {
  wait_for_prerequisite_grid();
  const int heads = static_cast<int>(p.heads), parts = static_cast<int>(p.parts);
  const long long b = blockIdx.x / heads, h = blockIdx.x % heads;
  const float* lses = static_cast<const float*>(p.lses) + b * p.lses_sb + h * p.lses_sh;
  const T* outs = static_cast<const T*>(p.outs) + b * p.outs_sb + h * p.outs_sh;
  const float sink = p.sinks != nullptr ? static_cast<const float*>(p.sinks)[h * p.sinks_stride] : -CUKILN_INF;
  float top = sink;
  bool nan = sink != sink;
  for (int s = 0; s < parts; ++s) {
    const float l = lses[s * p.lses_sk];
    nan |= l != l;
    top = fmaxf(top, l);
  }
  const bool empty = top == -CUKILN_INF;
  float total = 0.f;
  if (!empty && !nan) {
    total = expf(sink - top);  // 0 without a sink
    for (int s = 0; s < parts; ++s) total += expf(lses[s * p.lses_sk] - top);
  }
  const float inv_total = total > 0.f ? 1.f / total : 0.f;
  T* out = static_cast<T*>(p.out) + b * p.out_sb + h * p.out_sh;
  for (int j = threadIdx.x; j < static_cast<int>(p.head_dim); j += blockDim.x) {
    float acc = 0.f;
    if (!empty && !nan) {
      for (int s = 0; s < parts; ++s) acc = fmaf(expf(lses[s * p.lses_sk] - top) * inv_total, to_float(outs[s * p.outs_sk + j * p.outs_sd]), acc);
    }
    out[j * p.out_sd] = from_float<T>(nan ? CUKILN_NAN : acc);
  }
  if (threadIdx.x == 0 && p.lse != nullptr) {
    static_cast<float*>(p.lse)[b * heads + h] = nan ? CUKILN_NAN : empty ? -CUKILN_INF : top + logf(total);
  }
}

// The batch-invariant merge of one (row, query head)'s splits — block blockIdx.x = row * heads_q + head — with
// the cluster merge's arithmetic (merge_weights over base-2 log-sum-exps, weighted_sum in split order): a row's
// result is the same bits whether its splits merge here or in a cluster. At most kInvariantMaxSplits splits.
template <typename T, int D, int Threads>
__device__ __forceinline__ void combine_ordered(const float* partial_out, const float* partial_lse, T* out,
                                                Rows3 out_rows, float* lse, int heads_q, int num_splits) {
  constexpr int N = kInvariantMaxSplits;
  __shared__ float weights[N];
  __shared__ float merged_lse;
  wait_for_prerequisite_grid();
  const int b = blockIdx.x / heads_q, qh = blockIdx.x % heads_q;
  const float* lses = partial_lse + static_cast<long long>(blockIdx.x) * num_splits;
  const float* outs = partial_out + static_cast<long long>(blockIdx.x) * num_splits * D;
  if (threadIdx.x == 0) {
    float m[N], ones[N], w[N];
#pragma unroll
    for (int s = 0; s < N; ++s) {
      const bool mine = s < num_splits;
      m[s] = mine ? lses[s] : -CUKILN_INF;
      ones[s] = mine ? 1.f : 0.f;
    }
    merged_lse = merge_weights(m, ones, w);
#pragma unroll
    for (int s = 0; s < N; ++s) weights[s] = w[s];
  }
  __syncthreads();
  for (int j = threadIdx.x; j < D; j += Threads) {
    float w[N], x[N];
#pragma unroll
    for (int s = 0; s < N; ++s) {
      w[s] = weights[s];
      x[s] = s < num_splits ? outs[static_cast<long long>(s) * D + j] : 0.f;
    }
    out[out_rows.at(b, qh, j)] = from_float<T>(weighted_sum(w, x));
  }
  if (threadIdx.x == 0 && lse != nullptr) lse[blockIdx.x] = merged_lse * kLn2;
}


// --- The warp-specialized pipeline (sm_90 on) -----------------------------------------------------------------------
// kWarps consumer warps compute as attend does; over fixed caches one more warp's lane loads each tile of K and V by
// the TMA engine (4-D tensor maps (d, T, h_kv, b) of the caches, 64-key x 64-column boxes in the 128-byte swizzle) into
// a ring of Stages shared stages, a stage's "full" mbarrier completing with its bytes (rows past T arrive zero from the
// engine); over paged pools ProducerWarps warps copy the tiles by cp.async into the same layout (produce_paged_keys),
// "full" completing with each producer lane's arrival. A stage's "empty" mbarrier completes with one arrival per
// consumer warp once the warp is done with it. Rows past a row's keys inside the cache are zeroed by the warp that
// owns them before P . V (0 x garbage could be NaN). Splits merge as the other pipelines' do (a cluster's, with the
// producer warps at its barriers, or the combine kernel).
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void tma_4d(unsigned dst, const TensorMap* map, int x, int y, int z, int w, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
               ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(z), "r"(w), "r"(bar)
               : "memory");
}
// The same with an L2 cache policy.
__device__ __forceinline__ void tma_4d_hinted(unsigned dst, const TensorMap* map, int x, int y, int z, int w, unsigned bar,
                                              unsigned long long policy) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n"
               ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(z), "r"(w), "r"(bar),
               "l"(policy) : "memory");
}

// An arrival on ``bar`` once every cp.async this thread issued before it has landed (not counted in advance: the
// barrier's expected count includes it).
__device__ __forceinline__ void mbar_arrive_after_copies(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Whether a kernel's parameter struct holds a block table: the ws kernels over paged pools (decode_abi.PAGE_TABLE).
template <class P, class = void> struct HasBlockTable { static constexpr bool kValue = false; };
template <class P> struct HasBlockTable<P, decltype(void(&P::block_table))> { static constexpr bool kValue = true; };
// Whether it holds an FP8 cache's scales: then the caches are e4m3 bytes (decode_abi.FP8_SCALES).
template <class P, class = void> struct HasCacheScales { static constexpr bool kValue = false; };
template <class P> struct HasCacheScales<P, decltype(void(&P::k_scale))> { static constexpr bool kValue = true; };
// Whether it holds query tokens (decode_abi.TOKEN_ROWS): every attention kernel's but a decode step's, which serves one.
template <class P, class = void> struct HasTokenRows { static constexpr bool kValue = false; };
template <class P> struct HasTokenRows<P, decltype(void(&P::q_lens))> { static constexpr bool kValue = true; };

// The ws pipeline's producers over paged pools: each of the block's producer warps copies KeysPerWarp keys of a tile
// (from ``key0`` on) by cp.async, each key's page looked up in the block table, in 16-byte pieces (a key's row over
// consecutive lanes, kKeysPerCopy keys a warp instruction) into the 128-byte swizzled layout the TMA engine writes for
// fixed caches; each lane's copies then arrive on the stage's "full" barrier (32 arrivals a producer warp). Keys past
// the tile's count and keys whose table entry lies outside the pool are zero-filled; the latter set ``bad`` (the
// block's result becomes NaN). ``entry``: the table entries of the warp's keys, lane and lane + 32 (page_entries),
// which the lanes copying a key take by a shuffle.
template <int KeysPerWarp, class P>
__device__ __forceinline__ void page_entries(const P& p, int b, int first, int key0, int count,
                                             int (&entry)[(KeysPerWarp + 31) / 32]) {
  const int* row_pages = static_cast<const int*>(p.block_table) + b * p.table_sb;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int e = 0; e < (KeysPerWarp + 31) / 32; ++e) {
    const int key = key0 + lane + 32 * e;
    entry[e] = lane + 32 * e < KeysPerWarp && key < count
                   ? __ldg(row_pages + ((first + key) >> static_cast<int>(p.page_shift))) : 0;
  }
}
template <typename T, int D, int Keys, int KeysPerWarp, class P>
__device__ __forceinline__ void produce_paged_keys(const P& p, T* k_dst, T* v_dst, int kv_head, int first, int key0,
                                                   int count, const int (&entry)[(KeysPerWarp + 31) / 32], bool& bad) {
  constexpr int kPieces = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte pieces a key row
  static_assert(32 % kPieces == 0 && KeysPerWarp % (32 / kPieces) == 0, "whole keys a warp instruction");
  constexpr int kKeysPerCopy = 32 / kPieces;
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  using Layout = Swizzled128<Keys, sizeof(T)>;
  const int lane = threadIdx.x % 32;
  const int mask = (1 << static_cast<int>(p.page_shift)) - 1;
  const T* k = static_cast<const T*>(p.k) + kv_head * p.k_sh;
  const T* v = static_cast<const T*>(p.v) + kv_head * p.v_sh;
  const int piece = lane % kPieces;
#pragma unroll
  for (int i = 0; i < KeysPerWarp / kKeysPerCopy; ++i) {
    const int mine = i * kKeysPerCopy + lane / kPieces;  // among the warp's keys
    const int key = key0 + mine;
    // an instruction's keys all lie in one 32-key half (kKeysPerCopy divides 32): every lane offers that half's entry,
    // and each takes its key's from the lane that loaded it
    const int page = __shfl_sync(0xffffffffu, entry[i * kKeysPerCopy / 32], mine % 32);
    const bool valid = key < count;
    const bool inside = static_cast<unsigned>(page) < static_cast<unsigned>(p.num_pages);
    bad |= valid && !inside;
    const bool ok = valid && inside;
    const long long slot = (first + key) & mask;
    const int at = Layout::at(key, piece * kElems);
    copy_to_shared<T, kElems>(k_dst + at, ok ? k + page * p.k_sb + slot * p.k_st + piece * kElems : k, ok);
    copy_to_shared<T, kElems>(v_dst + at, ok ? v + page * p.v_sb + slot * p.v_st + piece * kElems : v, ok);
  }
}

// A plain attention: no step around it (decode_step.cuh's StepAppend is the other kind).
struct NoStep {
  static constexpr bool kActive = false;
};

// EvictFirst: the TMA engine's K/V loads hint the L2 to evict their lines first (each is read once;
// decode_abi.WS_EVICT_FIRST); the paged producers' cp.async copies take no policy.
// Step (kActive): a decode step's append fused in (decode_step.cuh): the lengths are those before the append, the
// block whose keys hold the new one writes it into the caches before the producer's first copy, and the query tile
// is the step's query, rotated, instead of p.q.
// ProducerWarps: warps that load the tiles (one over fixed caches, whose lane asks the TMA engine; over paged pools
// each copies its share of a tile's keys).
// An FP8 cache (the parameters hold its scales): its bytes are staged as they are, 128 a box row, and each consumer
// warp reads its 16 keys of a tile as the rings' kernel reads a chunk (attend_fp8_chunk over Fp8Swizzled), for blocks
// of 8 query rows or fewer (the planner's rule, decode_abi.FP8_WS_MAX_GROUP).
// Several query tokens a cache row (the parameters hold TokenRows' fields; a step's do not): a block takes the n x
// group query rows of a (row, KV head) together (PackedRows), each row's keys cut at its token's end (RowLacks), so
// the tiles are read once for all the tokens, as in attend.
template <typename T, int D, int Keys, int Stages, int ProducerWarps = 1,
          bool EvictFirst = true, class P, class Step = NoStep>
__device__ __forceinline__ void attend_ws(const P& p, const Step& step = Step{}) {
#if __CUDA_ARCH__ >= 900
  using Geometry = Tile<D, Keys, Stages>;
  constexpr bool kFp8 = HasCacheScales<P>::kValue;
  using C = typename Select<kFp8, unsigned char, T>::type;  // the caches' elements
  using Layout = Swizzled128<Keys, sizeof(C)>;
  static_assert(D % Layout::kBoxColumns == 0, "whole 128-byte boxes a row");
  constexpr int kTileElems = Keys * D;
  constexpr unsigned kTileBytes = kTileElems * sizeof(C);
  constexpr int kPitch = Geometry::kPitch;  // the query tile's
  const Sink<T, D> sink = sink_of<T, D>(p);
  Scoring scoring = scoring_of(p);
  constexpr bool kTokens = HasTokenRows<P>::kValue;
  const int group = static_cast<int>(p.group), head_groups = static_cast<int>(p.head_groups);
  const int b = blockIdx.z;
  const int kv_head = blockIdx.y / head_groups;
  const int first_in_group = (blockIdx.y % head_groups) * kHeadRows;
  int queries = 1;  // query tokens a cache row, padding included
  if constexpr (kTokens) queries = static_cast<int>(p.queries);
  const int rows = min(kHeadRows, queries * group - first_in_group);
  const int first_head = kv_head * group + first_in_group;  // one token a row: the block's first query head
  // (made where used from the block's KV head and first row and the kernel's arguments: no division there, where a
  // 64-bit field's is a long call, and no register of its own through the loop)
  const auto place = [&] {
    if constexpr (kTokens) {
      return PackedRows{static_cast<int>(blockIdx.z), static_cast<int>(p.queries), static_cast<int>(p.group), kv_head,
                        first_in_group};
    } else {
      return HeadRows{b, first_head};
    }
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // stages from a 1024-byte boundary (the swizzle's), then the query tile, then the barriers
  extern __shared__ __align__(16) unsigned char raw[];
  const unsigned raw0 = shared_address(raw);
  const unsigned base = (raw0 + 1023u) & ~1023u;
  unsigned char* shared = raw + (base - raw0);
  C* tiles = reinterpret_cast<C*>(shared);
  T* q_tile = reinterpret_cast<T*>(tiles + Stages * 2 * kTileElems);
  const unsigned full0 = base + Stages * 2 * kTileBytes + kHeadRows * kPitch * sizeof(T), empty0 = full0 + 8 * Stages;
  // paged pools: the producer's lanes copy by cp.async, each arriving on a stage's "full" barrier; a flag after the
  // barriers says whether a key's table entry lay outside the pool (decode_abi.ws_fixed_bytes counts its 16 bytes)
  constexpr bool kPaged = HasBlockTable<P>::kValue;
  static_assert(!(kPaged && Step::kActive), "a decode step over paged pools runs its append and attention apart");
  static_assert(!(kFp8 && (kPaged || Step::kActive)), "FP8 caches: fixed-capacity ones, the attention alone");
  if constexpr (kFp8) {  // this KV head's key scale, in the logits' scale
    scoring.times(cache_scales_of(p).key(kv_head));
  }
  volatile int* bad_page = reinterpret_cast<volatile int*>(shared + (empty0 + 8 * Stages - base));
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) {
      mbar_init(full0 + 8 * s, kPaged ? 32 * ProducerWarps : 1);
      mbar_init(empty0 + 8 * s, kWarps);
    }
    if constexpr (kPaged) *bad_page = 0;
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  wait_for_prerequisite_grid();
  if (sink.split_kv()) allow_dependent_launch();
  int tokens = 1;  // the row's query tokens
  KeyRange range;
  if constexpr (kTokens) {
    range = token_rows_of(p).of(b, tokens);
  } else {
    range = lengths_of(p).of(b);
  }
  if constexpr (Step::kActive) range = step.after_append(range, p.capacity);
  if (range.malformed) {
    for (int i = threadIdx.x; i < rows * D; i += kThreads + 32 * ProducerWarps) {
      sink.put(place().query_row(i / D), place().head(i / D), i % D, CUKILN_NAN);
    }
    if (threadIdx.x < rows) sink.put_lse(place().query_row(threadIdx.x), place().head(threadIdx.x), CUKILN_NAN);
    return;
  }
  int lo, hi;
  split_range<Keys>(range, sink.split, sink.splits_of(range), lo, hi);
  const int tiles_n = (hi - lo + Keys - 1) / Keys;
  if constexpr (Step::kActive) {
    if (lo < range.end && range.end <= hi) {  // this block's keys end with the new one: it writes it first
      step.append_key(b, kv_head, range);
      // the generic proxy's writes, before the TMA engine (the async proxy) reads them
      asm volatile("fence.proxy.async.global;\n" ::: "memory");
      __syncthreads();
    }
  }

  if (ProducerWarps == 1 ? warp == kWarps : warp >= kWarps) {  // the producers
    if constexpr (kPaged) {  // every lane of each copies
      static_assert(Keys % ProducerWarps == 0, "a tile's keys shared out evenly");
      constexpr int kKeysPerWarp = Keys / ProducerWarps, kEntries = (kKeysPerWarp + 31) / 32;
      const int key0 = (warp - kWarps) * kKeysPerWarp;
      bool bad = false;
      int entry[kEntries];  // the table entries of the tile being copied; the next tile's load before its copies
      if (tiles_n > 0) page_entries<kKeysPerWarp>(p, b, lo, key0, min(Keys, hi - lo), entry);
      for (int t = 0; t < tiles_n; ++t) {
        const int s = t % Stages, first = lo + t * Keys;
        int next[kEntries] = {};
        if (t + 1 < tiles_n) page_entries<kKeysPerWarp>(p, b, first + Keys, key0, min(Keys, hi - first - Keys), next);
        if (t >= Stages) mbar_wait(empty0 + 8 * s, (t / Stages - 1) & 1);
        C* k_dst = tiles + s * 2 * kTileElems;
        produce_paged_keys<C, D, Keys, kKeysPerWarp>(p, k_dst, k_dst + kTileElems, kv_head, first, key0,
                                                     min(Keys, hi - first), entry, bad);
        if (bad) {  // seen by the consumers once this tile's barrier completes: the fence orders it before the arrive
          *bad_page = 1;
          __threadfence_block();
        }
        mbar_arrive_after_copies(full0 + 8 * s);
#pragma unroll
        for (int e = 0; e < kEntries; ++e) entry[e] = next[e];
      }
    } else if (lane == 0) {  // one lane asks the TMA engine
      unsigned long long policy = 0;
      if (EvictFirst) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
      for (int t = 0; t < tiles_n; ++t) {
        const int s = t % Stages;
        if (t >= Stages) mbar_wait(empty0 + 8 * s, (t / Stages - 1) & 1);
        const unsigned bar = full0 + 8 * s, k_dst = base + s * 2 * kTileBytes, v_dst = k_dst + kTileBytes;
        mbar_expect(bar, 2 * kTileBytes);
#pragma unroll
        for (int h = 0; h < D / Layout::kBoxColumns; ++h) {
          const int column = h * Layout::kBoxColumns;
          if (EvictFirst) {
            tma_4d_hinted(k_dst + h * Keys * 128, &p.k_map, column, lo + t * Keys, kv_head, b, bar, policy);
            tma_4d_hinted(v_dst + h * Keys * 128, &p.v_map, column, lo + t * Keys, kv_head, b, bar, policy);
          } else {
            tma_4d(k_dst + h * Keys * 128, &p.k_map, column, lo + t * Keys, kv_head, b, bar);
            tma_4d(v_dst + h * Keys * 128, &p.v_map, column, lo + t * Keys, kv_head, b, bar);
          }
        }
      }
    }
    __syncwarp();
    if (blocks_in_cluster() > 1) cluster_merge_barriers();  // its part in the splits' merge (finish_block)
    return;
  }

  if constexpr (Step::kActive) {
    step.template load_query<D, kPitch>(q_tile, b, first_head, rows, range);
  } else {
    load_query<T, D, kPitch>(q_tile, static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, place(), rows);
  }
  const int key0 = warp * Geometry::kKeysPerWarp;
  // Each of this thread's two query rows' keys of a tile whose keys start at ``first`` (one token a row: the tile's
  // ``count`` for both; see RowLacks).
  const auto lacking = [&](int row0, int row1) {
    if constexpr (kTokens) {
      return RowLacks::of(place(), rows, tokens, range.end, hi, row0, row1);
    } else {
      return RowLacks{0};
    }
  };
  const auto counts_of = [&](RowLacks lacks, int first, int count) {
    if constexpr (kTokens) {
      return lacks.counts(hi, first, count);
    } else {
      return TileCounts{count, count};
    }
  };
  // Every tile of the split through ``attend_one(k_tile, v_tile, count, first)``, each stage released once used.
  const auto walk = [&](auto&& attend_one) {
    for (int t = 0; t < tiles_n; ++t) {
      const int s = t % Stages;
      const int count = min(Keys, hi - lo - t * Keys);
      mbar_wait(full0 + 8 * s, (t / Stages) & 1);
      C* k_tile = tiles + s * 2 * kTileElems;
      C* v_tile = k_tile + kTileElems;
      if (count < key0 + Geometry::kKeysPerWarp) {  // this warp's rows past the keys: zeros
        constexpr int kChunk = Layout::kChunkElems;
        for (int i = lane; i < Geometry::kKeysPerWarp * D / kChunk; i += 32) {
          const int r = key0 + i / (D / kChunk), c = (i % (D / kChunk)) * kChunk;
          if (r >= count) *reinterpret_cast<uint4*>(v_tile + Layout::at(r, c)) = make_uint4(0, 0, 0, 0);
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // before a TMA refill (fixed caches)
        __syncwarp();
      }
      attend_one(k_tile, v_tile, count, lo + t * Keys);
      __syncwarp();
      if (lane == 0) mbar_arrive(empty0 + 8 * s);
    }
    block_sync<true>();  // every consumer is done with the stages, which the merge below reuses
  };
  // A paged pool's malformed table entry: every warp's running maximum NaN, which the merges carry into the output
  // and lse (as attend's poison).
  const auto poison = [&](auto& run) {
    if (kPaged && *bad_page) run.m[0] = run.m[1] = CUKILN_NAN;
  };
  block_sync<true>();  // the query tile is written
  if constexpr (kFp8) {
    // keys as the mma's rows: each warp's 16 keys of a tile read as a chunk of the rings' kernel
    if (rows > 8) __trap();  // the planner takes the ws pipelines over FP8 caches for blocks of 8 query rows or fewer
    using R = Fp8Swizzled<D>;
    RunningByKeys<D, true> run;
    unsigned q_cols[D / 16][2];
    fp8_query_columns<T, D, kPitch, R>(q_cols, q_tile, rows, scoring);
    const RowLacks lacks = lacking(2 * (lane % 4), 2 * (lane % 4) + 1);
    walk([&](const C* k_tile, const C* v_tile, int count, int first) {
      const int own = min(Geometry::kKeysPerWarp, count - key0);  // of the warp's keys, those of the split
      if (own > 0) {
        attend_fp8_chunk<T, D, R>(run, k_tile + key0 * D, v_tile + key0 * D, counts_of(lacks, first + key0, own),
                                  rows, scoring, q_cols);
      }
    });
    scale_output(run, cache_scales_of(p).value(kv_head));
    poison(run);
    finish_block<T, D, Geometry, true, Stages * 2 * kTileBytes>(run, shared, rows, place(), sink);
  } else {
    if (rows <= 8) {  // keys as the mma's rows, as in attend
      RunningByKeys<D> run;
      unsigned q_cols[D / 16][2];
      query_columns<T, D, kPitch>(q_cols, q_tile);
      const RowLacks lacks = lacking(2 * (lane % 4), 2 * (lane % 4) + 1);
      walk([&](const T* k_tile, const T* v_tile, int count, int first) {
        attend_tile_by_keys<T, D, Geometry, Layout>(run, k_tile, v_tile, counts_of(lacks, first, count), rows, scoring,
                                                    q_cols);
      });
      poison(run);
      finish_block<T, D, Geometry, true>(run, shared, rows, place(), sink);
      return;
    }
    Running<D> run;
    const int mat = lane / 8, mrow = lane % 8;
    unsigned q_regs[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(q_regs[kk], q_tile + ((mat % 2) * 8 + mrow) * kPitch + kk * 16 + (mat / 2) * 8);
    const auto a_of = [&](int kk, unsigned (&)[4]) -> const unsigned (&)[4] { return q_regs[kk]; };
    const RowLacks lacks = lacking(lane / 4, lane / 4 + 8);
    walk([&](const T* k_tile, const T* v_tile, int count, int first) {
      attend_tile<T, D, Geometry, decltype(a_of), Layout>(run, k_tile, v_tile, counts_of(lacks, first, count), rows,
                                                          scoring, a_of);
    });
    poison(run);
    finish_block<T, D, Geometry, true>(run, shared, rows, place(), sink);
  }
#else
  __trap();  // the planner launches this pipeline from sm_90 on only
#endif
}

}  // namespace decode
}  // namespace cukiln
