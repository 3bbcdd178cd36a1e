#version 450
// Memory-bandwidth probe of `diffvk bench`: dst = src, 16 bytes per element, ITEMS elements per
// invocation (coalesced: element base + k*WG + lid), 2-D grid for copies beyond 65535 workgroups.
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint ITEMS = 1;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uvec4 dst[]; };

layout(push_constant) uniform Params {
  uint n;        // elements (uvec4)
  uint groups_x; // workgroups per grid row
} p;

void main() {
  const uint group = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
  const uint base = group * WG * ITEMS + gl_LocalInvocationIndex;
  for (uint k = 0; k < ITEMS; ++k) {
    const uint e = base + k * WG;
    if (e < p.n) dst[e] = src[e];
  }
}
