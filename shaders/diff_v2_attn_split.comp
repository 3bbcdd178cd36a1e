#version 450
// Split-K DIFF V2 attention (one softmax per query head, DVK_V2) in one dispatch: partial states laid
// out per output head with its two query heads as softmaxes 0 and 1, merged by the last split of each tile,
// then the fused kernel's epilogue (attn_out.glsl: O_2h − λ·O_2h+1). See attn_core.glsl and attn_split.glsl.
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#include "attn_core.glsl"
#include "attn_out.glsl"
#include "attn_split.glsl"
