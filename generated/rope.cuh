// cukiln RoPE kernel body, shared by every RoPE module (one per element type).
// Rendered from templates/rope.cuh.j2 — edit the template, then run `cukiln build`.
//
// Work layout: one block row (threadIdx.z) per token at a time, threadIdx.x over groups of V pairs inside the
// rotary features, threadIdx.y (and blockIdx.z, when a small grid splits the heads over blocks) over heads. A
// thread computes the angles of its group once per token and applies them to every head it visits, so the
// sin/cos work is shared across heads. A call may rotate two tensors of the same tokens at once (q and k,
// rope_qk): their heads are numbered one after the other (q's, then k's), each with its own pointers and
// strides, and both take the token's angles.
#pragma once
#include "common.cuh"


namespace cukiln {
namespace rope {

// Heads whose loads a thread issues before the first store: independent 16-byte loads in flight,
// and correct in place because every load of an iteration happens before any of its stores.
constexpr int kHeadsInFlight = 2;
// x and out are each touched once: their accesses carry the evict-first hint when kStreaming (the angle
// tables, read again by every block of a token, keep the default).
constexpr bool kStreaming = true;

struct Geometry {
  int tokens, seq_len, batch, heads, heads_k, head_dim, rotary_dim, rotary_offset;
  bool seq_major;  // tokens are numbered s * batch + b (else b * seq_len + s), whichever follows memory
  bool copy_tail;  // out-of-place partial rotary: the features outside the rotated span are copied to out
  bool backward;   // apply the vector-Jacobian product of the forward rotation (rotation by -angle)
  float mscale;    // cos and sin multiplied by it (YaRN's attention factor; 1 for plain RoPE)

  // Features [rotary_offset, rotary_offset + rotary_dim) of each head rotate; heads [0, heads) are the first
  // tensor's (q), [heads, heads + heads_k) the second's (k, _qk variants only). The tensors' pointers point at the rotated span (the
  // host adds rotary_offset to them), so feature indices here count from it.
  template <bool kPair>
  __device__ __forceinline__ int all_heads() const { return kPair ? heads + heads_k : heads; }

  __device__ __forceinline__ void split(int t, int& s, int& b) const {
    if (seq_major) {
      s = t / batch;
      b = t - s * batch;
    } else {
      b = t / seq_len;
      s = t - b * seq_len;
    }
  }
};

// A token's position: explicit positions[b, s], else its sequence index plus an offset. With context
// parallel (cp_size > 1) a local sequence of n tokens holds chunks cp_rank and 2 * cp_size - 1 - cp_rank
// of its global sequence (n / 2 tokens each), so local index s maps to the global index below.
struct Positions {
  const void* positions;
  long long stride_b, stride_s;
  bool positions_int64;
  const void* offsets;
  bool offsets_int64;
  long long offset;
  int cp_size, cp_rank;

  __device__ __forceinline__ long long global_index(long long s, long long n) const {
    if (cp_size == 1) return s;
    const long long half = n / 2;
    return s < half ? s + cp_rank * half : n * cp_size - (cp_rank + 1) * half + (s - half);
  }

  // Position of index s of sequence b, whose local length is n.
  __device__ __forceinline__ long long of(long long s, int b, long long n) const {
    if (positions != nullptr) {
      const long long i = b * stride_b + s * stride_s;
      return positions_int64 ? static_cast<const long long*>(positions)[i]
                             : static_cast<const int*>(positions)[i];
    }
    long long o = offset;
    if (offsets != nullptr) {
      o += offsets_int64 ? static_cast<const long long*>(offsets)[b] : static_cast<const int*>(offsets)[b];
    }
    return global_index(s, n) + o;
  }
};

// M-RoPE (the multimodal rotary embedding of Qwen2-VL and later): a token has three positions, time, height and
// width, and each owns a section of the rotary pairs. Chunked sections: pairs [0, t) take the time position,
// [t, t + h) the height, the rest the width; interleaved (Qwen3-VL): pair i takes the height when i % 3 == 1 and
// i < 3h, the width when i % 3 == 2 and i < 3w, else the time.
struct PairPositions {
  long long time, height, width;
  int section_t, section_h, section_w;
  bool interleaved;

  __device__ __forceinline__ long long of_pair(int i) const {
    if (interleaved) {
      const int r = i % 3;
      return r == 1 && i < 3 * section_h ? height : r == 2 && i < 3 * section_w ? width : time;
    }
    return i < section_t ? time : i < section_t + section_h ? height : width;
  }
};

// M-RoPE's explicit positions [3, b, s] (or [3, s]): row r of token (b, s) at r * stride_r + b * stride_b +
// s * stride_s.
struct SectionedPositions {
  const void* positions;
  long long stride_r, stride_b, stride_s;
  bool positions_int64;
  int section_t, section_h, section_w;
  bool interleaved;

  __device__ __forceinline__ long long read(long long i) const {
    return positions_int64 ? static_cast<const long long*>(positions)[i] : static_cast<const int*>(positions)[i];
  }
  __device__ __forceinline__ PairPositions of(long long s, int b, long long) const {
    const long long i = b * stride_b + s * stride_s;
    return PairPositions{read(i), read(i + stride_r), read(i + 2 * stride_r), section_t, section_h, section_w,
                         interleaved};
  }
};

// --- addressing: where row (token, head) starts and how far apart its features are ---------------
struct PackedRows {  // 0 strides: rows of head_dim elements, tokens back to back in memory order
  long long token_pitch, head_pitch;
  __device__ __forceinline__ long long row(int t, int, int, int h) const { return t * token_pitch + h * head_pitch; }
  __device__ __forceinline__ long long elem(int d) const { return d; }
};

struct Strided3Rows {  // last dimension contiguous
  long long ss, sb, sh;
  __device__ __forceinline__ long long row(int, int s, int b, int h) const { return s * ss + b * sb + h * sh; }
  __device__ __forceinline__ long long elem(int d) const { return d; }
};

struct Strided4Rows {  // fully general
  long long ss, sb, sh, sd;
  __device__ __forceinline__ long long row(int, int s, int b, int h) const { return s * ss + b * sb + h * sh; }
  __device__ __forceinline__ long long elem(int d) const { return d * sd; }
};

// How a launch's rotated features are written: as T (RoPE's own), or through a policy of the caller's (the cache
// append's CacheStores: its key cache, the second tensor, quantized to FP8 when the call's caches are).
struct PlainStores {
  static constexpr bool kActive = false;
};

// The tensors a launch reads and writes: x and out; with kPair (the _qk variants, rope_qk) also x2 and out2, a
// second tensor of the same tokens (k) whose heads come after x's heads_q heads, each tensor with its own Rows
// addressing. A variant without kPair never looks at the second tensor (its kernels are the one-tensor ones).
// Stores (kActive): out2's rows are written through stores.put when stores.fp8 (out2 then holds bytes at the same
// element offsets), with the head's key scale.
template <typename T, class Rows, bool kPair, class Stores = PlainStores>
struct Tensors {
  const T* x;
  T* out;
  const T* x2;
  T* out2;
  Rows x_rows, out_rows, x2_rows, out2_rows;
  int heads_q;

  __device__ __forceinline__ bool second(int h) const { return kPair && h >= heads_q; }
  // The row of head h of token (t, s, b) that is read, and the one written, and their feature offsets.
  __device__ __forceinline__ const T* in_row(int t, int s, int b, int h) const {
    return second(h) ? x2 + x2_rows.row(t, s, b, h - heads_q) : x + x_rows.row(t, s, b, h);
  }
  __device__ __forceinline__ T* out_row(int t, int s, int b, int h) const {
    return second(h) ? out2 + out2_rows.row(t, s, b, h - heads_q) : out + out_rows.row(t, s, b, h);
  }
  __device__ __forceinline__ long long in_elem(int h, int d) const {
    return second(h) ? x2_rows.elem(d) : x_rows.elem(d);
  }
  __device__ __forceinline__ long long out_elem(int h, int d) const {
    return second(h) ? out2_rows.elem(d) : out_rows.elem(d);
  }
  Stores stores{};
  // Features [d, d + V) of head h of token (t, s, b), from fp32 values ``f`` (which a quantizing store may scale).
  template <int V, bool Streaming>
  __device__ __forceinline__ void store(int t, int s, int b, int h, int d, float (&f)[V]) const {
    if constexpr (Stores::kActive) {
      if (second(h) && stores.fp8) {
        const int hk = h - heads_q;
        Stores::template put<V>(reinterpret_cast<unsigned char*>(out2) + out2_rows.row(t, s, b, hk) + out2_rows.elem(d),
                                stores.key(hk), f);
        return;
      }
    }
    store_floats<T, V, Streaming>(out_row(t, s, b, h) + out_elem(h, d), f);
  }
  // The same features copied from the input unchanged (the untouched tail of a partial rotary).
  template <int V, bool Streaming>
  __device__ __forceinline__ void copy(int t, int s, int b, int h, int d) const {
    if constexpr (Stores::kActive) {
      if (second(h) && stores.fp8) {
        float f[V];
        to_floats(load_vec<T, V, Streaming>(in_row(t, s, b, h) + in_elem(h, d)), f);
        store<V, Streaming>(t, s, b, h, d, f);
        return;
      }
    }
    copy_vec<T, V, Streaming>(out_row(t, s, b, h) + out_elem(h, d), in_row(t, s, b, h) + in_elem(h, d));
  }
};

// --- angle sources ------------------------------------------------------------------------------
// kPerElement: every feature has its own angle (a table indexed by feature); otherwise the two
// features of a pair share the angle of their pair index. A position outside a table gives NaN angles:
// the output shows the error and nothing is read out of bounds.
struct FreqsTable {
  static constexpr bool kPerElement = true;
  const float* table;
  long long row_stride, rows;
  __device__ __forceinline__ bool covers(long long pos) const { return pos >= 0 && pos < rows; }
  // Angles of features [first, first + V) (their pairs start at first_pair).
  template <int V, bool INTERLEAVED>
  __device__ __forceinline__ void angles(long long pos, int first, int, float (&c)[V], float (&s)[V]) const {
    const float* row = table + pos * row_stride + first;
#pragma unroll
    for (int k = 0; k < V; ++k) cos_sin_of(static_cast<double>(row[k]), c[k], s[k]);
  }
  // One feature's angle at position p (M-RoPE, where a feature's row is its pair's position); NaN outside the table.
  __device__ __forceinline__ void angle_at(long long p, int feature, int, float& c, float& s) const {
    if (covers(p)) {
      cos_sin_of(static_cast<double>(table[p * row_stride + feature]), c, s);
    } else {
      c = s = __int_as_float(0x7fffffff);
    }
  }
};

template <typename TC>
struct CosSinTable {
  static constexpr bool kPerElement = true;
  const TC* cos;
  const TC* sin;
  long long cos_row, sin_row, rows;
  bool per_pair;  // caches of width rotary_dim/2, indexed by pair
  __device__ __forceinline__ bool covers(long long pos) const { return pos >= 0 && pos < rows; }
  template <int V, bool INTERLEAVED>
  __device__ __forceinline__ void angles(long long pos, int first, int first_pair, float (&c)[V], float (&s)[V]) const {
    // One base pointer per vector and compile-time offsets: interleaved features share a pair two by two.
    const int base = per_pair ? first_pair : first;
    const TC* cr = cos + pos * cos_row + base;
    const TC* sr = sin + pos * sin_row + base;
    if (per_pair && INTERLEAVED) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        c[k] = to_float(cr[k / 2]);
        s[k] = to_float(sr[k / 2]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        c[k] = to_float(cr[k]);
        s[k] = to_float(sr[k]);
      }
    }
  }
  // One feature's cos and sin at position p (M-RoPE, where a feature's row is its pair's position); NaN outside
  // the table.
  __device__ __forceinline__ void angle_at(long long p, int feature, int pair, float& c, float& s) const {
    if (covers(p)) {
      const int col = per_pair ? pair : feature;
      c = to_float(cos[p * cos_row + col]);
      s = to_float(sin[p * sin_row + col]);
    } else {
      c = s = __int_as_float(0x7fffffff);
    }
  }
};

// Sources whose pairs share an angle: angle = position * scale * inv_freq[pair]. They hand out the
// inverse frequencies of V consecutive pairs at once, so the base source calls exp2 once per group.
struct InvFreq {
  static constexpr bool kPerElement = false;
  const float* inv_freq;
  double scale;
  __device__ __forceinline__ bool covers(long long) const { return true; }
  template <int V>
  __device__ __forceinline__ void inv_freqs(int first_pair, double (&inv)[V]) const {
#pragma unroll
    for (int k = 0; k < V; ++k) inv[k] = static_cast<double>(inv_freq[first_pair + k]);
  }
};

struct BaseAngles {
  static constexpr bool kPerElement = false;
  double exponent_step;  // -2 * log2(base) / rotary_dim: inv_freq[i] = 2 ** (i * exponent_step)
  double ratio;          // 2 ** exponent_step: inv_freq[i + 1] / inv_freq[i]
  double scale;
  __device__ __forceinline__ bool covers(long long) const { return true; }
  template <int V>
  __device__ __forceinline__ void inv_freqs(int first_pair, double (&inv)[V]) const {
    inv[0] = exp2(first_pair * exponent_step);
#pragma unroll
    for (int k = 1; k < V; ++k) inv[k] = inv[k - 1] * ratio;  // V <= 8 products: error ~1e-15
  }
};

// The angles of a group's V consecutive pairs handed to the features of its two vectors.
template <int V, bool INTERLEAVED>
__device__ __forceinline__ void spread_pair_angles(const float (&c)[V], const float (&s)[V], float (&c_lo)[V],
                                                   float (&s_lo)[V], float (&c_hi)[V], float (&s_hi)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if constexpr (!INTERLEAVED || V == 1) {  // pair k is (lo + k, hi + k)
      c_lo[k] = c_hi[k] = c[k];
      s_lo[k] = s_hi[k] = s[k];
    } else {  // feature k of a vector belongs to the vector's pair k / 2
      c_lo[k] = c[k / 2];
      s_lo[k] = s[k / 2];
      c_hi[k] = c[V / 2 + k / 2];
      s_hi[k] = s[V / 2 + k / 2];
    }
  }
}

// Cos and sin for the two vectors [lo, lo + V) and [hi, hi + V) of rotary features.
// An invalid token (its packed sequence is malformed) or a position outside the table gets NaN angles.
template <int V, bool INTERLEAVED, class Src>
__device__ __forceinline__ void fill_angles(const Src& src, bool valid, long long pos, int lo, int hi, int half_rd,
                                            float (&c_lo)[V], float (&s_lo)[V], float (&c_hi)[V], float (&s_hi)[V]) {
  if (!valid || !src.covers(pos)) {
#pragma unroll
    for (int k = 0; k < V; ++k) c_lo[k] = s_lo[k] = c_hi[k] = s_hi[k] = __int_as_float(0x7fffffff);
    return;
  }
  if constexpr (Src::kPerElement) {
    src.template angles<V, INTERLEAVED>(pos, lo, INTERLEAVED ? lo / 2 : lo, c_lo, s_lo);
    src.template angles<V, INTERLEAVED>(pos, hi, INTERLEAVED ? hi / 2 : hi - half_rd, c_hi, s_hi);
  } else {
    // The V pairs of a group are consecutive: lo .. lo+V-1 (half), or lo/2 .. lo/2+V-1 (interleaved,
    // where the first V/2 lie in the lo vector and the rest in the hi vector).
    double inv[V];
    src.template inv_freqs<V>(INTERLEAVED ? lo / 2 : lo, inv);
    const double scaled_pos = static_cast<double>(pos) * src.scale;
    float c[V], s[V];
#pragma unroll
    for (int j = 0; j < V; ++j) cos_sin_of(scaled_pos * inv[j], c[j], s[j]);
    spread_pair_angles<V, INTERLEAVED>(c, s, c_lo, s_lo, c_hi, s_hi);
  }
}

// fill_angles for M-RoPE: each pair's angle from the position of its section.
template <int V, bool INTERLEAVED, class Src>
__device__ __forceinline__ void fill_angles(const Src& src, bool valid, const PairPositions& pos, int lo, int hi,
                                            int /* half_rd */, float (&c_lo)[V], float (&s_lo)[V], float (&c_hi)[V],
                                            float (&s_hi)[V]) {
  if (!valid) {
#pragma unroll
    for (int k = 0; k < V; ++k) c_lo[k] = s_lo[k] = c_hi[k] = s_hi[k] = __int_as_float(0x7fffffff);
    return;
  }
  if constexpr (Src::kPerElement) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      // features lo + k and hi + k: one pair (half pairing: its position picked once), or pairs lo/2 + k/2 and
      // hi/2 + k/2 (interleaved)
      const int pair_lo = INTERLEAVED ? lo / 2 + k / 2 : lo + k;
      const int pair_hi = INTERLEAVED ? hi / 2 + k / 2 : pair_lo;
      const long long p_lo = pos.of_pair(pair_lo);
      src.angle_at(p_lo, lo + k, pair_lo, c_lo[k], s_lo[k]);
      src.angle_at(INTERLEAVED ? pos.of_pair(pair_hi) : p_lo, hi + k, pair_hi, c_hi[k], s_hi[k]);
    }
  } else {
    const int first_pair = INTERLEAVED ? lo / 2 : lo;
    double inv[V];
    src.template inv_freqs<V>(first_pair, inv);
    float c[V], s[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      cos_sin_of(static_cast<double>(pos.of_pair(first_pair + j)) * src.scale * inv[j], c[j], s[j]);
    }
    spread_pair_angles<V, INTERLEAVED>(c, s, c_lo, s_lo, c_hi, s_hi);
  }
}

// An angle source picked at run time (angles=any: RoPE's kernels narrower than 16 bytes, the append's and the fused
// step's take every source, where a kernel per source cost the build about four times the work): one of each source
// above, and kind, the index of the one that serves (freqs, cossin, cossinf32, invfreq, base); the same for every thread of
// a launch. Its fill_angles switches to the source's own, for one position a token as for M-RoPE's sections.
template <typename TC>
struct AnyAngles {
  int kind;
  FreqsTable freqs;
  CosSinTable<TC> cossin;
  CosSinTable<float> cossinf32;
  InvFreq invfreq;
  BaseAngles base;
};

template <int V, bool INTERLEAVED, typename TC>
__device__ __forceinline__ void fill_angles(const AnyAngles<TC>& src, bool valid, long long pos, int lo, int hi,
                                            int half_rd, float (&c_lo)[V], float (&s_lo)[V], float (&c_hi)[V],
                                            float (&s_hi)[V]) {
  switch (src.kind) {
    case 0:
      fill_angles<V, INTERLEAVED>(src.freqs, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    case 1:
      fill_angles<V, INTERLEAVED>(src.cossin, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    case 2:
      fill_angles<V, INTERLEAVED>(src.cossinf32, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    case 3:
      fill_angles<V, INTERLEAVED>(src.invfreq, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    default:
      fill_angles<V, INTERLEAVED>(src.base, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
  }
}

template <int V, bool INTERLEAVED, typename TC>
__device__ __forceinline__ void fill_angles(const AnyAngles<TC>& src, bool valid, const PairPositions& pos, int lo, int hi,
                                            int half_rd, float (&c_lo)[V], float (&s_lo)[V], float (&c_hi)[V],
                                            float (&s_hi)[V]) {
  switch (src.kind) {
    case 0:
      fill_angles<V, INTERLEAVED>(src.freqs, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    case 1:
      fill_angles<V, INTERLEAVED>(src.cossin, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    case 2:
      fill_angles<V, INTERLEAVED>(src.cossinf32, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    case 3:
      fill_angles<V, INTERLEAVED>(src.invfreq, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
    default:
      fill_angles<V, INTERLEAVED>(src.base, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
      return;
  }
}

// cos and sin times m: the rotation scaled, forward and backward alike (its Jacobian is scaled by m too).
template <int V>
__device__ __forceinline__ void scale_angles(float m, float (&c_lo)[V], float (&s_lo)[V], float (&c_hi)[V],
                                             float (&s_hi)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    c_lo[k] *= m;
    s_lo[k] *= m;
    c_hi[k] *= m;
    s_hi[k] *= m;
  }
}

// Pair (p, q), rot(x)[p] = -x[q], rot(x)[q] = x[p]. Forward: y = x*cos + rot(x)*sin, each feature with
// its own angle: p' = p*cp - q*sp, q' = q*cq + p*sq.
__device__ __forceinline__ void rotate_pair(float& p, float& q, float cp, float sp, float cq, float sq) {
  const float xp = p, xq = q;
  p = xp * cp - xq * sp;
  q = xq * cq + xp * sq;
}

// Backward is the exact vector-Jacobian product g = gy*cos - rot(gy*sin): p' = p*cp + q*sq, q' = q*cq - p*sp,
// which is the forward rotation with each pair's sines swapped and negated. Done once per thread and
// token on the angles, so forward and backward share one kernel (direction is a runtime argument).
template <int V, bool INTERLEAVED>
__device__ __forceinline__ void sines_for_backward(float (&s_lo)[V], float (&s_hi)[V]) {
  if constexpr (!INTERLEAVED || V == 1) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float t = s_lo[k];
      s_lo[k] = -s_hi[k];
      s_hi[k] = -t;
    }
  } else {
#pragma unroll
    for (int m = 0; m < V / 2; ++m) {
      const float tl = s_lo[2 * m], th = s_hi[2 * m];
      s_lo[2 * m] = -s_lo[2 * m + 1];
      s_lo[2 * m + 1] = -tl;
      s_hi[2 * m] = -s_hi[2 * m + 1];
      s_hi[2 * m + 1] = -th;
    }
  }
}

template <int V, bool INTERLEAVED>
__device__ __forceinline__ void rotate(float (&a)[V], float (&b)[V], const float (&c_lo)[V], const float (&s_lo)[V],
                                       const float (&c_hi)[V], const float (&s_hi)[V]) {
  if constexpr (!INTERLEAVED || V == 1) {
#pragma unroll
    for (int k = 0; k < V; ++k) rotate_pair(a[k], b[k], c_lo[k], s_lo[k], c_hi[k], s_hi[k]);
  } else {
#pragma unroll
    for (int m = 0; m < V / 2; ++m) {
      rotate_pair(a[2 * m], a[2 * m + 1], c_lo[2 * m], s_lo[2 * m], c_lo[2 * m + 1], s_lo[2 * m + 1]);
      rotate_pair(b[2 * m], b[2 * m + 1], c_hi[2 * m], s_hi[2 * m], c_hi[2 * m + 1], s_hi[2 * m + 1]);
    }
  }
}

// A per-head transform of a head's features as they are read, before the rotation (kv_append's QK-norm:
// kv_append.cuh): apply<V>(h, first, f) scales features [first, first + V) of head h (counted from the rotated
// span's start) in place. NoNorm, RoPE's own, does nothing and compiles to nothing.
struct NoNorm {
  static constexpr bool kActive = false;
  template <int V>
  __device__ __forceinline__ void apply(int, int, float (&)[V]) const {}
};

// Every head of one token: the rotary features rotated, the rest copied when copy_tail. The token's rows are at
// (t, s, b) for the Rows addressing; its angles are those of position pos (a long long, or M-RoPE's
// PairPositions; NaN when !valid). With kSplitHeads
// (dense layouts: a grid of few tokens splits the heads over blockIdx.z) this block visits heads
// blockIdx.z * blockDim.y + threadIdx.y and every blockDim.y * gridDim.z-th after it, else every head.
// Every feature read passes through norm (NoNorm: untouched) before it is rotated or copied.
template <typename T, int V, bool INTERLEAVED, bool kPair, bool kSplitHeads, class Rows, class Src, class Pos,
          class Norm = NoNorm, class Stores = PlainStores>
__device__ __forceinline__ void rope_token(int t, int s, int b, const Pos& pos, bool valid,
                                           const Tensors<T, Rows, kPair, Stores>& io, const Geometry& g,
                                           const Src& src, const Norm& norm = Norm{}) {
  const int half_rd = g.rotary_dim / 2;
  const int groups = half_rd / V;
  const int heads = g.template all_heads<kPair>();
  const int split = kSplitHeads ? blockIdx.z : 0, splits = kSplitHeads ? gridDim.z : 1;
  const int head_step = blockDim.y * splits;

  for (int grp = threadIdx.x; grp < groups; grp += blockDim.x) {
    // Feature indices inside the rotated span (the angle tables' columns, and the addresses' too).
    const int lo = INTERLEAVED ? 2 * V * grp : V * grp;
    const int hi = INTERLEAVED ? lo + V : lo + half_rd;
    float c_lo[V], s_lo[V], c_hi[V], s_hi[V];
    bool have_angles = false;

    for (int h0 = split * blockDim.y + threadIdx.y; h0 < heads; h0 += head_step * kHeadsInFlight) {
      // Raw vectors stay packed in registers until used: half the registers of converted floats.
      Vec<T, V> a[kHeadsInFlight], bv[kHeadsInFlight];
#pragma unroll
      for (int u = 0; u < kHeadsInFlight; ++u) {
        const int h = h0 + u * head_step;
        if (h < heads) {
          const T* row = io.in_row(t, s, b, h);
          a[u] = load_vec<T, V, kStreaming>(row + io.in_elem(h, lo));
          bv[u] = load_vec<T, V, kStreaming>(row + io.in_elem(h, hi));
        }
      }
      // The angles are computed while the first loads are in flight, then reused for every head.
      if (!have_angles) {
        fill_angles<V, INTERLEAVED>(src, valid, pos, lo, hi, half_rd, c_lo, s_lo, c_hi, s_hi);
        if (g.mscale != 1.0f) scale_angles<V>(g.mscale, c_lo, s_lo, c_hi, s_hi);
        if (g.backward) sines_for_backward<V, INTERLEAVED>(s_lo, s_hi);
        have_angles = true;
      }
#pragma unroll
      for (int u = 0; u < kHeadsInFlight; ++u) {
        const int h = h0 + u * head_step;
        if (h < heads) {
          float fa[V], fb[V];
          to_floats(a[u], fa);
          to_floats(bv[u], fb);
          if constexpr (Norm::kActive) {
            norm.template apply<V>(h, lo, fa);
            norm.template apply<V>(h, hi, fb);
          }
          rotate<V, INTERLEAVED>(fa, fb, c_lo, s_lo, c_hi, s_hi);
          if constexpr (Stores::kActive) {
            io.template store<V, kStreaming>(t, s, b, h, lo, fa);
            io.template store<V, kStreaming>(t, s, b, h, hi, fb);
          } else {
            T* row = io.out_row(t, s, b, h);
            store_floats<T, V, kStreaming>(row + io.out_elem(h, lo), fa);
            store_floats<T, V, kStreaming>(row + io.out_elem(h, hi), fb);
          }
        }
      }
    }
  }

  if (g.copy_tail) {
    // The features outside [rotary_offset, rotary_offset + rotary_dim): tail element e of a head is feature e
    // before the span, e + rotary_dim after it (counted from the span's start, where the pointers point).
    const int tail_vecs = (g.head_dim - g.rotary_dim) / V;
    const int n = tail_vecs * heads;
    const int threads = blockDim.x * blockDim.y;
    for (int i = split * threads + threadIdx.y * blockDim.x + threadIdx.x; i < n; i += threads * splits) {
      const int h = i / tail_vecs;
      const int e = (i - h * tail_vecs) * V;
      const int d = (e < g.rotary_offset ? e : e + g.rotary_dim) - g.rotary_offset;
      if constexpr (Norm::kActive) {
        float f[V];
        to_floats(load_vec<T, V, kStreaming>(io.in_row(t, s, b, h) + io.in_elem(h, d)), f);
        norm.template apply<V>(h, d, f);
        io.template store<V, kStreaming>(t, s, b, h, d, f);
      } else if constexpr (Stores::kActive) {
        io.template copy<V, kStreaming>(t, s, b, h, d);
      } else {
        copy_vec<T, V, kStreaming>(io.out_row(t, s, b, h) + io.out_elem(h, d), io.in_row(t, s, b, h) + io.in_elem(h, d));
      }
    }
  }
}

// Dense layouts: block rows (threadIdx.z) walk the tokens, so a launch may use fewer blocks than
// tokens / blockDim.z and each block then handles several tokens in turn. P: Positions, or M-RoPE's
// SectionedPositions.
template <typename T, int V, bool INTERLEAVED, bool kPair, class Rows, class Src, class P>
__device__ __forceinline__ void rope_dense(const Tensors<T, Rows, kPair>& io, const Geometry& g, const P& positions,
                                           const Src& src) {
  for (int t = blockIdx.x * blockDim.z + threadIdx.z; t < g.tokens; t += gridDim.x * blockDim.z) {
    int s, b;
    g.split(t, s, b);
    const auto pos = positions.of(s, b, g.seq_len);
    rope_token<T, V, INTERLEAVED, kPair, true>(t, s, b, pos, true, io, g, src);
  }
}

// --- packed sequences (thd) ---------------------------------------------------------------------
// x is [tokens, heads, head_dim]; cu_seqlens[num_seqs + 1] are the global (pre context-parallel) sequence
// offsets, so local sequence i holds packed tokens [cu_seqlens[i] / cp_size, cu_seqlens[i + 1] / cp_size).
// Every read of cu_seqlens stays in [0, num_seqs]; a token past the last sequence is left alone; a
// sequence of negative length or, with context parallel, of a length not divisible by 2 * cp_size is
// malformed and its tokens get NaN outputs (the host cannot check device-resident cu_seqlens without a
// synchronization).
struct PackedSeqs {
  const int* cu_seqlens;
  int num_seqs, cp_size;
  __device__ __forceinline__ int start(int i) const { return cu_seqlens[i] / cp_size; }
  __device__ __forceinline__ bool valid(int i) const {
    const int len = cu_seqlens[i + 1] - cu_seqlens[i];
    return len >= 0 && len % (cp_size == 1 ? 1 : 2 * cp_size) == 0;
  }
};

// Rotates packed token t of local sequence i (whose start the caller has read) when it lies inside it.
template <typename T, int V, bool INTERLEAVED, bool kPair, class Rows, class Src>
__device__ __forceinline__ void rope_packed_token(int t, int i, int start, const PackedSeqs& seqs,
                                                  const Tensors<T, Rows, kPair>& io, const Geometry& g,
                                                  const Positions& positions, const Src& src) {
  const int end = seqs.start(i + 1);
  if (t < 0 || t < start || t >= end || t >= g.tokens) return;
  const int n = end - start;
  const long long pos = positions.of(t - start, i, n);
  // Packed rows are addressed as a [tokens, 1] dense tensor: (s, b) = (t, 0).
  rope_token<T, V, INTERLEAVED, kPair, false>(t, t, 0, pos, seqs.valid(i), io, g, src);
}

// The last sequence whose start is <= t (-1 if none): a search by the first `lanes` (<= 32) threads of
// the block, each probing one point per round, ceil(log_lanes(num_seqs)) rounds. With malformed
// (non-monotonic) offsets it still ends inside [-1, num_seqs).
__device__ __forceinline__ int find_sequence(const PackedSeqs& seqs, int t, int lane, int lanes) {
  const unsigned mask = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  if (__ballot_sync(mask, lane == 0 && seqs.num_seqs > 0 && seqs.start(0) <= t) == 0) return -1;
  int lo = 0, hi = seqs.num_seqs;  // answer in [lo, hi); start(lo) <= t
  while (hi - lo > 1) {
    const int step = (hi - lo + lanes - 1) / lanes;
    const int probe = lo + lane * step;
    const unsigned found = __ballot_sync(mask, probe < hi && seqs.start(probe) <= t);
    lo += (31 - __clz(found)) * step;  // the last lane that found start <= t (lane 0 always does)
    hi = min(hi, lo + step);
  }
  return lo;
}

// Token dispatch: one block row per packed token, cost linear in the tokens whatever the number of
// sequences. The first warp finds the sequence of the block's first token once; each row then walks forward
// over the (few) sequences that start inside the block.
template <typename T, int V, bool INTERLEAVED, bool kPair, class Rows, class Src>
__device__ __forceinline__ void rope_thd_token(const Tensors<T, Rows, kPair>& io, const Geometry& g,
                                               const Positions& positions, const PackedSeqs& seqs, const Src& src) {
  __shared__ int first_seq;
  const int linear = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const int lanes = min(32, static_cast<int>(blockDim.x * blockDim.y * blockDim.z));
  for (int base = blockIdx.x * blockDim.z; base < g.tokens; base += gridDim.x * blockDim.z) {
    if (linear < lanes) {
      const int i = find_sequence(seqs, base, linear, lanes);
      if (linear == 0) first_seq = i;
    }
    __syncthreads();
    const int t = base + threadIdx.z;
    int i = first_seq;
    if (i >= 0 && t < g.tokens) {
      int start = seqs.start(i);
      while (i + 1 < seqs.num_seqs) {
        const int next = seqs.start(i + 1);
        if (next > t) break;
        ++i;
        start = next;
      }
      rope_packed_token<T, V, INTERLEAVED, kPair>(t, i, start, seqs, io, g, positions, src);
    }
    __syncthreads();  // first_seq is rewritten by the next iteration
  }
}

// Grid dispatch: blockIdx.y is the sequence, blockIdx.x walks its tokens. Blocks past the sequence's
// end exit at once; a grid narrower than the longest sequence (a max_seqlen hint too small) still
// covers every token, since blocks loop.
template <typename T, int V, bool INTERLEAVED, bool kPair, class Rows, class Src>
__device__ __forceinline__ void rope_thd_grid(const Tensors<T, Rows, kPair>& io, const Geometry& g,
                                              const Positions& positions, const PackedSeqs& seqs, const Src& src) {
  const int i = blockIdx.y;
  const int start = seqs.start(i), end = seqs.start(i + 1);
  const int n = min(end, g.tokens) - start;
  for (int k = blockIdx.x * blockDim.z + threadIdx.z; k < n; k += gridDim.x * blockDim.z) {
    rope_packed_token<T, V, INTERLEAVED, kPair>(start + k, i, start, seqs, io, g, positions, src);
  }
}

template <class P>
__device__ __forceinline__ Geometry geometry_of(const P& p) {
  return Geometry{static_cast<int>(p.tokens), static_cast<int>(p.seq_len), static_cast<int>(p.batch),
                  static_cast<int>(p.heads), static_cast<int>(p.heads_k), static_cast<int>(p.head_dim),
                  static_cast<int>(p.rotary_dim), static_cast<int>(p.rotary_offset),
                  p.seq_major != 0, p.copy_tail != 0, p.backward != 0, static_cast<float>(p.mscale)};
}

template <class P>
__device__ __forceinline__ Positions positions_of(const P& p) {
  return Positions{p.positions, p.pos_stride_b, p.pos_stride_s, p.positions_int64 != 0,
                   p.offsets, p.offsets_int64 != 0, p.offset, static_cast<int>(p.cp_size),
                   static_cast<int>(p.cp_rank)};
}

template <class P>
__device__ __forceinline__ SectionedPositions sectioned_positions_of(const P& p) {
  return SectionedPositions{p.positions, p.pos_stride_r, p.pos_stride_b, p.pos_stride_s, p.positions_int64 != 0,
                            static_cast<int>(p.section_t), static_cast<int>(p.section_h),
                            static_cast<int>(p.section_w), p.sections_interleaved != 0};
}

}  // namespace rope
}  // namespace cukiln
