#version 450
// Split-K differential attention (two softmaxes) in one dispatch: partial states, merged by the last
// split of each tile, then the fused kernel's epilogue. See attn_core.glsl (the core), attn_split.glsl
// (layouts, live-length splits, the merge) and attn_out.glsl (the headwise norm).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 2
#include "attn_core.glsl"
#include "attn_out.glsl"
#include "attn_split.glsl"
