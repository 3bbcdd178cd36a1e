#version 450
// Attention: the register-resident core (attn_core.glsl), then the variant's epilogue (attn_out.glsl). One
// source, eight variants (shaders/variants.cmake), chosen by defines:
//   NSM = 2: the model's differential attention, both online softmaxes over one K/V stream, then
//     O = O1/l1 − λ·O2/l2 and the headwise RMSNorm (eps, subln, 1 − λ_init) in registers:
//     o[i*o_stride + h*2D + col]                                         (diff_attn, diff_attn_split)
//   NSM = 1, DVK_V2 = 1: DIFF V2 (docs/maths.md "DIFF V2"): one softmax per query head, every query head of
//     a GQA group in the same workgroup, then per pair of slots (query heads 2i and 2i+1 of one query):
//     λ = sigmoid(z), z = q[i*q_stride + Hq*D + head] (the λ logits follow the 2H query heads),
//     o[i*o_stride + head*D + col] = O_2i/l_2i − λ·O_2i+1/l_2i+1, no norm      (diff_v2_attn, diff_v2_attn_split)
//   NSM = 1 (the benchmark's single-softmax two-pass baseline, diffvk_bench): O = softmax(Q·Kᵀ/√D)·V for one
//     query/key half (push constant qk_off), o[i*o_stride + h*2D + col]           (flash_attn, flash_attn_split)
//   NSM = 1, DVK_V2 = 1, DVK_V2_PAIRS = 0 (the benchmark's DIFF V2 baselines): plain attention over D-wide
//     heads (every one, or every other one through q_hstride = 2D and qk_off = 0 / D):
//     o[i*o_stride + h*D + col]                                                   (flash_v2, flash_v2_split)
// DVK_SPLIT = 1 (the *_split variants): split-K in one dispatch: partial states, merged by the last split of
// each tile, then the same epilogue (attn_split.glsl: layouts, live-length splits, the merge). Otherwise the
// fused kernel (prefill, and unsplit calls) streams every key of its block.
#extension GL_GOOGLE_include_directive : require
#ifndef DVK_SPLIT
#define DVK_SPLIT 0
#endif
#include "attn_core.glsl"
#include "attn_out.glsl"

#if DVK_SPLIT
#include "attn_split.glsl"
#else
void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(block_begin(), block_end());
  write_out();
}
#endif
