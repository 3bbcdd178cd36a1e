#version 450
// The fused q/k/v projection of a one-row decode over Q8_0 / Q4_0 weights with int8 activations and integer
// dot products (DVK_INT_DOT, as linear_row_dot.comp), with RoPE and the KV append as its epilogue
// (DVK_ROPE_EPI, as linear_row_rope.comp). Built only on devices with shaderIntegerDotProduct (QuantRowKernel).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require
#define DVK_INT_DOT 1
#define DVK_ROPE_EPI 1
#include "linear_row.glsl"
