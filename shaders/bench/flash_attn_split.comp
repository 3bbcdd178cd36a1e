#version 450
// Split-K single-softmax attention (the bench's two-pass baseline): partial states for
// flash_attn_reduce.comp. Same core as the fused kernel (attn_core.glsl, NSM = 1).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#include "attn_core.glsl"
#include "attn_split.glsl"
