#version 450
// Split-K differential attention (two softmaxes): partial states for diff_attn_reduce.comp.
// See attn_core.glsl (the core) and attn_split.glsl (layouts, live-length splits).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 2
#include "attn_core.glsl"
#include "attn_split.glsl"
