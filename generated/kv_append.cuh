// cukiln KV-cache append kernel body, shared by every kv_append module (one per element type).
// Rendered from templates/kv_append.cuh.j2 — edit the template, then run `cukiln build`.
//
// One block row (threadIdx.z) per new token (row b, token j of the row's n new ones): its query heads and key heads
// are rotated together by RoPE's token body (rope.cuh, as rope_qk rotates q and k), the query to q_out and the keys
// straight into the key cache at slot kv_lens[b] + j, and the token's value heads are copied into the value cache at
// the same slot. The angles are those of position slot - kv_start[b] (or the explicit positions[b, j]).
//
// Paged caches (p.block_table or p.slot_mapping set, a run-time choice too): the slot is found through the row's block
// table (page block_table[b][slot / page size], its slot % page size), or given flat for each token (slot_mapping[t]:
// page slot / page size; negative: the token is not stored, as serving engines pad); a page outside the pool stores
// nothing (decode_attention then gives that row NaN).
// FP8 caches (p.cache_fp8, a launch-wide choice made at run time: one kernel serves both, the append being a few
// blocks): the caches hold bytes, each new key and value divided by its KV head's scale and rounded to e4m3 with
// saturation (fp8.cuh's CacheStores), the key after its rotation in fp32.
#pragma once
#include "fp8.cuh"
#include "rope.cuh"

namespace cukiln {
namespace kv_append {

// Rows inside one token: the tensors' pointers are set to the token's row (the new token, or its cache slot) before
// the token's rotation, so a head's row is its head offset.
struct KvRows {
  long long sh;
  __device__ __forceinline__ long long row(int, int, int, int h) const { return h * sh; }
  __device__ __forceinline__ long long elem(int d) const { return d; }
};

// QK-norm (Qwen3, Gemma 3): every head of the new query and key scaled by the inverse root mean square of its
// head_dim features and by a weight per feature before the rotation, in fp32. The token's inverse RMS per head
// (q's heads, then k's) are computed first into shared memory (head_inv_rms); HeadNorm applies them as
// rope_token reads each feature. A null weight leaves that tensor's heads unnormalized.
template <typename T>
struct HeadNorm {
  static constexpr bool kActive = true;
  const float* inv_rms;  // this token's, per head
  const void* q_weight;
  const void* k_weight;
  bool fp32_weights;  // else the weights are T
  int heads_q, rotary_offset;
  template <int V>
  __device__ __forceinline__ void apply(int h, int first, float (&f)[V]) const {
    const void* w = h < heads_q ? q_weight : k_weight;
    if (w == nullptr) return;
    const float s = inv_rms[h];
    const int e = rotary_offset + first;  // features are counted from the rotated span's start
#pragma unroll
    for (int k = 0; k < V; ++k) {
      f[k] *= s * (fp32_weights ? static_cast<const float*>(w)[e + k] : to_float(static_cast<const T*>(w)[e + k]));
    }
  }
};

// The inverse RMS of every normalized head of one token, by the threads of its block row, a head a thread (a decode
// step's token has a few dozen heads): q's heads at q_head + h * q_sh, k's at k_head + h * k_sh (feature 0).
template <typename T, int V, class P>
__device__ __forceinline__ void head_inv_rms(const P& p, const T* q_head, const T* k_head, float* inv_rms) {
  const int heads_q = static_cast<int>(p.heads_q), heads = heads_q + static_cast<int>(p.heads_kv);
  const int d = static_cast<int>(p.head_dim);
  for (int h = threadIdx.y * blockDim.x + threadIdx.x; h < heads; h += blockDim.x * blockDim.y) {
    const bool is_q = h < heads_q;
    if ((is_q ? p.q_norm_weight : p.k_norm_weight) == nullptr) continue;
    const T* row = is_q ? q_head + h * p.q_sh : k_head + (h - heads_q) * p.k_sh;
    float sum = 0.f;
#pragma unroll 4
    for (int e = 0; e < d; e += V) {
      float f[V];
      to_floats(load_vec<T, V, false>(row + e), f);
#pragma unroll
      for (int k = 0; k < V; ++k) sum += f[k] * f[k];
    }
    inv_rms[h] = rsqrtf(sum / static_cast<float>(d) + static_cast<float>(p.norm_eps));
  }
}

// Token t (row b, new token j): its query and key rotated (q_out; the key cache at slot kv_lens[b] + j), its
// values copied to the same slot, each feature passed through norm before the rotation.
// A row whose n new slots would run past the capacity (or whose length or start is malformed: lengths on the
// device are never read back) writes nothing to the caches; its query rows get NaN rotated features instead, the
// way decode_attention reports bad lengths.
template <typename T, int V, bool INTERLEAVED, class P, class Src, class Norm>
__device__ __forceinline__ void append_token(const P& p, const Src& src, const rope::Geometry& g, int t,
                                             const Norm& norm) {
  const int n = static_cast<int>(p.new_tokens);
  const int b = t / n, j = t - b * n;
  const long long len = p.kv_lens != nullptr ? static_cast<const int*>(p.kv_lens)[b] : p.kv_len_value;
  const long long start = p.kv_start != nullptr ? static_cast<const int*>(p.kv_start)[b] : p.kv_start_value;
  const bool valid = len >= 0 && len + n <= p.capacity && start >= 0 && start <= len;
  const long long slot = len + j;
  // the row's length after the append (what decode_attention reads next), by the thread of its last token that
  // starts the row's work: kv_lens_out is never kv_lens (the host refuses it), so no reader of a row sees it change
  if (p.kv_lens_out != nullptr && j == n - 1 && threadIdx.x == 0 && threadIdx.y == 0) {
    static_cast<int*>(p.kv_lens_out)[b] = static_cast<int>(len + n);
  }
  const long long pos = p.positions != nullptr
      ? (p.positions_int64 ? static_cast<const long long*>(p.positions)[b * p.pos_stride_b + j * p.pos_stride_s]
                           : static_cast<const int*>(p.positions)[b * p.pos_stride_b + j * p.pos_stride_s])
      : slot - start;
  const T* q = static_cast<const T*>(p.q) + b * p.q_sb + j * p.q_ss;
  T* q_out = static_cast<T*>(p.q_out) + b * p.q_out_sb + j * p.q_out_ss;
  // where the token is stored: (the cache's row b, slot), or a paged pool's (page, its slot)
  long long page = b, in_page = slot;
  bool stored = true;
  if (p.slot_mapping != nullptr || p.block_table != nullptr) {
    const long long at = p.slot_mapping != nullptr ? static_cast<const long long*>(p.slot_mapping)[t] : slot;
    page = p.slot_mapping != nullptr
        ? at >> p.page_shift
        : static_cast<const int*>(p.block_table)[b * p.table_sb + (valid ? slot >> p.page_shift : 0)];
    in_page = at & ((1ll << p.page_shift) - 1);
    stored = at >= 0 && page >= 0 && page < p.num_pages;
  }
  if (valid && stored) {
    const bool fp8 = p.cache_fp8 != 0;
    const CacheStores stores{fp8, static_cast<const float*>(p.k_scale), p.k_scale_stride,
                             static_cast<float>(p.k_scale_value)};
    // a cache slot's offset, in its elements: T, or bytes in an FP8 cache
    const auto cache_row = [&](void* cache, long long sb, long long ss) {
      const long long at = page * sb + in_page * ss;
      return fp8 ? reinterpret_cast<T*>(static_cast<unsigned char*>(cache) + at) : static_cast<T*>(cache) + at;
    };
    const T* k = static_cast<const T*>(p.k) + b * p.k_sb + j * p.k_ss;
    T* k_cache = cache_row(p.k_cache, p.k_cache_sb, p.k_cache_ss);
    T* v_cache = cache_row(p.v_cache, p.v_cache_sb, p.v_cache_ss);  // here: the slot's place is not kept past it
    const rope::Tensors<T, KvRows, true, CacheStores> io{q, q_out, k, k_cache, KvRows{p.q_sh}, KvRows{p.q_out_sh},
                                                         KvRows{p.k_sh}, KvRows{p.k_cache_sh},
                                                         static_cast<int>(p.heads_q), stores};
    rope::rope_token<T, V, INTERLEAVED, true, false>(t, 0, 0, pos, true, io, g, src, norm);
    // the values, whole heads, into the same slot
    const T* v = static_cast<const T*>(p.v) + b * p.v_sb + j * p.v_ss;
    const int row_vecs = static_cast<int>(p.head_dim) / V;
    const int count = row_vecs * static_cast<int>(p.heads_kv);
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < count; i += blockDim.x * blockDim.y) {
      const int h = i / row_vecs;
      const int e = (i - h * row_vecs) * V;
      if (fp8) {
        float f[V];
        to_floats(load_vec<T, V, rope::kStreaming>(v + h * p.v_sh + e), f);
        CacheStores::put<V>(reinterpret_cast<unsigned char*>(v_cache) + h * p.v_cache_sh + e,
                            cache_scales_of(p).value(h), f);
      } else {
        copy_vec<T, V, rope::kStreaming>(v_cache + h * p.v_cache_sh + e, v + h * p.v_sh + e);
      }
    }
  } else {  // the query alone: rotated (a token not stored), or NaN (a malformed row)
    const rope::Tensors<T, KvRows, false> io{q, q_out, nullptr, nullptr, KvRows{p.q_sh}, KvRows{p.q_out_sh},
                                             KvRows{0}, KvRows{0}, static_cast<int>(p.heads_q)};
    rope::rope_token<T, V, INTERLEAVED, false, false>(t, 0, 0, pos, valid, io, g, src, norm);
  }
}

// Every new token of the launch, a block row (threadIdx.z) each. With kNorm the block rows first compute their
// tokens' inverse RMS per head into dynamic shared memory (blockDim.z x (heads_q + heads_kv) floats), so the
// block steps through its tokens together, synchronized.
template <typename T, int V, bool INTERLEAVED, bool kNorm, class P, class Src>
__device__ __forceinline__ void append_tokens(const P& p, const Src& src) {
  const int tokens = static_cast<int>(p.batch) * static_cast<int>(p.new_tokens);
  const rope::Geometry g{1, 1, 1, static_cast<int>(p.heads_q), static_cast<int>(p.heads_kv),
                         static_cast<int>(p.head_dim), static_cast<int>(p.rotary_dim),
                         static_cast<int>(p.rotary_offset), false, p.copy_tail != 0, false,
                         static_cast<float>(p.mscale)};
  if constexpr (!kNorm) {
    for (int t = blockIdx.x * blockDim.z + threadIdx.z; t < tokens; t += gridDim.x * blockDim.z) {
      append_token<T, V, INTERLEAVED>(p, src, g, t, rope::NoNorm{});
    }
  } else {
    extern __shared__ float norm_inv_rms[];
    float* inv_rms = norm_inv_rms + threadIdx.z * (p.heads_q + p.heads_kv);
    const HeadNorm<T> norm{inv_rms, p.q_norm_weight, p.k_norm_weight, p.norm_weight_fp32 != 0,
                           static_cast<int>(p.heads_q), static_cast<int>(p.rotary_offset)};
    const int n = static_cast<int>(p.new_tokens);
    for (int first = blockIdx.x * blockDim.z; first < tokens; first += gridDim.x * blockDim.z) {
      const int t = first + threadIdx.z;
      if (t < tokens) {
        const int b = t / n, j = t - b * n;
        head_inv_rms<T, V>(p, static_cast<const T*>(p.q) + b * p.q_sb + j * p.q_ss - p.rotary_offset,
                           static_cast<const T*>(p.k) + b * p.k_sb + j * p.k_ss - p.rotary_offset, inv_rms);
      }
      __syncthreads();
      if (t < tokens) append_token<T, V, INTERLEAVED>(p, src, g, t, norm);
      __syncthreads();  // inv_rms is rewritten for the block's next tokens
    }
  }
}

}  // namespace kv_append
}  // namespace cukiln
