#version 450
// Split-K DIFF V2 attention (one softmax per query head, DVK_V2): partial states for
// diff_v2_attn_reduce.comp, laid out per output head with its two query heads as softmaxes 0 and 1.
// See attn_core.glsl (the core) and attn_split.glsl (layouts, live-length splits).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#include "attn_core.glsl"
#include "attn_split.glsl"
