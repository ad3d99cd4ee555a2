// cukiln KV-cache append kernels, element type bf16 with QK-norm: 40 variants.
// Rendered from templates/kv_append.cu.j2 — edit the template, then run `cukiln build`.
// The kernel body is in kv_append.cuh (the rotation in rope.cuh); each entry point picks its element type, pairing,
// angle source, vector width and QK-norm.
#include "kv_append.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_freqs_qknorm {
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
  const void* q_norm_weight;
  const void* k_norm_weight;
  long long norm_weight_fp32;
  double norm_eps;
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

struct params_cossin_qknorm {
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
  const void* q_norm_weight;
  const void* k_norm_weight;
  long long norm_weight_fp32;
  double norm_eps;
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

struct params_cossinf32_qknorm {
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
  const void* q_norm_weight;
  const void* k_norm_weight;
  long long norm_weight_fp32;
  double norm_eps;
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

struct params_invfreq_qknorm {
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
  const void* q_norm_weight;
  const void* k_norm_weight;
  long long norm_weight_fp32;
  double norm_eps;
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

struct params_base_qknorm {
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
  const void* q_norm_weight;
  const void* k_norm_weight;
  long long norm_weight_fp32;
  double norm_eps;
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


// kv_append_bf16_half_freqs_v1_qknorm: half pairs, angles from freqs, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_freqs_v1_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, false,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_half_freqs_v2_qknorm: half pairs, angles from freqs, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_freqs_v2_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, false,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_half_freqs_v4_qknorm: half pairs, angles from freqs, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_freqs_v4_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, false,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_half_freqs_v8_qknorm: half pairs, angles from freqs, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_freqs_v8_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, false,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_half_cossin_v1_qknorm: half pairs, angles from cossin, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossin_v1_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, false,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossin_v2_qknorm: half pairs, angles from cossin, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossin_v2_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, false,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossin_v4_qknorm: half pairs, angles from cossin, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossin_v4_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, false,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossin_v8_qknorm: half pairs, angles from cossin, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossin_v8_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, false,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossinf32_v1_qknorm: half pairs, angles from cossinf32, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossinf32_v1_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, false,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossinf32_v2_qknorm: half pairs, angles from cossinf32, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossinf32_v2_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, false,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossinf32_v4_qknorm: half pairs, angles from cossinf32, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossinf32_v4_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, false,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_cossinf32_v8_qknorm: half pairs, angles from cossinf32, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_cossinf32_v8_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, false,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_half_invfreq_v1_qknorm: half pairs, angles from invfreq, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_invfreq_v1_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, false,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_half_invfreq_v2_qknorm: half pairs, angles from invfreq, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_invfreq_v2_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, false,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_half_invfreq_v4_qknorm: half pairs, angles from invfreq, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_invfreq_v4_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, false,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_half_invfreq_v8_qknorm: half pairs, angles from invfreq, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_invfreq_v8_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, false,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_half_base_v1_qknorm: half pairs, angles from base, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_base_v1_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, false,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_half_base_v2_qknorm: half pairs, angles from base, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_base_v2_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, false,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_half_base_v4_qknorm: half pairs, angles from base, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_base_v4_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, false,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_half_base_v8_qknorm: half pairs, angles from base, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_half_base_v8_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, false,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_interleaved_freqs_v1_qknorm: interleaved pairs, angles from freqs, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_freqs_v1_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, true,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_interleaved_freqs_v2_qknorm: interleaved pairs, angles from freqs, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_freqs_v2_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, true,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_interleaved_freqs_v4_qknorm: interleaved pairs, angles from freqs, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_freqs_v4_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, true,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_interleaved_freqs_v8_qknorm: interleaved pairs, angles from freqs, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_freqs_v8_qknorm(const params_freqs_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, true,
                            true>(
      p, FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// kv_append_bf16_interleaved_cossin_v1_qknorm: interleaved pairs, angles from cossin, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossin_v1_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, true,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossin_v2_qknorm: interleaved pairs, angles from cossin, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossin_v2_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, true,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossin_v4_qknorm: interleaved pairs, angles from cossin, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossin_v4_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, true,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossin_v8_qknorm: interleaved pairs, angles from cossin, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossin_v8_qknorm(const params_cossin_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, true,
                            true>(
      p, CosSinTable<bf16>{static_cast<const bf16*>(p.cos), static_cast<const bf16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossinf32_v1_qknorm: interleaved pairs, angles from cossinf32, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossinf32_v1_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, true,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossinf32_v2_qknorm: interleaved pairs, angles from cossinf32, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossinf32_v2_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, true,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossinf32_v4_qknorm: interleaved pairs, angles from cossinf32, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossinf32_v4_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, true,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_cossinf32_v8_qknorm: interleaved pairs, angles from cossinf32, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_cossinf32_v8_qknorm(const params_cossinf32_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, true,
                            true>(
      p, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// kv_append_bf16_interleaved_invfreq_v1_qknorm: interleaved pairs, angles from invfreq, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_invfreq_v1_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, true,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_interleaved_invfreq_v2_qknorm: interleaved pairs, angles from invfreq, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_invfreq_v2_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, true,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_interleaved_invfreq_v4_qknorm: interleaved pairs, angles from invfreq, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_invfreq_v4_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, true,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_interleaved_invfreq_v8_qknorm: interleaved pairs, angles from invfreq, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_invfreq_v8_qknorm(const params_invfreq_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, true,
                            true>(
      p, InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// kv_append_bf16_interleaved_base_v1_qknorm: interleaved pairs, angles from base, 1 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_base_v1_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 1, true,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_interleaved_base_v2_qknorm: interleaved pairs, angles from base, 2 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_base_v2_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 2, true,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_interleaved_base_v4_qknorm: interleaved pairs, angles from base, 4 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_base_v4_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 4, true,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// kv_append_bf16_interleaved_base_v8_qknorm: interleaved pairs, angles from base, 8 per access, q and k normalized per head
extern "C" __global__ void __launch_bounds__(256, 1) kv_append_bf16_interleaved_base_v8_qknorm(const params_base_qknorm p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<bf16, 8, true,
                            true>(
      p, BaseAngles{p.exponent_step, p.ratio, p.scale});
}
