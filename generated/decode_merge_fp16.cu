// cukiln decode-attention kernels, element type fp16: 1 variants.
// Rendered from templates/decode.cu.j2 — edit the template, then run `cukiln build`.
// The kernel bodies are in decode.cuh; each entry point below picks its head dim, K/V addressing (strided caches
// or paged pools), and vector width; whether a launch writes the output (one pass) or split-KV partial results is a kernel
// argument (partial_out null or not), as is the batch-invariant split and merge (batch_invariant).
#include "decode.cuh"

// Parameter structs, one per params layout (the dispatch table's entry of the same layout id lists the fields; the
// runtime packs them in this order).
struct params_merge {
  const void* outs;
  const void* lses;
  void* out;
  void* lse;
  long long parts;
  long long heads;
  long long head_dim;
  long long outs_sk;
  long long outs_sb;
  long long outs_sh;
  long long outs_sd;
  long long lses_sk;
  long long lses_sb;
  long long lses_sh;
  long long out_sb;
  long long out_sh;
  long long out_sd;
  const void* sinks;
  long long sinks_stride;
};


// decode_merge_fp16: cukiln.merge_attention, k partial results of one (row, head) a block, any head dim
extern "C" __global__ void __launch_bounds__(128) decode_merge_fp16(const params_merge p) {
  using namespace cukiln;
  decode::merge_parts<f16>(p);
}
