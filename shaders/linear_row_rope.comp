#version 450
// The fused q/k/v projection of a one-row decode with RoPE and the KV-cache append as its epilogue
// (linear_row.glsl with DVK_ROPE_EPI; its header says what it computes): one dispatch where a decode step
// had linear_row + rope_kv.
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define DVK_ROPE_EPI 1
#include "linear_row.glsl"
