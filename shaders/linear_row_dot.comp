#version 450
// The one-row linear over Q8_0 / Q4_0 weights with int8 activations and 4x8-bit integer dot products
// (linear_row.glsl with DVK_INT_DOT = 1; spec constant WQ must be 1 or 2). Built only on devices with
// the shaderIntegerDotProduct feature (QuantRowKernel).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require
#define DVK_INT_DOT 1
#include "linear_row.glsl"
