// cukiln KV-cache append kernels, element type fp16: 8 variants.
// Rendered from templates/kv_append.cu.j2 — edit the template, then run `cukiln build`.
// The kernel body is in kv_append.cuh (the rotation in rope.cuh); each entry point picks its element type, pairing,
// angle source, vector width and QK-norm.
#include "kv_append.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_any {
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
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long per_pair;
  const void* inv_freq;
  double scale;
  double exponent_step;
  double ratio;
  long long angle_kind;
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


// kv_append_fp16_half_any_v1: half pairs, angles from any, 1 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_half_any_v1(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 1, false,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_half_any_v2: half pairs, angles from any, 2 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_half_any_v2(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 2, false,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_half_any_v4: half pairs, angles from any, 4 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_half_any_v4(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 4, false,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_half_any_v8: half pairs, angles from any, 8 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_half_any_v8(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 8, false,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_interleaved_any_v1: interleaved pairs, angles from any, 1 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_interleaved_any_v1(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 1, true,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_interleaved_any_v2: interleaved pairs, angles from any, 2 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_interleaved_any_v2(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 2, true,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_interleaved_any_v4: interleaved pairs, angles from any, 4 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_interleaved_any_v4(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 4, true,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// kv_append_fp16_interleaved_any_v8: interleaved pairs, angles from any, 8 per access
extern "C" __global__ void __launch_bounds__(192, 2) kv_append_fp16_interleaved_any_v8(const params_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // q, k and v may be the previous kernel's outputs
  // no early allow_dependent_launch: a decode step's attention scheduled while the append runs was spread unevenly
  // over the multiprocessors (step 19.9 us over the attention at b 8 x 8k instead of 3.8; docs/performance.md)
  kv_append::append_tokens<f16, 8, true,
                            false>(
      p, AnyAngles<f16>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<f16>{static_cast<const f16*>(p.cos), static_cast<const f16*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}
