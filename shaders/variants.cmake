# The shader variant table: every SPIR-V module the project embeds, one row per registry name (the op name
# that kernels ask find_shader for; the pipeline name adds _fp16 / _fp32 and _sg). shaders/CMakeLists.txt
# compiles each row's variants with glslc (or copies its committed words), writes the registries and the
# variant list that `diffvk shader-stats --list` prints without a device. A new variant is a new row here,
# not a new file: shaders/ holds one .comp per op plus the shared .glsl it includes.
#
# Columns (one row = one diffvk_shader() call; the description is the last argument, on the next line):
#   name        registry op name: runtime lookups, pipeline names and the pipeline-cache key depend on it
#   registry    core  = libdiffvk (shader_registry.cpp, embedded_shaders);
#               bench = libdiffvk_bench only (bench_shader_registry.cpp, registered on first use)
#   build       glslc    = compiled at build time: glslc --target-env=vulkan1.1 -O -Werror -DDVK_FP16=0|1
#                          -DDVK_SUBGROUP=0|1 -D<defines> -Ishaders SOURCE
#               prebuilt = the committed words SOURCE_DIR/spv/<name>_fp16.spv.inc (Debian 12's glslc cannot
#                          compile GL_KHR_cooperative_matrix; shaders/coopmat/regen makes and checks them with
#                          the same flags, reading this table): fp16 only, no subgroup variant
#   precisions  fp16,fp32 (DVK_FP16 = 1, 0: the storage type STYPE) or one of them
#   subgroup    0,1 = a plain and a subgroup-arithmetic variant (DVK_SUBGROUP = 0, 1: the _sg pipelines);
#               0 = the plain one only
#   source      the .comp, relative to shaders/
#   defines     NAME=VALUE,... passed as -D to glslc on top of DVK_FP16 / DVK_SUBGROUP; - for none
#
#             name                reg   build    precisions subgroup source                         defines
diffvk_shader(attn_probs          core  glslc    fp16,fp32  0,1      attn_probs.comp                -
  "the two causal softmaxes of one layer's heads, materialised (attn-map, Session::attention_maps)")
diffvk_shader(combine_norm        core  glslc    fp16,fp32  0,1      combine_norm.comp              -
  "O1 - lambda*O2 and the headwise RMSNorm (the second pass of the two-pass attention)")
diffvk_shader(conv1d_state        core  glslc    fp16,fp32  0        conv1d_state.comp              -
  "Mamba-1 causal depthwise conv1d with its rolling fp32 state, SiLU fused (prefill and decode)")
diffvk_shader(diff_attn           core  glslc    fp16,fp32  0,1      attn.comp                      NSM=2
  "fused differential attention (prefill, unsplit calls): two softmaxes, then the headwise RMSNorm")
diffvk_shader(diff_attn_split     core  glslc    fp16,fp32  0,1      attn.comp                      NSM=2,DVK_SPLIT=1
  "split-K differential attention in one dispatch (decode, long prefills on loop-limited devices)")
diffvk_shader(diff_v2_attn        core  glslc    fp16,fp32  0,1      attn.comp                      NSM=1,DVK_V2=1
  "fused DIFF V2 attention: one softmax per query head, O_2i/l_2i - sigmoid(z)*O_2i+1/l_2i+1")
diffvk_shader(diff_v2_attn_split  core  glslc    fp16,fp32  0,1      attn.comp
  NSM=1,DVK_V2=1,DVK_SPLIT=1
  "split-K DIFF V2 attention in one dispatch")
diffvk_shader(embed               core  glslc    fp16,fp32  0        embed.comp                     -
  "token embedding rows (dense or Q8_0 / Q4_0 table)")
diffvk_shader(head_rmsnorm        core  glslc    fp16,fp32  0,1      head_rmsnorm.comp              -
  "headwise RMSNorm")
diffvk_shader(kv_shift            core  glslc    fp16,fp32  0        kv_shift.comp                  -
  "context shift: moves KV-cache rows down and re-rotates the keys")
diffvk_shader(layer_norm          core  glslc    fp16,fp32  0,1      layer_norm.comp                -
  "LayerNorm with bias (centred fp32 statistics)")
diffvk_shader(linear              core  glslc    fp16,fp32  0        linear.comp                    -
  "tiled matrix-matrix linear with shared memory (GPUs)")
diffvk_shader(linear_reg          core  glslc    fp16,fp32  0,1      linear_reg.comp                -
  "register-tiled matrix-matrix linear, no shared memory (CPU drivers, Mali)")
diffvk_shader(linear_reg_dot      core  glslc    fp16,fp32  0        linear_reg_dot.comp            -
  "register-tiled linear over Q8_0 / Q4_0 weights, int8 activations, integer dot products")
diffvk_shader(linear_row          core  glslc    fp16,fp32  0,1      linear_row.comp                -
  "one-row (decode) linear with fused prologue (RMSNorm, SwiGLU); dense or dequantized Q8_0 / Q4_0")
diffvk_shader(linear_row_dot      core  glslc    fp16,fp32  0,1      linear_row.comp                DVK_INT_DOT=1
  "one-row linear over Q8_0 / Q4_0 weights with int8 activations and integer dot products")
diffvk_shader(linear_row_dot_rope core  glslc    fp16,fp32  0,1      linear_row.comp
  DVK_INT_DOT=1,DVK_ROPE_EPI=1
  "one-row q/k/v projection, integer dot products, with RoPE and the KV append as its epilogue")
diffvk_shader(linear_row_rope     core  glslc    fp16,fp32  0,1      linear_row.comp                DVK_ROPE_EPI=1
  "one-row q/k/v projection with RoPE and the KV append as its epilogue")
diffvk_shader(linear_vec          core  glslc    fp16,fp32  0,1      linear_vec.comp                -
  "matrix-vector shaped linear for up to 8 rows")
diffvk_shader(rope_kv             core  glslc    fp16,fp32  0        rope_kv.comp                   -
  "RoPE of the fused QKV projection and the KV-cache append")
diffvk_shader(sample_topk         core  glslc    fp16,fp32  0        sample_topk.comp               -
  "device sampling of one logits row: greedy or top-k")
diffvk_shader(selective_scan      core  glslc    fp16,fp32  0        selective_scan.comp            -
  "Mamba-1 selective scan: one-dispatch decode, chunked parallel prefill (chunk, carry, final passes)")
diffvk_shader(silu_mul            core  glslc    fp16,fp32  0        silu_mul.comp                  -
  "SwiGLU gate: silu(gate) * up")
diffvk_shader(diff_attn_coopmat   core  prebuilt fp16       0        coopmat/diff_attn_coopmat.comp -
  "cooperative-matrix prefill of the differential attention (VK_KHR_cooperative_matrix)")
diffvk_shader(linear_coopmat      core  prebuilt fp16       0        coopmat/linear_coopmat.comp    -
  "cooperative-matrix matrix-matrix linear (VK_KHR_cooperative_matrix)")
diffvk_shader(bench_copy          bench glslc    fp16,fp32  0        bench/bench_copy.comp          -
  "memory-bandwidth probe of diffvk bench")
diffvk_shader(bench_fma           bench glslc    fp16,fp32  0        bench/bench_fma.comp           -
  "peak FMA-rate probe of diffvk bench")
diffvk_shader(flash_attn          bench glslc    fp16,fp32  0,1      attn.comp                      NSM=1
  "single-softmax attention of one query/key half (the two-pass baseline)")
diffvk_shader(flash_attn_split    bench glslc    fp16,fp32  0,1      attn.comp                      NSM=1,DVK_SPLIT=1
  "split-K single-softmax attention (the two-pass baseline)")
diffvk_shader(flash_v2            bench glslc    fp16,fp32  0,1      attn.comp
  NSM=1,DVK_V2=1,DVK_V2_PAIRS=0
  "plain attention over D-wide heads (the DIFF V2 baselines)")
diffvk_shader(flash_v2_split      bench glslc    fp16,fp32  0,1      attn.comp
  NSM=1,DVK_V2=1,DVK_V2_PAIRS=0,DVK_SPLIT=1
  "split-K plain attention over D-wide heads (the DIFF V2 baselines)")
diffvk_shader(naive_pv            bench glslc    fp16,fp32  0        bench/naive_pv.comp            -
  "naive baseline, step 3: (P1 - lambda*P2)*V from the materialised probabilities")
diffvk_shader(naive_scores        bench glslc    fp16,fp32  0        bench/naive_scores.comp        -
  "naive baseline, step 1: one materialised fp32 score matrix")
diffvk_shader(naive_softmax       bench glslc    fp16,fp32  0,1      bench/naive_softmax.comp       -
  "naive baseline, step 2: row softmax of a materialised score matrix, in place")
diffvk_shader(naive_v2_pv         bench glslc    fp16,fp32  0        bench/naive_v2_pv.comp         -
  "naive DIFF V2 baseline, last step: (P_2h - lambda*P_2h+1)*V")
diffvk_shader(v2_combine          bench glslc    fp16,fp32  0        bench/v2_combine.comp          -
  "the combine pass of the two-pass DIFF V2 baseline: oe - sigmoid(z)*oo")
