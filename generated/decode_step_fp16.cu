// cukiln decode-step kernels, element type fp16: 20 variants.
// Rendered from templates/decode_step.cu.j2 — edit the template, then run `cukiln build`.
// The kernel body is decode.cuh's warp-specialized attention with decode_step.cuh's append around it; each entry
// point picks its head dim, pairing, angle source and QK-norm. Its parameter struct is the ws attention's, then
// kv_append's (the runtime packs the two plans' values one after the other).
#include "decode_step.cuh"


// decode_step_fp16_d64_half_freqs: head dim 64, half pairs, angles from freqs; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_half_freqs_attention {
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
};
struct decode_step_fp16_d64_half_freqs_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* table;
  long long table_row;
  long long table_rows;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_half_freqs_params {
  decode_step_fp16_d64_half_freqs_attention attention;
  decode_step_fp16_d64_half_freqs_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_half_freqs(const __grid_constant__ decode_step_fp16_d64_half_freqs_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_half_freqs_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}));
}

// decode_step_fp16_d64_half_cossin: head dim 64, half pairs, angles from cossin; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_half_cossin_attention {
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
};
struct decode_step_fp16_d64_half_cossin_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_half_cossin_params {
  decode_step_fp16_d64_half_cossin_attention attention;
  decode_step_fp16_d64_half_cossin_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_half_cossin(const __grid_constant__ decode_step_fp16_d64_half_cossin_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_half_cossin_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d64_half_cossinf32: head dim 64, half pairs, angles from cossinf32; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_half_cossinf32_attention {
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
};
struct decode_step_fp16_d64_half_cossinf32_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_half_cossinf32_params {
  decode_step_fp16_d64_half_cossinf32_attention attention;
  decode_step_fp16_d64_half_cossinf32_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_half_cossinf32(const __grid_constant__ decode_step_fp16_d64_half_cossinf32_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_half_cossinf32_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d64_half_invfreq: head dim 64, half pairs, angles from invfreq; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_half_invfreq_attention {
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
};
struct decode_step_fp16_d64_half_invfreq_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* inv_freq;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_half_invfreq_params {
  decode_step_fp16_d64_half_invfreq_attention attention;
  decode_step_fp16_d64_half_invfreq_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_half_invfreq(const __grid_constant__ decode_step_fp16_d64_half_invfreq_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_half_invfreq_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}));
}

// decode_step_fp16_d64_half_base: head dim 64, half pairs, angles from base; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_half_base_attention {
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
};
struct decode_step_fp16_d64_half_base_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  double exponent_step;
  double ratio;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_half_base_params {
  decode_step_fp16_d64_half_base_attention attention;
  decode_step_fp16_d64_half_base_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_half_base(const __grid_constant__ decode_step_fp16_d64_half_base_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_half_base_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 8, false, false>(
                            p, BaseAngles{p.exponent_step, p.ratio, p.scale}));
}

// decode_step_fp16_d64_interleaved_freqs: head dim 64, interleaved pairs, angles from freqs; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_interleaved_freqs_attention {
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
};
struct decode_step_fp16_d64_interleaved_freqs_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* table;
  long long table_row;
  long long table_rows;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_interleaved_freqs_params {
  decode_step_fp16_d64_interleaved_freqs_attention attention;
  decode_step_fp16_d64_interleaved_freqs_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_interleaved_freqs(const __grid_constant__ decode_step_fp16_d64_interleaved_freqs_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_interleaved_freqs_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}));
}

// decode_step_fp16_d64_interleaved_cossin: head dim 64, interleaved pairs, angles from cossin; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_interleaved_cossin_attention {
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
};
struct decode_step_fp16_d64_interleaved_cossin_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_interleaved_cossin_params {
  decode_step_fp16_d64_interleaved_cossin_attention attention;
  decode_step_fp16_d64_interleaved_cossin_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_interleaved_cossin(const __grid_constant__ decode_step_fp16_d64_interleaved_cossin_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_interleaved_cossin_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d64_interleaved_cossinf32: head dim 64, interleaved pairs, angles from cossinf32; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_interleaved_cossinf32_attention {
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
};
struct decode_step_fp16_d64_interleaved_cossinf32_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_interleaved_cossinf32_params {
  decode_step_fp16_d64_interleaved_cossinf32_attention attention;
  decode_step_fp16_d64_interleaved_cossinf32_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_interleaved_cossinf32(const __grid_constant__ decode_step_fp16_d64_interleaved_cossinf32_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_interleaved_cossinf32_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d64_interleaved_invfreq: head dim 64, interleaved pairs, angles from invfreq; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_interleaved_invfreq_attention {
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
};
struct decode_step_fp16_d64_interleaved_invfreq_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* inv_freq;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_interleaved_invfreq_params {
  decode_step_fp16_d64_interleaved_invfreq_attention attention;
  decode_step_fp16_d64_interleaved_invfreq_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_interleaved_invfreq(const __grid_constant__ decode_step_fp16_d64_interleaved_invfreq_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_interleaved_invfreq_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}));
}

// decode_step_fp16_d64_interleaved_base: head dim 64, interleaved pairs, angles from base; 64-key tiles by the TMA engine, 6 stages (sm_90 on)
struct decode_step_fp16_d64_interleaved_base_attention {
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
};
struct decode_step_fp16_d64_interleaved_base_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  double exponent_step;
  double ratio;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d64_interleaved_base_params {
  decode_step_fp16_d64_interleaved_base_attention attention;
  decode_step_fp16_d64_interleaved_base_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d64_interleaved_base(const __grid_constant__ decode_step_fp16_d64_interleaved_base_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d64_interleaved_base_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 64, 64, 6>(
      params.attention, decode_step::step_append<f16, 8, true, false>(
                            p, BaseAngles{p.exponent_step, p.ratio, p.scale}));
}

// decode_step_fp16_d128_half_freqs: head dim 128, half pairs, angles from freqs; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_half_freqs_attention {
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
};
struct decode_step_fp16_d128_half_freqs_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* table;
  long long table_row;
  long long table_rows;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_half_freqs_params {
  decode_step_fp16_d128_half_freqs_attention attention;
  decode_step_fp16_d128_half_freqs_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_half_freqs(const __grid_constant__ decode_step_fp16_d128_half_freqs_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_half_freqs_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}));
}

// decode_step_fp16_d128_half_cossin: head dim 128, half pairs, angles from cossin; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_half_cossin_attention {
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
};
struct decode_step_fp16_d128_half_cossin_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_half_cossin_params {
  decode_step_fp16_d128_half_cossin_attention attention;
  decode_step_fp16_d128_half_cossin_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_half_cossin(const __grid_constant__ decode_step_fp16_d128_half_cossin_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_half_cossin_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d128_half_cossinf32: head dim 128, half pairs, angles from cossinf32; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_half_cossinf32_attention {
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
};
struct decode_step_fp16_d128_half_cossinf32_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_half_cossinf32_params {
  decode_step_fp16_d128_half_cossinf32_attention attention;
  decode_step_fp16_d128_half_cossinf32_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_half_cossinf32(const __grid_constant__ decode_step_fp16_d128_half_cossinf32_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_half_cossinf32_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d128_half_invfreq: head dim 128, half pairs, angles from invfreq; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_half_invfreq_attention {
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
};
struct decode_step_fp16_d128_half_invfreq_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* inv_freq;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_half_invfreq_params {
  decode_step_fp16_d128_half_invfreq_attention attention;
  decode_step_fp16_d128_half_invfreq_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_half_invfreq(const __grid_constant__ decode_step_fp16_d128_half_invfreq_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_half_invfreq_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, false, false>(
                            p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}));
}

// decode_step_fp16_d128_half_base: head dim 128, half pairs, angles from base; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_half_base_attention {
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
};
struct decode_step_fp16_d128_half_base_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  double exponent_step;
  double ratio;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_half_base_params {
  decode_step_fp16_d128_half_base_attention attention;
  decode_step_fp16_d128_half_base_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_half_base(const __grid_constant__ decode_step_fp16_d128_half_base_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_half_base_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 8, false, false>(
                            p, BaseAngles{p.exponent_step, p.ratio, p.scale}));
}

// decode_step_fp16_d128_interleaved_freqs: head dim 128, interleaved pairs, angles from freqs; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_interleaved_freqs_attention {
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
};
struct decode_step_fp16_d128_interleaved_freqs_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* table;
  long long table_row;
  long long table_rows;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_interleaved_freqs_params {
  decode_step_fp16_d128_interleaved_freqs_attention attention;
  decode_step_fp16_d128_interleaved_freqs_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_interleaved_freqs(const __grid_constant__ decode_step_fp16_d128_interleaved_freqs_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_interleaved_freqs_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}));
}

// decode_step_fp16_d128_interleaved_cossin: head dim 128, interleaved pairs, angles from cossin; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_interleaved_cossin_attention {
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
};
struct decode_step_fp16_d128_interleaved_cossin_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_interleaved_cossin_params {
  decode_step_fp16_d128_interleaved_cossin_attention attention;
  decode_step_fp16_d128_interleaved_cossin_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_interleaved_cossin(const __grid_constant__ decode_step_fp16_d128_interleaved_cossin_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_interleaved_cossin_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d128_interleaved_cossinf32: head dim 128, interleaved pairs, angles from cossinf32; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_interleaved_cossinf32_attention {
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
};
struct decode_step_fp16_d128_interleaved_cossinf32_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_interleaved_cossinf32_params {
  decode_step_fp16_d128_interleaved_cossinf32_attention attention;
  decode_step_fp16_d128_interleaved_cossinf32_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_interleaved_cossinf32(const __grid_constant__ decode_step_fp16_d128_interleaved_cossinf32_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_interleaved_cossinf32_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}));
}

// decode_step_fp16_d128_interleaved_invfreq: head dim 128, interleaved pairs, angles from invfreq; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_interleaved_invfreq_attention {
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
};
struct decode_step_fp16_d128_interleaved_invfreq_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  const void* inv_freq;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_interleaved_invfreq_params {
  decode_step_fp16_d128_interleaved_invfreq_attention attention;
  decode_step_fp16_d128_interleaved_invfreq_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_interleaved_invfreq(const __grid_constant__ decode_step_fp16_d128_interleaved_invfreq_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_interleaved_invfreq_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 4, true, false>(
                            p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}));
}

// decode_step_fp16_d128_interleaved_base: head dim 128, interleaved pairs, angles from base; 64-key tiles by the TMA engine, 3 stages (sm_90 on)
struct decode_step_fp16_d128_interleaved_base_attention {
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
};
struct decode_step_fp16_d128_interleaved_base_append {
  const void* q;
  void* q_out;
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  long long batch;
  long long new_tokens;
  long long heads_q;
  long long heads_kv;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long capacity;
  long long copy_tail;
  double mscale;
  const void* kv_lens;
  long long kv_len_value;
  void* kv_lens_out;
  const void* kv_start;
  long long kv_start_value;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  long long q_sb;
  long long q_ss;
  long long q_sh;
  long long q_out_sb;
  long long q_out_ss;
  long long q_out_sh;
  long long k_sb;
  long long k_ss;
  long long k_sh;
  long long v_sb;
  long long v_ss;
  long long v_sh;
  long long k_cache_sb;
  long long k_cache_ss;
  long long k_cache_sh;
  long long v_cache_sb;
  long long v_cache_ss;
  long long v_cache_sh;
  double exponent_step;
  double ratio;
  double scale;
  long long cache_fp8;
  const void* k_scale;
  long long k_scale_stride;
  double k_scale_value;
  const void* v_scale;
  long long v_scale_stride;
  double v_scale_value;
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* slot_mapping;
};
struct decode_step_fp16_d128_interleaved_base_params {
  decode_step_fp16_d128_interleaved_base_attention attention;
  decode_step_fp16_d128_interleaved_base_append append;
};

extern "C" __global__ void __launch_bounds__(160, 2) decode_step_fp16_d128_interleaved_base(const __grid_constant__ decode_step_fp16_d128_interleaved_base_params params) {
  using namespace cukiln;
  using namespace cukiln::rope;
  const decode_step_fp16_d128_interleaved_base_append& p = params.append;  // the angle source's fields
  decode::attend_ws<f16, 128, 64, 3>(
      params.attention, decode_step::step_append<f16, 8, true, false>(
                            p, BaseAngles{p.exponent_step, p.ratio, p.scale}));
}
