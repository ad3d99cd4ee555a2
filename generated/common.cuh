// cukiln shared device helpers: element types, conversions, vector loads and stores.
// Rendered from templates/common.cuh.j2 — edit the template, then run `cukiln build`.
#pragma once

namespace cukiln {

// Programmatic dependent launch (sm_90 on). cukiln launches its kernels with programmatic stream
// serialization there: a grid may be scheduled before the kernel ahead of it in the stream has
// finished (once every block of that kernel has allowed it with allow_dependent_launch, or exited),
// and it waits for that kernel to finish, memory included, before it reads or writes anything
// (wait_for_prerequisite_grid): the launch's start-up overlaps, not the work. Only the decode
// attention kernel allows early, for its combine kernel. Without the launch attribute (a kernel of
// another library before or after, or before sm_90) grids run one after the other as usual and the
// wait returns at once.
__device__ __forceinline__ void allow_dependent_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}
__device__ __forceinline__ void wait_for_prerequisite_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// 16-bit storage types. Arithmetic happens in fp32; these only carry bits, so no CUDA header is needed
// and the same source compiles for every architecture from sm_80 on.
// A TMA tensor map as a kernel parameter (codegen/abi.py TMAP): bytes the host encodes (runtime/driver.py); a
// kernel takes its address only in a __grid_constant__ parameter.
struct alignas(64) TensorMap { unsigned long long opaque[16]; };

struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
__device__ __forceinline__ float to_float(bf16 v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }

template <typename T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ f16 from_float<f16>(float f) {
  f16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
}
template <> __device__ __forceinline__ bf16 from_float<bf16>(float f) {
  bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
}

// N elements moved as one access of N * sizeof(T) bytes (at most 16). The alignment attribute is what
// lets the compiler emit a single 16-byte load or store; the runtime only picks N when the pointer,
// the strides and the sizes keep every access aligned.
template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };

// Every vector starts at an address aligned to its size; with a strided last dimension N is 1.
// Streaming: the access carries the evict-first hint (`.cs`) of data touched once, for widths of 4, 8 and
// 16 bytes (narrower ones go plain).
template <typename T, int N, bool Streaming = false>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  constexpr int kBytes = sizeof(T) * N;
  if constexpr (Streaming && kBytes == 16) {
    Vec<T, N> r;
    unsigned* u = reinterpret_cast<unsigned*>(&r);
    asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p));
    return r;
  } else if constexpr (Streaming && kBytes == 8) {
    Vec<T, N> r;
    unsigned* u = reinterpret_cast<unsigned*>(&r);
    asm volatile("ld.global.cs.v2.u32 {%0, %1}, [%2];" : "=r"(u[0]), "=r"(u[1]) : "l"(p));
    return r;
  } else if constexpr (Streaming && kBytes == 4) {
    Vec<T, N> r;
    asm volatile("ld.global.cs.u32 %0, [%1];" : "=r"(*reinterpret_cast<unsigned*>(&r)) : "l"(p));
    return r;
  } else {
    return *reinterpret_cast<const Vec<T, N>*>(p);
  }
}

template <typename T, int N, bool Streaming = false>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& vec) {
  constexpr int kBytes = sizeof(T) * N;
  const unsigned* u = reinterpret_cast<const unsigned*>(&vec);
  if constexpr (Streaming && kBytes == 16) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3])
                 : "memory");
  } else if constexpr (Streaming && kBytes == 8) {
    asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(u[0]), "r"(u[1]) : "memory");
  } else if constexpr (Streaming && kBytes == 4) {
    asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(p), "r"(u[0]) : "memory");
  } else {
    *reinterpret_cast<Vec<T, N>*>(p) = vec;
  }
}

template <typename T, int N>
__device__ __forceinline__ void to_floats(const Vec<T, N>& vec, float (&out)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = to_float(vec.v[k]);
}

template <typename T, int N, bool Streaming = false>
__device__ __forceinline__ void store_floats(T* p, const float (&in)[N]) {
  Vec<T, N> vec;
#pragma unroll
  for (int k = 0; k < N; ++k) vec.v[k] = from_float<T>(in[k]);
  store_vec<T, N, Streaming>(p, vec);
}

// Moves N elements without converting them (the untouched tail of a partial rotary).
template <typename T, int N, bool Streaming = false>
__device__ __forceinline__ void copy_vec(T* dst, const T* src) {
  store_vec<T, N, Streaming>(dst, load_vec<T, N, Streaming>(src));
}

// An angle in radians, reduced to [-pi, pi] in double precision and returned as float, so that
// __sincosf (accurate to about 2^-21.4 on that range) can be used for any position.
__device__ __forceinline__ float reduce_angle(double a) {
  const double kTwoPi = 6.283185307179586476925286766559;
  const double turns = rint(a * (1.0 / kTwoPi));
  return static_cast<float>(fma(-turns, kTwoPi, a));
}

__device__ __forceinline__ void cos_sin_of(double angle, float& c, float& s) {
  __sincosf(reduce_angle(angle), &s, &c);
}

}  // namespace cukiln
