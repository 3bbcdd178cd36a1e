#version 450
// Token embedding: x[r, :] = table[token[r] - first, :] for the tokens this table part holds
// (first <= token < first + vocab; a table larger than a binding is split by rows into parts, one
// dispatch each). Token ids are uint32, validated by the host; an id >= total (the whole vocabulary)
// writes zeros instead of reading out of bounds (the part with first == 0 does that). x is the model's residual stream:
// float32 (RTYPE) in either variant.
// WQ: the table's format. 0: storage-type rows. 1 (Q8_0) / 2 (Q4_0): the block-quantized device
// layout of ops/linear_quant.hpp (fp16 scale bits from byte 0, one per 32 weights of a row; the quants
// from uint index p.q_off: Q8_0 one int8 per weight, Q4_0 16 bytes per block with element j in the low
// nibble of byte j and element j + 16 in its high nibble, weight = (nibble − 8)·d), read as uints.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint WQ = 0;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; };
layout(std430, binding = 1) readonly buffer Table { STYPE table[]; };
layout(std430, binding = 1) readonly buffer TableU { uint tq[]; };  // WQ != 0: scales, then quants
layout(std430, binding = 2) writeonly buffer Out { RTYPE x[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint E;
  uint vocab;   // rows of this part
  uint first;   // first token of this part
  uint total;   // whole vocabulary
  uint q_off;   // WQ != 0: uint index of the first quant word
} p;

// Element c of row t of a quantized table.
float quant_elem(uint t, uint c) {
  const uint bi = t * (p.E / 32) + c / 32;
  const float d = half_at(tq[bi >> 1], (bi & 1u) * 16u);
  if (WQ == 1) {
    const uint i = t * p.E + c;  // byte index in the quants
    return d * float(bitfieldExtract(int(tq[p.q_off + i / 4]), int(8 * (i % 4)), 8));
  }
  const uint j = c % 32, i = bi * 16 + (j % 16);  // the block's byte holding element j
  const uint byte = bitfieldExtract(tq[p.q_off + i / 4], int(8 * (i % 4)), 8);
  return d * (float(j < 16 ? byte & 15u : byte >> 4) - 8.0);
}

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y) {
    const uint t = tokens[r] - p.first;  // wraps for tokens below this part: then >= vocab
    const bool mine = t < p.vocab, invalid = tokens[r] >= p.total && p.first == 0;
    if (!mine && !invalid) continue;
    for (uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; c < p.E; c += gl_NumWorkGroups.x * WG)
      x[r * p.E + c] = !mine ? RTYPE(0) : WQ != 0 ? RTYPE(quant_elem(t, c)) : RTYPE(table[t * p.E + c]);
  }
}
