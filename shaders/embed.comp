#version 450
// Token embedding: x[r, :] = table[token[r] - first, :] for the tokens this table part holds
// (first <= token < first + vocab; a table larger than a binding is split by rows into parts, one
// dispatch each). Token ids are uint32, validated by the host; an id >= total (the whole vocabulary)
// writes zeros instead of reading out of bounds (the part with first == 0 does that). x is the model's residual stream:
// float32 (RTYPE) in either variant.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; };
layout(std430, binding = 1) readonly buffer Table { STYPE table[]; };
layout(std430, binding = 2) writeonly buffer Out { RTYPE x[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint E;
  uint vocab;   // rows of this part
  uint first;   // first token of this part
  uint total;   // whole vocabulary
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y) {
    const uint t = tokens[r] - p.first;  // wraps for tokens below this part: then >= vocab
    const bool mine = t < p.vocab, invalid = tokens[r] >= p.total && p.first == 0;
    if (!mine && !invalid) continue;
    for (uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; c < p.E; c += gl_NumWorkGroups.x * WG)
      x[r * p.E + c] = mine ? RTYPE(table[t * p.E + c]) : RTYPE(0);
  }
}
