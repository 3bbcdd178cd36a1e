#version 450
// Split-K single-softmax attention (the bench's two-pass baseline) in one dispatch, like the fused
// kernel's: attn_core.glsl (NSM = 1), attn_split.glsl (partials and the last split's merge), attn_out.glsl.
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#include "attn_core.glsl"
#include "attn_out.glsl"
#include "attn_split.glsl"
