#version 450
// Merges the split-K partial states of flash_v2_split.comp (attn_merge.glsl, D-wide rows) and writes O
// in the storage type: o[i*o_stride + h*D + col].
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#define MERGE_DYN_BINDING 3
#include "attn_merge.glsl"

layout(std430, binding = 2) writeonly buffer Obuf { STYPE o[]; };

void main() {
  merge_stats();
  for (uint c = gl_LocalInvocationIndex; c < DV; c += WG) o[g_i * p.o_stride + g_h * DV + c] = STYPE(merged(0, c));
}
