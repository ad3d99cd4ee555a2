// cukiln decode-attention kernels, element type bf16: 6 variants.
// Rendered from templates/decode.cu.j2 — edit the template, then run `cukiln build`.
// The kernel bodies are in decode.cuh; each entry point below picks its head dim, K/V addressing (strided caches
// or paged pools), and vector width; whether a launch writes the output (one pass) or split-KV partial results is a kernel
// argument (partial_out null or not), as is the batch-invariant split and merge (batch_invariant).
#include "decode.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_attention_s3_fp8 {
  const void* q;
  void* out;
  void* lse;
  const void* k;
  const void* v;
  const void* kv_lens;
  long long kv_len;
  const void* kv_start;
  long long kv_start_value;
  long long capacity;
  long long batch;
  long long heads_q;
  long long group;
  long long head_groups;
  long long q_sb;
  long long q_sh;
  long long q_sd;
  long long out_sb;
  long long out_sh;
  long long out_sd;
  double scale;
  double softcap;
  long long num_splits;
  void* partial_out;
  void* partial_lse;
  long long batch_invariant;
  long long k_sb;
  long long k_sh;
  long long k_st;
  long long v_sb;
  long long v_sh;
  long long v_st;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* q_lens;
  long long queries;
};

struct params_attention_s3_maps_fp8 {
  cukiln::TensorMap k_map;
  cukiln::TensorMap v_map;
  const void* q;
  void* out;
  void* lse;
  const void* k;
  const void* v;
  const void* kv_lens;
  long long kv_len;
  const void* kv_start;
  long long kv_start_value;
  long long capacity;
  long long batch;
  long long heads_q;
  long long group;
  long long head_groups;
  long long q_sb;
  long long q_sh;
  long long q_sd;
  long long out_sb;
  long long out_sh;
  long long out_sd;
  double scale;
  double softcap;
  long long num_splits;
  void* partial_out;
  void* partial_lse;
  long long batch_invariant;
  long long k_sb;
  long long k_sh;
  long long k_st;
  long long v_sb;
  long long v_sh;
  long long v_st;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* q_lens;
  long long queries;
};


// decode_bf16_d64_s3_v16_e4m3: head dim 64 over FP8 (e4m3) caches with scales, 16-byte copies, narrow pipeline (64-key tiles, 6 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 3) decode_bf16_d64_s3_v16_e4m3(const params_attention_s3_fp8 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = unsigned char;
  attend<T, 64, 16, 64, 6, KvRows3, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 64>(p), cache_scales_of(p));
}

// decode_bf16_d96_s3_v16_e4m3: head dim 96 over FP8 (e4m3) caches with scales, 16-byte copies, narrow pipeline (64-key tiles, 5 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d96_s3_v16_e4m3(const params_attention_s3_fp8 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = unsigned char;
  attend<T, 96, 16, 64, 5, KvRows3, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 96>(p), cache_scales_of(p));
}

// decode_bf16_d128_s3_v16_e4m3: head dim 128 over FP8 (e4m3) caches with scales, 16-byte copies, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 3) decode_bf16_d128_s3_v16_e4m3(const params_attention_s3_fp8 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = unsigned char;
  attend<T, 128, 16, 64, 2, KvRows3, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 128>(p), cache_scales_of(p));
}

// decode_bf16_d128_s3_v16_ws_e4m3: head dim 128, warp-specialized (64-key tiles by the TMA engine, 6 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(160, 2) decode_bf16_d128_s3_v16_ws_e4m3(const __grid_constant__ params_attention_s3_maps_fp8 p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 128, 64, 6, 1>(p);
}

// decode_bf16_d192_s3_v16_e4m3: head dim 192 over FP8 (e4m3) caches with scales, 16-byte copies, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d192_s3_v16_e4m3(const params_attention_s3_fp8 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = unsigned char;
  attend<T, 192, 16, 64, 2, KvRows3, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 192>(p), cache_scales_of(p));
}

// decode_bf16_d256_s3_v16_e4m3: head dim 256 over FP8 (e4m3) caches with scales, 16-byte copies, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 1) decode_bf16_d256_s3_v16_e4m3(const params_attention_s3_fp8 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = unsigned char;
  attend<T, 256, 16, 64, 2, KvRows3, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 256>(p), cache_scales_of(p));
}
