// cukiln RoPE kernels, element type fp32: 50 variants.
// Rendered from templates/rope.cu.j2 — edit the template, then run `cukiln build`.
// The kernel body is in rope.cuh; each entry point below picks its element type, vector width,
// pairing, addressing and angle source; the direction (forward or backward), a second tensor of the same
// tokens (rope_qk's k) and the rotated span's offset are kernel arguments.
#include "rope.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_dense_s0_freqs {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* table;
  long long table_row;
  long long table_rows;
};

struct params_dense_s0_freqs_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  const void* table;
  long long table_row;
  long long table_rows;
};

struct params_dense_s3_freqs {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  const void* table;
  long long table_row;
  long long table_rows;
};

struct params_dense_s3_freqs_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  long long k_ss;
  long long k_sb;
  long long k_sh;
  long long k_out_ss;
  long long k_out_sb;
  long long k_out_sh;
  const void* table;
  long long table_row;
  long long table_rows;
};

struct params_dense_s0_cossin {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
};

struct params_dense_s0_cossin_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
};

struct params_dense_s3_cossin {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
};

struct params_dense_s3_cossin_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  long long k_ss;
  long long k_sb;
  long long k_sh;
  long long k_out_ss;
  long long k_out_sb;
  long long k_out_sh;
  const void* cos;
  const void* sin;
  long long cos_row;
  long long sin_row;
  long long table_rows;
  long long per_pair;
};

struct params_dense_s0_invfreq {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* inv_freq;
  double scale;
};

struct params_dense_s0_invfreq_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  const void* inv_freq;
  double scale;
};

struct params_dense_s3_invfreq {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  const void* inv_freq;
  double scale;
};

struct params_dense_s3_invfreq_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  long long k_ss;
  long long k_sb;
  long long k_sh;
  long long k_out_ss;
  long long k_out_sb;
  long long k_out_sh;
  const void* inv_freq;
  double scale;
};

struct params_dense_s0_base {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  double exponent_step;
  double ratio;
  double scale;
};

struct params_dense_s0_base_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  double exponent_step;
  double ratio;
  double scale;
};

struct params_dense_s3_base {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  double exponent_step;
  double ratio;
  double scale;
};

struct params_dense_s3_base_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  long long k_ss;
  long long k_sb;
  long long k_sh;
  long long k_out_ss;
  long long k_out_sb;
  long long k_out_sh;
  double exponent_step;
  double ratio;
  double scale;
};

struct params_dense_s0_any {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
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
};

struct params_dense_s0_any_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
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
};

struct params_dense_s3_any {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
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
};

struct params_dense_s3_any_qk {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  const void* k;
  void* k_out;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  long long k_ss;
  long long k_sb;
  long long k_sh;
  long long k_out_ss;
  long long k_out_sb;
  long long k_out_sh;
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
};

struct params_dense_s4_any {
  const void* x;
  void* out;
  long long tokens;
  long long seq_len;
  long long batch;
  long long heads;
  long long heads_k;
  long long head_dim;
  long long rotary_dim;
  long long rotary_offset;
  long long seq_major;
  long long copy_tail;
  long long backward;
  double mscale;
  const void* positions;
  long long pos_stride_b;
  long long pos_stride_s;
  long long positions_int64;
  const void* offsets;
  long long offsets_int64;
  long long offset;
  long long cp_size;
  long long cp_rank;
  long long x_ss;
  long long x_sb;
  long long x_sh;
  long long x_sd;
  long long out_ss;
  long long out_sb;
  long long out_sh;
  long long out_sd;
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
};


// rope_fp32_dense_half_freqs_s0_v4: dense, half pairs, angles from freqs, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_freqs_s0_v4(const params_dense_s0_freqs p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_half_freqs_s0_v4_qk: dense, half pairs, angles from freqs, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_half_freqs_s0_v4_qk(const params_dense_s0_freqs_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_half_freqs_s3_v4: dense, half pairs, angles from freqs, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_freqs_s3_v4(const params_dense_s3_freqs p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_half_freqs_s3_v4_qk: dense, half pairs, angles from freqs, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_half_freqs_s3_v4_qk(const params_dense_s3_freqs_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_half_cossin_s0_v4: dense, half pairs, angles from cossin, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_cossin_s0_v4(const params_dense_s0_cossin p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_half_cossin_s0_v4_qk: dense, half pairs, angles from cossin, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_half_cossin_s0_v4_qk(const params_dense_s0_cossin_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_half_cossin_s3_v4: dense, half pairs, angles from cossin, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_cossin_s3_v4(const params_dense_s3_cossin p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_half_cossin_s3_v4_qk: dense, half pairs, angles from cossin, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_half_cossin_s3_v4_qk(const params_dense_s3_cossin_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_half_invfreq_s0_v4: dense, half pairs, angles from invfreq, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_invfreq_s0_v4(const params_dense_s0_invfreq p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_half_invfreq_s0_v4_qk: dense, half pairs, angles from invfreq, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_invfreq_s0_v4_qk(const params_dense_s0_invfreq_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_half_invfreq_s3_v4: dense, half pairs, angles from invfreq, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_invfreq_s3_v4(const params_dense_s3_invfreq p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_half_invfreq_s3_v4_qk: dense, half pairs, angles from invfreq, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_invfreq_s3_v4_qk(const params_dense_s3_invfreq_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_half_base_s0_v4: dense, half pairs, angles from base, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_base_s0_v4(const params_dense_s0_base p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_half_base_s0_v4_qk: dense, half pairs, angles from base, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_base_s0_v4_qk(const params_dense_s0_base_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_half_base_s3_v4: dense, half pairs, angles from base, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_base_s3_v4(const params_dense_s3_base p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, false>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_half_base_s3_v4_qk: dense, half pairs, angles from base, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_base_s3_v4_qk(const params_dense_s3_base_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, false, true>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_half_any_s0_v1: dense, half pairs, angles from any, 0 strides, 1 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s0_v1(const params_dense_s0_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 1, false, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s0_v1_qk: dense, half pairs, angles from any, 0 strides, 1 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s0_v1_qk(const params_dense_s0_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 1, false, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s0_v2: dense, half pairs, angles from any, 0 strides, 2 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s0_v2(const params_dense_s0_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 2, false, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s0_v2_qk: dense, half pairs, angles from any, 0 strides, 2 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s0_v2_qk(const params_dense_s0_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 2, false, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s3_v1: dense, half pairs, angles from any, 3 strides, 1 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s3_v1(const params_dense_s3_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 1, false, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s3_v1_qk: dense, half pairs, angles from any, 3 strides, 1 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s3_v1_qk(const params_dense_s3_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 1, false, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s3_v2: dense, half pairs, angles from any, 3 strides, 2 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s3_v2(const params_dense_s3_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 2, false, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s3_v2_qk: dense, half pairs, angles from any, 3 strides, 2 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s3_v2_qk(const params_dense_s3_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 2, false, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_half_any_s4_v1: dense, half pairs, angles from any, 4 strides, 1 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_half_any_s4_v1(const params_dense_s4_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided4Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided4Rows{p.x_ss, p.x_sb, p.x_sh, p.x_sd}, Strided4Rows{p.out_ss, p.out_sb, p.out_sh, p.out_sd}, Strided4Rows{p.x_ss, p.x_sb, p.x_sh, p.x_sd}, Strided4Rows{p.out_ss, p.out_sb, p.out_sh, p.out_sd}, static_cast<int>(p.heads)};
  rope_dense<float, 1, false, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_freqs_s0_v4: dense, interleaved pairs, angles from freqs, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_freqs_s0_v4(const params_dense_s0_freqs p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_interleaved_freqs_s0_v4_qk: dense, interleaved pairs, angles from freqs, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_interleaved_freqs_s0_v4_qk(const params_dense_s0_freqs_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_interleaved_freqs_s3_v4: dense, interleaved pairs, angles from freqs, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_freqs_s3_v4(const params_dense_s3_freqs p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_interleaved_freqs_s3_v4_qk: dense, interleaved pairs, angles from freqs, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_interleaved_freqs_s3_v4_qk(const params_dense_s3_freqs_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows});
}

// rope_fp32_dense_interleaved_cossin_s0_v4: dense, interleaved pairs, angles from cossin, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_cossin_s0_v4(const params_dense_s0_cossin p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_interleaved_cossin_s0_v4_qk: dense, interleaved pairs, angles from cossin, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_interleaved_cossin_s0_v4_qk(const params_dense_s0_cossin_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_interleaved_cossin_s3_v4: dense, interleaved pairs, angles from cossin, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_cossin_s3_v4(const params_dense_s3_cossin p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_interleaved_cossin_s3_v4_qk: dense, interleaved pairs, angles from cossin, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 2) rope_fp32_dense_interleaved_cossin_s3_v4_qk(const params_dense_s3_cossin_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0});
}

// rope_fp32_dense_interleaved_invfreq_s0_v4: dense, interleaved pairs, angles from invfreq, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_invfreq_s0_v4(const params_dense_s0_invfreq p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_interleaved_invfreq_s0_v4_qk: dense, interleaved pairs, angles from invfreq, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_invfreq_s0_v4_qk(const params_dense_s0_invfreq_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_interleaved_invfreq_s3_v4: dense, interleaved pairs, angles from invfreq, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_invfreq_s3_v4(const params_dense_s3_invfreq p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_interleaved_invfreq_s3_v4_qk: dense, interleaved pairs, angles from invfreq, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_invfreq_s3_v4_qk(const params_dense_s3_invfreq_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      InvFreq{static_cast<const float*>(p.inv_freq), p.scale});
}

// rope_fp32_dense_interleaved_base_s0_v4: dense, interleaved pairs, angles from base, 0 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_base_s0_v4(const params_dense_s0_base p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_interleaved_base_s0_v4_qk: dense, interleaved pairs, angles from base, 0 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_base_s0_v4_qk(const params_dense_s0_base_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_interleaved_base_s3_v4: dense, interleaved pairs, angles from base, 3 strides, 4 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_base_s3_v4(const params_dense_s3_base p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, false>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_interleaved_base_s3_v4_qk: dense, interleaved pairs, angles from base, 3 strides, 4 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_base_s3_v4_qk(const params_dense_s3_base_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 4, true, true>(
      io, geometry_of(p), positions_of(p),
      BaseAngles{p.exponent_step, p.ratio, p.scale});
}

// rope_fp32_dense_interleaved_any_s0_v1: dense, interleaved pairs, angles from any, 0 strides, 1 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s0_v1(const params_dense_s0_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 1, true, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s0_v1_qk: dense, interleaved pairs, angles from any, 0 strides, 1 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s0_v1_qk(const params_dense_s0_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 1, true, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s0_v2: dense, interleaved pairs, angles from any, 0 strides, 2 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s0_v2(const params_dense_s0_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 2, true, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s0_v2_qk: dense, interleaved pairs, angles from any, 0 strides, 2 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s0_v2_qk(const params_dense_s0_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, PackedRows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, PackedRows{p.heads_k * p.head_dim, p.head_dim}, static_cast<int>(p.heads)};
  rope_dense<float, 2, true, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s3_v1: dense, interleaved pairs, angles from any, 3 strides, 1 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s3_v1(const params_dense_s3_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 1, true, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s3_v1_qk: dense, interleaved pairs, angles from any, 3 strides, 1 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s3_v1_qk(const params_dense_s3_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 1, true, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s3_v2: dense, interleaved pairs, angles from any, 3 strides, 2 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s3_v2(const params_dense_s3_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 2, true, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s3_v2_qk: dense, interleaved pairs, angles from any, 3 strides, 2 per access, q and k together
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s3_v2_qk(const params_dense_s3_any_qk p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided3Rows, true> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), static_cast<const float*>(p.k), static_cast<float*>(p.k_out),
      Strided3Rows{p.x_ss, p.x_sb, p.x_sh}, Strided3Rows{p.out_ss, p.out_sb, p.out_sh}, Strided3Rows{p.k_ss, p.k_sb, p.k_sh}, Strided3Rows{p.k_out_ss, p.k_out_sb, p.k_out_sh}, static_cast<int>(p.heads)};
  rope_dense<float, 2, true, true>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}

// rope_fp32_dense_interleaved_any_s4_v1: dense, interleaved pairs, angles from any, 4 strides, 1 per access
extern "C" __global__ void __launch_bounds__(256, 3) rope_fp32_dense_interleaved_any_s4_v1(const params_dense_s4_any p) {
  using namespace cukiln;
  using namespace cukiln::rope;
  wait_for_prerequisite_grid();  // x may be the previous kernel's output, out memory it still reads
  const Tensors<float, Strided4Rows, false> io{
      static_cast<const float*>(p.x), static_cast<float*>(p.out), nullptr, nullptr,
      Strided4Rows{p.x_ss, p.x_sb, p.x_sh, p.x_sd}, Strided4Rows{p.out_ss, p.out_sb, p.out_sh, p.out_sd}, Strided4Rows{p.x_ss, p.x_sb, p.x_sh, p.x_sd}, Strided4Rows{p.out_ss, p.out_sb, p.out_sh, p.out_sd}, static_cast<int>(p.heads)};
  rope_dense<float, 1, true, false>(
      io, geometry_of(p), positions_of(p),
      AnyAngles<float>{static_cast<int>(p.angle_kind), FreqsTable{static_cast<const float*>(p.table), p.table_row, p.table_rows}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, CosSinTable<float>{static_cast<const float*>(p.cos), static_cast<const float*>(p.sin), p.cos_row, p.sin_row, p.table_rows, p.per_pair != 0}, InvFreq{static_cast<const float*>(p.inv_freq), p.scale}, BaseAngles{p.exponent_step, p.ratio, p.scale}});
}
