#version 450
// Split-K plain attention over D-wide heads (the bench's DIFF V2 baselines) in one dispatch:
// attn_core.glsl with NSM = 1, DVK_V2 = 1, no pairing; attn_split.glsl (partials, the last split's merge);
// attn_out.glsl.
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#define DVK_V2_PAIRS 0
#include "attn_core.glsl"
#include "attn_out.glsl"
#include "attn_split.glsl"
