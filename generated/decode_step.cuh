// cukiln decode-step kernel body: the append of kv_append fused into the warp-specialized attention of decode.cuh.
// Rendered from templates/decode_step.cuh.j2 — edit the template, then run `cukiln build`.
//
// One launch per step instead of an append and then an attention. Every block of (row, KV head, split) rotates
// its own query heads into its query tile (QK-norm first, where the variant has it), and a block whose keys end
// with the new one rotates the new key into the key cache and copies the new value into the value cache before its
// producer warp issues the first tile copy. Only such blocks read that slot: the last split of each head group of
// the row's KV head (several where the GQA group spans several blocks), each of which writes the same bytes itself
// before it reads them. The arithmetic of each rotated feature is kv_append's (rope.cuh's steps in rope_token's
// order, the inverse RMS summed in head_inv_rms's order, the untouched tail copied as bits), so the caches hold the
// bits that the two-launch step writes, and the query tile the bits of its rotated query.
#pragma once
#include "decode.cuh"
#include "kv_append.cuh"

namespace cukiln {
namespace decode_step {

// The step around decode::attend_ws (its Step): A is the variant's kv_append parameter struct (the lengths and the
// positions as kv_append reads them, the pointers of q, k and k_cache at the rotated span's start), Src its angle
// source; V elements a vector.
template <typename T, int V, bool INTERLEAVED, bool kNorm, class A, class Src>
struct StepAppend {
  static constexpr bool kActive = true;
  const A& a;
  Src src;

  // The keys the attention reads, from the lengths before the append: one more, the new one. A row whose new slot
  // would run past the capacity is malformed (NaN output, nothing written), as the two-launch step reports it.
  __device__ __forceinline__ decode::KeyRange after_append(decode::KeyRange r, long long capacity) const {
    if (r.malformed || r.end >= capacity) return {0, 0, true};
    return {r.start, r.end + 1, false};
  }

  // The new token's position: positions[b], else its slot (the length before the append) less the row's start.
  __device__ __forceinline__ long long position(int b, const decode::KeyRange& r) const {
    if (a.positions == nullptr) return static_cast<long long>(r.end - 1) - r.start;
    const long long at = b * a.pos_stride_b;
    return a.positions_int64 ? static_cast<const long long*>(a.positions)[at]
                             : static_cast<const int*>(a.positions)[at];
  }

  // The inverse RMS of one head whose features start at `row`, by one thread, in head_inv_rms's order.
  __device__ __forceinline__ float inv_rms_of(const T* row) const {
    const int d = static_cast<int>(a.head_dim);
    float sum = 0.f;
#pragma unroll 4
    for (int e = 0; e < d; e += V) {
      float f[V];
      to_floats(load_vec<T, V, false>(row + e), f);
#pragma unroll
      for (int k = 0; k < V; ++k) sum += f[k] * f[k];
    }
    return rsqrtf(sum / static_cast<float>(d) + static_cast<float>(a.norm_eps));
  }

  // Heads [0, heads) of the new token, head h read at in + h * in_sh and written at out + h * out_sh (both at the
  // rotated span's start), by threads t, t + threads, ... of the block: each (head, group of V pairs) rotated at
  // `pos` after norm, then the features outside the span passed through norm.
  template <class Norm>
  __device__ __forceinline__ void rotate_heads(const T* in, long long in_sh, T* out, long long out_sh, int heads,
                                               long long pos, const Norm& norm, int t, int threads) const {
    const int half_rd = static_cast<int>(a.rotary_dim) / 2, groups = half_rd / V;
    const float mscale = static_cast<float>(a.mscale);
    for (int i = t; i < heads * groups; i += threads) {
      const int h = i / groups, grp = i - h * groups;
      const int lo = INTERLEAVED ? 2 * V * grp : V * grp;
      const int hi = INTERLEAVED ? lo + V : lo + half_rd;
      const T* row = in + h * in_sh;
      const Vec<T, V> va = load_vec<T, V, false>(row + lo), vb = load_vec<T, V, false>(row + hi);
      float c_lo[V], s_lo[V], c_hi[V], s_hi[V];
      rope::fill_angles<V, INTERLEAVED>(src, true, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      if (mscale != 1.0f) rope::scale_angles<V>(mscale, c_lo, s_lo, c_hi, s_hi);
      float fa[V], fb[V];
      to_floats(va, fa);
      to_floats(vb, fb);
      if constexpr (Norm::kActive) {
        norm.template apply<V>(h, lo, fa);
        norm.template apply<V>(h, hi, fb);
      }
      rope::rotate<V, INTERLEAVED>(fa, fb, c_lo, s_lo, c_hi, s_hi);
      store_floats<T, V, false>(out + h * out_sh + lo, fa);
      store_floats<T, V, false>(out + h * out_sh + hi, fb);
    }
    // the features outside [rotary_offset, rotary_offset + rotary_dim), counted from the span's start
    const int tail_vecs = static_cast<int>(a.head_dim - a.rotary_dim) / V;
    const int offset = static_cast<int>(a.rotary_offset), rd = static_cast<int>(a.rotary_dim);
    for (int i = t; i < heads * tail_vecs; i += threads) {
      const int h = i / tail_vecs, e = (i - h * tail_vecs) * V;
      const int d = (e < offset ? e : e + rd) - offset;
      if constexpr (Norm::kActive) {
        float f[V];
        to_floats(load_vec<T, V, false>(in + h * in_sh + d), f);
        norm.template apply<V>(h, d, f);
        store_floats<T, V, false>(out + h * out_sh + d, f);
      } else {
        copy_vec<T, V, false>(out + h * out_sh + d, in + h * in_sh + d);  // as bits, as rope_token copies it
      }
    }
  }

  // Every thread of the block: the new key of (b, kv_head) rotated into the key cache at the new slot, the new value
  // copied into the value cache there.
  __device__ __forceinline__ void append_key(int b, int kv_head, const decode::KeyRange& r) const {
    const long long slot = r.end - 1, pos = position(b, r);
    const T* k = static_cast<const T*>(a.k) + b * a.k_sb + kv_head * a.k_sh;
    T* k_cache = static_cast<T*>(a.k_cache) + b * a.k_cache_sb + slot * a.k_cache_ss + kv_head * a.k_cache_sh;
    if constexpr (kNorm) {
      __shared__ float k_inv_rms;
      if (threadIdx.x == 0 && a.k_norm_weight != nullptr) k_inv_rms = inv_rms_of(k - a.rotary_offset);
      __syncthreads();
      // one head, counted as k's (heads_q 0)
      const kv_append::HeadNorm<T> norm{&k_inv_rms, a.q_norm_weight, a.k_norm_weight, a.norm_weight_fp32 != 0, 0,
                                        static_cast<int>(a.rotary_offset)};
      rotate_heads(k, 0, k_cache, 0, 1, pos, norm, threadIdx.x, blockDim.x);
    } else {
      rotate_heads(k, 0, k_cache, 0, 1, pos, rope::NoNorm{}, threadIdx.x, blockDim.x);
    }
    const T* v = static_cast<const T*>(a.v) + b * a.v_sb + kv_head * a.v_sh;
    T* v_cache = static_cast<T*>(a.v_cache) + b * a.v_cache_sb + slot * a.v_cache_ss + kv_head * a.v_cache_sh;
    for (int e = threadIdx.x * V; e < a.head_dim; e += blockDim.x * V) copy_vec<T, V>(v_cache + e, v + e);
  }

  // The computing warps: the block's query heads [first_head, first_head + rows) of row b rotated into the query
  // tile (rows kPitch apart), its padding rows zeroed.
  template <int D, int kPitch>
  __device__ __forceinline__ void load_query(T* q_tile, int b, int first_head, int rows,
                                             const decode::KeyRange& r) const {
    for (int i = threadIdx.x; i < (decode::kHeadRows - rows) * D; i += decode::kThreads) {
      q_tile[(rows + i / D) * kPitch + i % D] = T{0};
    }
    const T* q = static_cast<const T*>(a.q) + b * a.q_sb + first_head * a.q_sh;
    T* out = q_tile + a.rotary_offset;
    const long long pos = position(b, r);
    if constexpr (kNorm) {
      __shared__ float q_inv_rms[decode::kHeadRows];
      if (threadIdx.x < rows && a.q_norm_weight != nullptr) {
        q_inv_rms[threadIdx.x] = inv_rms_of(q - a.rotary_offset + threadIdx.x * a.q_sh);
      }
      decode::block_sync<true>();
      const kv_append::HeadNorm<T> norm{q_inv_rms, a.q_norm_weight, a.k_norm_weight, a.norm_weight_fp32 != 0, rows,
                                        static_cast<int>(a.rotary_offset)};
      rotate_heads(q, a.q_sh, out, kPitch, rows, pos, norm, threadIdx.x, decode::kThreads);
    } else {
      rotate_heads(q, a.q_sh, out, kPitch, rows, pos, rope::NoNorm{}, threadIdx.x, decode::kThreads);
    }
  }
};

template <typename T, int V, bool INTERLEAVED, bool kNorm, class A, class Src>
__device__ __forceinline__ StepAppend<T, V, INTERLEAVED, kNorm, A, Src> step_append(const A& a, const Src& src) {
  return {a, src};
}

}  // namespace decode_step
}  // namespace cukiln
