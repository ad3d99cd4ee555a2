// cukiln KV-cache append kernel body, shared by every kv_append module (one per element type).
// Rendered from templates/kv_append.cuh.j2 — edit the template, then run `cukiln build`.
//
// One block row (threadIdx.z) per new token (row b, token j of the row's n new ones): its query heads and key heads
// are rotated together by RoPE's token body (rope.cuh, as rope_qk rotates q and k), the query to q_out and the keys
// straight into the key cache at slot kv_lens[b] + j, and the token's value heads are copied into the value cache at
// the same slot. The angles are those of position slot - kv_start[b] (or the explicit positions[b, j]).
#pragma once
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

// A row whose n new slots would run past the capacity (or whose length or start is malformed: lengths on the
// device are never read back) writes nothing to the caches; its query rows get NaN rotated features instead, the
// way decode_attention reports bad lengths.
template <typename T, int V, bool INTERLEAVED, class P, class Src>
__device__ __forceinline__ void append_tokens(const P& p, const Src& src) {
  const int n = static_cast<int>(p.new_tokens);
  const int tokens = static_cast<int>(p.batch) * n;
  const rope::Geometry g{1, 1, 1, static_cast<int>(p.heads_q), static_cast<int>(p.heads_kv),
                         static_cast<int>(p.head_dim), static_cast<int>(p.rotary_dim),
                         static_cast<int>(p.rotary_offset), false, p.copy_tail != 0, false,
                         static_cast<float>(p.mscale)};
  for (int t = blockIdx.x * blockDim.z + threadIdx.z; t < tokens; t += gridDim.x * blockDim.z) {
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
    if (valid) {
      const T* k = static_cast<const T*>(p.k) + b * p.k_sb + j * p.k_ss;
      T* k_cache = static_cast<T*>(p.k_cache) + b * p.k_cache_sb + slot * p.k_cache_ss;
      const rope::Tensors<T, KvRows, true> io{q, q_out, k, k_cache, KvRows{p.q_sh}, KvRows{p.q_out_sh},
                                              KvRows{p.k_sh}, KvRows{p.k_cache_sh}, static_cast<int>(p.heads_q)};
      rope::rope_token<T, V, INTERLEAVED, true, false>(t, 0, 0, pos, true, io, g, src);
      // the values, whole heads, into the same slot
      const T* v = static_cast<const T*>(p.v) + b * p.v_sb + j * p.v_ss;
      T* v_cache = static_cast<T*>(p.v_cache) + b * p.v_cache_sb + slot * p.v_cache_ss;
      const int row_vecs = static_cast<int>(p.head_dim) / V;
      const int count = row_vecs * static_cast<int>(p.heads_kv);
      for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < count; i += blockDim.x * blockDim.y) {
        const int h = i / row_vecs;
        const int e = (i - h * row_vecs) * V;
        copy_vec<T, V, rope::kStreaming>(v_cache + h * p.v_cache_sh + e, v + h * p.v_sh + e);
      }
    } else {
      const rope::Tensors<T, KvRows, false> io{q, q_out, nullptr, nullptr, KvRows{p.q_sh}, KvRows{p.q_out_sh},
                                               KvRows{0}, KvRows{0}, static_cast<int>(p.heads_q)};
      rope::rope_token<T, V, INTERLEAVED, false, false>(t, 0, 0, pos, false, io, g, src);
    }
  }
}

}  // namespace kv_append
}  // namespace cukiln
