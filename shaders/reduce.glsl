// Workgroup-wide sum and max. The including shader defines WG (a power-of-two workgroup size,
// usually a specialization constant) before including this file. All invocations must call these
// in uniform control flow.
shared float dvk_red[WG];

// block_sum and block_max are one reduction with another operator, and GLSL has no function
// templates: DVK_BLOCK_REDUCE(name, subgroup_op, combine) writes the body once. With subgroup
// arithmetic, subgroup_op reduces each subgroup and the partial results are combined in subgroup
// order; without, a shared-memory tree combines pairs. The result is read by every invocation.
#define DVK_ADD(a, b) ((a) + (b))
#if DVK_SUBGROUP
#define DVK_BLOCK_REDUCE(name, subgroup_op, combine)                       \
  float name(float v) {                                                    \
    v = subgroup_op(v);                                                    \
    if (subgroupElect()) dvk_red[gl_SubgroupID] = v;                       \
    barrier();                                                             \
    float s = dvk_red[0];                                                  \
    for (uint i = 1; i < gl_NumSubgroups; ++i) s = combine(s, dvk_red[i]); \
    barrier();                                                             \
    return s;                                                              \
  }
#else
#define DVK_BLOCK_REDUCE(name, subgroup_op, combine)                              \
  float name(float v) {                                                           \
    const uint lid = gl_LocalInvocationIndex;                                     \
    dvk_red[lid] = v;                                                             \
    barrier();                                                                    \
    for (uint s = WG / 2; s > 0; s >>= 1) {                                       \
      if (lid < s) dvk_red[lid] = combine(dvk_red[lid], dvk_red[lid + s]);        \
      barrier();                                                                  \
    }                                                                             \
    float r = dvk_red[0];                                                         \
    barrier();                                                                    \
    return r;                                                                     \
  }
#endif

DVK_BLOCK_REDUCE(block_sum, subgroupAdd, DVK_ADD)
DVK_BLOCK_REDUCE(block_max, subgroupMax, max)
