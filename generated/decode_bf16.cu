// cukiln decode-attention kernels, element type bf16: 30 variants.
// Rendered from templates/decode.cu.j2 — edit the template, then run `cukiln build`.
// The kernel bodies are in decode.cuh; each entry point below picks its head dim, K/V addressing (strided caches
// or paged pools), and vector width; whether a launch writes the output (one pass) or split-KV partial results is a kernel
// argument (partial_out null or not), as is the batch-invariant split and merge (batch_invariant).
#include "decode.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_attention_s3 {
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
  const void* q_lens;
  long long queries;
};

struct params_attention_s3_maps {
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
  const void* q_lens;
  long long queries;
};

struct params_attention_s4 {
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
  long long k_sd;
  long long v_sb;
  long long v_sh;
  long long v_st;
  long long v_sd;
  const void* q_lens;
  long long queries;
};

struct params_combine {
  const void* partial_out;
  const void* partial_lse;
  void* out;
  void* lse;
  long long batch;
  long long heads_q;
  long long num_splits;
  long long out_sb;
  long long out_sh;
  long long out_sd;
  long long batch_invariant;
};


// decode_bf16_d64_s3_v8: head dim 64, 3 K/V strides, 8 per copy, narrow pipeline (64-key tiles, 5 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d64_s3_v8(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 64, 8, 64, 5>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 64>(p));
}

// decode_bf16_d64_s3_v8_deep: head dim 64, 3 K/V strides, 8 per copy, deep pipeline (64-key tiles, 6 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d64_s3_v8_deep(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 64, 8, 64, 6>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 64>(p));
}

// decode_bf16_d64_s3_v8_wide: head dim 64, 3 K/V strides, 8 per copy, wide pipeline (128-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 3) decode_bf16_d64_s3_v8_wide(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 64, 8, 128, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 64>(p));
}

// decode_bf16_d64_s3_v8_ws: head dim 64, warp-specialized (64-key tiles by the TMA engine, 6 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(160, 2) decode_bf16_d64_s3_v8_ws(const __grid_constant__ params_attention_s3_maps p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 64, 64, 6, 1>(p);
}

// decode_bf16_d64_s3_v8_ws_deep: head dim 64, warp-specialized (64-key tiles by the TMA engine, 8 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(160, 1) decode_bf16_d64_s3_v8_ws_deep(const __grid_constant__ params_attention_s3_maps p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 64, 64, 8, 1>(p);
}

// decode_bf16_d64_s4_v1: head dim 64, 4 K/V strides, 1 per copy, narrow pipeline (64-key tiles, 5 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d64_s4_v1(const params_attention_s4 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 64, 1, 64, 5>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows4{p.k_sb, p.k_sh, p.k_st, p.k_sd}, KvRows4{p.v_sb, p.v_sh, p.v_st, p.v_sd},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 64>(p));
}

// decode_combine_bf16_d64: merges split-KV partial results, head dim 64
extern "C" __global__ void __launch_bounds__(128) decode_combine_bf16_d64(const params_combine p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  const auto partial_out = static_cast<const float*>(p.partial_out);
  const auto partial_lse = static_cast<const float*>(p.partial_lse);
  const auto out = static_cast<bf16*>(p.out);
  const auto lse = static_cast<float*>(p.lse);
  if (p.batch_invariant) {
    combine_ordered<bf16, 64, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  } else {
    combine<bf16, 64, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  }
}

// decode_bf16_d80_s3_v8: head dim 80, 3 K/V strides, 8 per copy, narrow pipeline (64-key tiles, 4 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d80_s3_v8(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 80, 8, 64, 4>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 80>(p));
}

// decode_bf16_d80_s3_v8_deep: head dim 80, 3 K/V strides, 8 per copy, deep pipeline (64-key tiles, 5 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d80_s3_v8_deep(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 80, 8, 64, 5>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 80>(p));
}

// decode_bf16_d80_s3_v8_wide: head dim 80, 3 K/V strides, 8 per copy, wide pipeline (128-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d80_s3_v8_wide(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 80, 8, 128, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 80>(p));
}

// decode_bf16_d80_s4_v1: head dim 80, 4 K/V strides, 1 per copy, narrow pipeline (64-key tiles, 4 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d80_s4_v1(const params_attention_s4 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 80, 1, 64, 4>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows4{p.k_sb, p.k_sh, p.k_st, p.k_sd}, KvRows4{p.v_sb, p.v_sh, p.v_st, p.v_sd},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 80>(p));
}

// decode_combine_bf16_d80: merges split-KV partial results, head dim 80
extern "C" __global__ void __launch_bounds__(128) decode_combine_bf16_d80(const params_combine p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  const auto partial_out = static_cast<const float*>(p.partial_out);
  const auto partial_lse = static_cast<const float*>(p.partial_lse);
  const auto out = static_cast<bf16*>(p.out);
  const auto lse = static_cast<float*>(p.lse);
  if (p.batch_invariant) {
    combine_ordered<bf16, 80, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  } else {
    combine<bf16, 80, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  }
}

// decode_bf16_d96_s3_v8: head dim 96, 3 K/V strides, 8 per copy, narrow pipeline (64-key tiles, 3 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d96_s3_v8(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 96, 8, 64, 3>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 96>(p));
}

// decode_bf16_d96_s3_v8_deep: head dim 96, 3 K/V strides, 8 per copy, deep pipeline (64-key tiles, 4 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d96_s3_v8_deep(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 96, 8, 64, 4>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 96>(p));
}

// decode_bf16_d96_s3_v8_wide: head dim 96, 3 K/V strides, 8 per copy, wide pipeline (128-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d96_s3_v8_wide(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 96, 8, 128, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 96>(p));
}

// decode_bf16_d96_s4_v1: head dim 96, 4 K/V strides, 1 per copy, narrow pipeline (64-key tiles, 3 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d96_s4_v1(const params_attention_s4 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 96, 1, 64, 3>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows4{p.k_sb, p.k_sh, p.k_st, p.k_sd}, KvRows4{p.v_sb, p.v_sh, p.v_st, p.v_sd},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 96>(p));
}

// decode_combine_bf16_d96: merges split-KV partial results, head dim 96
extern "C" __global__ void __launch_bounds__(128) decode_combine_bf16_d96(const params_combine p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  const auto partial_out = static_cast<const float*>(p.partial_out);
  const auto partial_lse = static_cast<const float*>(p.partial_lse);
  const auto out = static_cast<bf16*>(p.out);
  const auto lse = static_cast<float*>(p.lse);
  if (p.batch_invariant) {
    combine_ordered<bf16, 96, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  } else {
    combine<bf16, 96, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  }
}

// decode_bf16_d128_s3_v8: head dim 128, 3 K/V strides, 8 per copy, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 3) decode_bf16_d128_s3_v8(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 128, 8, 64, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 128>(p));
}

// decode_bf16_d128_s3_v8_deep: head dim 128, 3 K/V strides, 8 per copy, deep pipeline (64-key tiles, 3 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d128_s3_v8_deep(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 128, 8, 64, 3>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 128>(p));
}

// decode_bf16_d128_s3_v8_wide: head dim 128, 3 K/V strides, 8 per copy, wide pipeline (128-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 1) decode_bf16_d128_s3_v8_wide(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 128, 8, 128, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 128>(p));
}

// decode_bf16_d128_s3_v8_ws: head dim 128, warp-specialized (64-key tiles by the TMA engine, 3 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(160, 2) decode_bf16_d128_s3_v8_ws(const __grid_constant__ params_attention_s3_maps p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 128, 64, 3, 1>(p);
}

// decode_bf16_d128_s3_v8_ws_deep: head dim 128, warp-specialized (64-key tiles by the TMA engine, 4 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(160, 1) decode_bf16_d128_s3_v8_ws_deep(const __grid_constant__ params_attention_s3_maps p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 128, 64, 4, 1>(p);
}

// decode_bf16_d128_s4_v1: head dim 128, 4 K/V strides, 1 per copy, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 3) decode_bf16_d128_s4_v1(const params_attention_s4 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 128, 1, 64, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows4{p.k_sb, p.k_sh, p.k_st, p.k_sd}, KvRows4{p.v_sb, p.v_sh, p.v_st, p.v_sd},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 128>(p));
}

// decode_combine_bf16_d128: merges split-KV partial results, head dim 128
extern "C" __global__ void __launch_bounds__(128) decode_combine_bf16_d128(const params_combine p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  const auto partial_out = static_cast<const float*>(p.partial_out);
  const auto partial_lse = static_cast<const float*>(p.partial_lse);
  const auto out = static_cast<bf16*>(p.out);
  const auto lse = static_cast<float*>(p.lse);
  if (p.batch_invariant) {
    combine_ordered<bf16, 128, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  } else {
    combine<bf16, 128, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  }
}

// decode_bf16_d192_s3_v8: head dim 192, 3 K/V strides, 8 per copy, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d192_s3_v8(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 192, 8, 64, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 192>(p));
}

// decode_bf16_d192_s4_v1: head dim 192, 4 K/V strides, 1 per copy, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d192_s4_v1(const params_attention_s4 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 192, 1, 64, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows4{p.k_sb, p.k_sh, p.k_st, p.k_sd}, KvRows4{p.v_sb, p.v_sh, p.v_st, p.v_sd},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 192>(p));
}

// decode_combine_bf16_d192: merges split-KV partial results, head dim 192
extern "C" __global__ void __launch_bounds__(128) decode_combine_bf16_d192(const params_combine p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  const auto partial_out = static_cast<const float*>(p.partial_out);
  const auto partial_lse = static_cast<const float*>(p.partial_lse);
  const auto out = static_cast<bf16*>(p.out);
  const auto lse = static_cast<float*>(p.lse);
  if (p.batch_invariant) {
    combine_ordered<bf16, 192, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  } else {
    combine<bf16, 192, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  }
}

// decode_bf16_d256_s3_v8: head dim 256, 3 K/V strides, 8 per copy, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 1) decode_bf16_d256_s3_v8(const params_attention_s3 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 256, 8, 64, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows3{p.k_sb, p.k_sh, p.k_st}, KvRows3{p.v_sb, p.v_sh, p.v_st},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 256>(p));
}

// decode_bf16_d256_s4_v1: head dim 256, 4 K/V strides, 1 per copy, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 1) decode_bf16_d256_s4_v1(const params_attention_s4 p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  attend<T, 256, 1, 64, 2>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const T*>(p.k), static_cast<const T*>(p.v),
      KvRows4{p.k_sb, p.k_sh, p.k_st, p.k_sd}, KvRows4{p.v_sb, p.v_sh, p.v_st, p.v_sd},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 256>(p));
}

// decode_combine_bf16_d256: merges split-KV partial results, head dim 256
extern "C" __global__ void __launch_bounds__(128) decode_combine_bf16_d256(const params_combine p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  const auto partial_out = static_cast<const float*>(p.partial_out);
  const auto partial_lse = static_cast<const float*>(p.partial_lse);
  const auto out = static_cast<bf16*>(p.out);
  const auto lse = static_cast<float*>(p.lse);
  if (p.batch_invariant) {
    combine_ordered<bf16, 256, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  } else {
    combine<bf16, 256, 128>(partial_out, partial_lse, out, out_rows_of(p), lse,
        static_cast<int>(p.heads_q), static_cast<int>(p.num_splits));
  }
}
