#version 450
// Block-quantized weights (Q8_0 / Q4_0, issue 19) to dense storage-type rows: y[row][k] = q · d.
// Input (binding 0): the struct-of-arrays layout of ops/linear_quant.hpp: fp16 scale bits from byte 0
// (read as uint, so fp32-storage devices need no 16-bit storage), the quants from uvec4 index q_off.
// WQ 1 = Q8_0 (16 weights per uvec4), 2 = Q4_0 (one 32-weight block per uvec4: byte j holds element j in
// its low nibble and j + 16 in its high nibble, weight = nibble − 8). The product is formed in fp32 (exact)
// and rounded once to the storage type. One invocation per quant vector, grid-stride over the matrix.
// The prefill path of quantized linears until the tiled matmul dequantizes its tiles itself (model/recipe.cpp).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint WQ = 1;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer WSC { uint wsc[]; };
layout(std430, binding = 0) readonly buffer WQV { uvec4 wq[]; };
layout(std430, binding = 1) writeonly buffer Y { STYPE y[]; };

layout(push_constant) uniform Params {
  uint in_f;
  uint rows;
  uint q_off;
} p;

const uint QS = WQ == 2 ? 32 : 16;  // weights per quant vector

void main() {
  const uint per_row = p.in_f / QS;
  const uint total = p.rows * per_row;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * WG) {
    const uint row = i / per_row, c = i % per_row;
    const uvec4 q = wq[p.q_off + i];
    const uint bi = row * (p.in_f / 32) + (c * QS) / 32;
    const float d = unpackHalf2x16(wsc[bi >> 1] >> ((bi & 1u) * 16u)).x;
    const uint o = row * p.in_f + c * QS;
    for (uint j = 0; j < 4; ++j)
      for (uint k = 0; k < 4; ++k) {
        if (WQ == 1) {
          y[o + 4 * j + k] = STYPE(float(bitfieldExtract(int(q[j]), int(8 * k), 8)) * d);
        } else {
          const uint b = bitfieldExtract(q[j], int(8 * k), 8);
          y[o + 4 * j + k] = STYPE((float(b & 15u) - 8.0) * d);
          y[o + 16 + 4 * j + k] = STYPE((float(b >> 4) - 8.0) * d);
        }
      }
  }
}
