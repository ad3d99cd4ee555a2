// cukiln decode-attention kernels, element type bf16: 8 variants.
// Rendered from templates/decode.cu.j2 — edit the template, then run `cukiln build`.
// The kernel bodies are in decode.cuh; each entry point below picks its head dim, K/V addressing (strided caches
// or paged pools), and vector width; whether a launch writes the output (one pass) or split-KV partial results is a kernel
// argument (partial_out null or not), as is the batch-invariant split and merge (batch_invariant).
#include "decode.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_attention_s3_paged {
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
  const void* block_table;
  long long table_sb;
  long long page_shift;
  long long num_pages;
  const void* q_lens;
  long long queries;
};


// decode_bf16_d64_s3_v8_paged: head dim 64 over paged caches (a pool of pages through a block table), 8-element copies, narrow pipeline (64-key tiles, 5 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d64_s3_v8_paged(const params_attention_s3_paged p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = T;
  attend<T, 64, 8, 64, 5, KvPages, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvPages{p.k_sb, p.k_sh, p.k_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)}, KvPages{p.v_sb, p.v_sh, p.v_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 64>(p));
}

// decode_bf16_d64_s3_v8_ws_deep_paged: head dim 64, warp-specialized (64-key tiles of paged pools through a block table, copied page by page by 4 producer warps, 8 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(256, 1) decode_bf16_d64_s3_v8_ws_deep_paged(const __grid_constant__ params_attention_s3_paged p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 64, 64, 8, 4>(p);
}

// decode_bf16_d80_s3_v8_paged: head dim 80 over paged caches (a pool of pages through a block table), 8-element copies, narrow pipeline (64-key tiles, 4 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d80_s3_v8_paged(const params_attention_s3_paged p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = T;
  attend<T, 80, 8, 64, 4, KvPages, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvPages{p.k_sb, p.k_sh, p.k_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)}, KvPages{p.v_sb, p.v_sh, p.v_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 80>(p));
}

// decode_bf16_d96_s3_v8_paged: head dim 96 over paged caches (a pool of pages through a block table), 8-element copies, narrow pipeline (64-key tiles, 3 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d96_s3_v8_paged(const params_attention_s3_paged p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = T;
  attend<T, 96, 8, 64, 3, KvPages, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvPages{p.k_sb, p.k_sh, p.k_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)}, KvPages{p.v_sb, p.v_sh, p.v_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 96>(p));
}

// decode_bf16_d128_s3_v8_paged: head dim 128 over paged caches (a pool of pages through a block table), 8-element copies, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 3) decode_bf16_d128_s3_v8_paged(const params_attention_s3_paged p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = T;
  attend<T, 128, 8, 64, 2, KvPages, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvPages{p.k_sb, p.k_sh, p.k_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)}, KvPages{p.v_sb, p.v_sh, p.v_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 128>(p));
}

// decode_bf16_d128_s3_v8_ws_deep_paged: head dim 128, warp-specialized (64-key tiles of paged pools through a block table, copied page by page by 4 producer warps, 4 stages; sm_90 on), one pass or split-KV
extern "C" __global__ void __launch_bounds__(256, 1) decode_bf16_d128_s3_v8_ws_deep_paged(const __grid_constant__ params_attention_s3_paged p) {
  using namespace cukiln;
  decode::attend_ws<bf16, 128, 64, 4, 4>(p);
}

// decode_bf16_d192_s3_v8_paged: head dim 192 over paged caches (a pool of pages through a block table), 8-element copies, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 2) decode_bf16_d192_s3_v8_paged(const params_attention_s3_paged p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = T;
  attend<T, 192, 8, 64, 2, KvPages, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvPages{p.k_sb, p.k_sh, p.k_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)}, KvPages{p.v_sb, p.v_sh, p.v_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 192>(p));
}

// decode_bf16_d256_s3_v8_paged: head dim 256 over paged caches (a pool of pages through a block table), 8-element copies, narrow pipeline (64-key tiles, 2 stages), one pass or split-KV
extern "C" __global__ void __launch_bounds__(128, 1) decode_bf16_d256_s3_v8_paged(const params_attention_s3_paged p) {
  using namespace cukiln;
  using namespace cukiln::decode;
  using T = bf16;
  using C = T;
  attend<T, 256, 8, 64, 2, KvPages, C>(
      static_cast<const T*>(p.q), Rows3{p.q_sb, p.q_sh, p.q_sd}, static_cast<const C*>(p.k), static_cast<const C*>(p.v),
      KvPages{p.k_sb, p.k_sh, p.k_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)}, KvPages{p.v_sb, p.v_sh, p.v_st, static_cast<const int*>(p.block_table), p.table_sb, static_cast<int>(p.page_shift), static_cast<int>(p.num_pages)},
      token_rows_of(p), static_cast<int>(p.group), static_cast<int>(p.head_groups), scoring_of(p),
      sink_of<T, 256>(p));
}
