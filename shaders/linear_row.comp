#version 450
// One-row (decode) linear layer; the body is linear_row.glsl (its header says what it computes).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#include "linear_row.glsl"
