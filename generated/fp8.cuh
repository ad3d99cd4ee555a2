// cukiln FP8 (e4m3) KV caches: their scales, the widening of cached bytes to q's type (decode attention) and the
// quantizing stores of new keys and values (the cache append).
// Rendered from templates/fp8.cuh.j2 — edit the template, then run `cukiln build`.
//
// A cache holds each value / scale rounded to e4m3 with saturation (to +-448; NaN stays NaN), the scales per KV head
// or one for all. Every e4m3 value is exactly a 16-bit one, so widening is exact and the scales are applied in fp32
// around it (decode folds the key scale into the logit scale and the value scale into the output).
#pragma once
#include "common.cuh"

namespace cukiln {

struct CacheScales {
  const float* k;  // null: k_value for every KV head
  long long k_stride;
  float k_value;
  const float* v;
  long long v_stride;
  float v_value;
  __device__ __forceinline__ float key(int h) const { return k != nullptr ? k[h * k_stride] : k_value; }
  __device__ __forceinline__ float value(int h) const { return v != nullptr ? v[h * v_stride] : v_value; }
};

template <class P>
__device__ __forceinline__ CacheScales cache_scales_of(const P& p) {
  return CacheScales{static_cast<const float*>(p.k_scale), p.k_scale_stride, static_cast<float>(p.k_scale_value),
                     static_cast<const float*>(p.v_scale), p.v_scale_stride, static_cast<float>(p.v_scale_value)};
}

__device__ __forceinline__ unsigned byte_perm(unsigned a, unsigned b, unsigned selector) {
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
}

// --- widening ---------------------------------------------------------------------------------------------------
// Two e4m3 bytes, each the high byte of a 16-bit lane of ``x``, as two T packed: the bytes' exponent and mantissa
// bits moved into T's fields give the value times 2^-8 (f16: exponent bias 15 against e4m3's 7) or 2^-120 (bf16:
// bias 127), subnormals alike, and one exact multiply by the power of two restores it (an integer trick, not the
// conversion unit's quarter rate). The e4m3 NaN (every exponent and mantissa bit set) would come out as 480, a value
// no e4m3 holds (its largest is 448): widen4 sets those lanes to NaN.
template <typename T> struct Fp8Pair;
template <> struct Fp8Pair<f16> {
  static __device__ __forceinline__ unsigned of(unsigned x) {
    const unsigned bits = (x & 0x80008000u) | ((x >> 1) & 0x3f803f80u);
    unsigned r;
    asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(bits), "r"(0x5c005c00u));  // x 2^8
    return r;
  }
};
template <> struct Fp8Pair<bf16> {
  static __device__ __forceinline__ unsigned of(unsigned x) {
    const unsigned bits = (x & 0x80008000u) | ((x >> 4) & 0x07f007f0u);
    unsigned r;  // x 2^120, + (-0): an fma, which sm_80 has for bf16 pairs
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(bits), "r"(0x7b807b80u), "r"(0x80008000u));
    return r;
  }
};

// The NaN bytes of ``w`` (every exponent and mantissa bit set): 0x80 in each one's place.
__device__ __forceinline__ unsigned e4m3_nan_bytes(unsigned w) {
  return ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
}

// Four e4m3 bytes of ``w`` as four T: bytes 0 and 1 in ``lo``, 2 and 3 in ``hi`` (the lower byte in the lower half).
// With Nan (a slower form, for words known to hold one), a NaN byte's lane is or-ed with 0x7fff (prmt's
// sign-replicating selectors spread the byte's flag); without, it comes out as 480.
template <typename T, bool Nan = false>
__device__ __forceinline__ void widen4(unsigned w, unsigned& lo, unsigned& hi) {
  lo = Fp8Pair<T>::of(byte_perm(w, 0u, 0x1404u));
  hi = Fp8Pair<T>::of(byte_perm(w, 0u, 0x3424u));
  if constexpr (Nan) {
    const unsigned nan_bytes = e4m3_nan_bytes(w);
    lo |= byte_perm(nan_bytes, 0u, 0x9988u) & 0x7fff7fffu;
    hi |= byte_perm(nan_bytes, 0u, 0xbbaau) & 0x7fff7fffu;
  }
}

// --- quantizing ----------------------------------------------------------------------------------------------------
// N floats (already divided by their scale) rounded to e4m3 with saturation, stored at ``p`` (N bytes, aligned to
// N). The conversion instruction is sm_89's; the planner writes FP8 caches from sm_89 on only.
template <int N>
__device__ __forceinline__ void store_e4m3(unsigned char* p, const float (&f)[N]) {
#if __CUDA_ARCH__ >= 890
  unsigned short pairs[(N + 1) / 2];
#pragma unroll
  for (int k = 0; k < N; k += 2) {
    // the second source goes to the low byte
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(pairs[k / 2]) : "f"(k + 1 < N ? f[k + 1] : 0.f), "f"(f[k]));
  }
  if constexpr (N == 1) {
    *p = static_cast<unsigned char>(pairs[0] & 0xffu);
  } else if constexpr (N == 2) {
    *reinterpret_cast<unsigned short*>(p) = pairs[0];
  } else if constexpr (N == 4) {
    *reinterpret_cast<unsigned*>(p) = pairs[0] | (static_cast<unsigned>(pairs[1]) << 16);
  } else {
    static_assert(N == 8, "1, 2, 4 or 8 bytes");
    *reinterpret_cast<uint2*>(p) = make_uint2(pairs[0] | (static_cast<unsigned>(pairs[1]) << 16),
                                              pairs[2] | (static_cast<unsigned>(pairs[3]) << 16));
  }
#else
  __trap();
#endif
}

// The cache append's writes of the key cache (rope.cuh's Tensors, its second tensor): as T, or, when ``fp8`` (an FP8
// cache: a launch-wide choice made at run time), each head's features divided by the head's key scale and stored as
// e4m3 at the same element offsets, now bytes. Only the key scale rides along (registers: the append's loop is
// tight); the values are stored by put too.
struct CacheStores {
  static constexpr bool kActive = true;
  bool fp8;
  const float* key_scales;  // null: key_value for every KV head
  long long key_stride;
  float key_value;
  __device__ __forceinline__ float key(int h) const { return key_scales != nullptr ? key_scales[h * key_stride] : key_value; }
  // Not inlined: the rotation's loop around it keeps its registers for the 16-bit path (inlined, the append's
  // 8-element variants spilled under their 128-register bound).
  template <int N>
  static __device__ __noinline__ void put(unsigned char* p, float scale, float (&f)[N]) {
    const float inverse = 1.f / scale;
#pragma unroll
    for (int k = 0; k < N; ++k) f[k] *= inverse;
    store_e4m3<N>(p, f);
  }
};

}  // namespace cukiln
