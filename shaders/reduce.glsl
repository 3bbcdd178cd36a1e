// Workgroup-wide sum and max. The including shader defines WG (a power-of-two workgroup size,
// usually a specialization constant) before including this file. All invocations must call these
// in uniform control flow.
shared float dvk_red[WG];

float block_sum(float v) {
#if DVK_SUBGROUP
  v = subgroupAdd(v);
  if (subgroupElect()) dvk_red[gl_SubgroupID] = v;
  barrier();
  float s = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) s += dvk_red[i];
  barrier();
  return s;
#else
  const uint lid = gl_LocalInvocationIndex;
  dvk_red[lid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) dvk_red[lid] += dvk_red[lid + s];
    barrier();
  }
  float r = dvk_red[0];
  barrier();
  return r;
#endif
}

float block_max(float v) {
#if DVK_SUBGROUP
  v = subgroupMax(v);
  if (subgroupElect()) dvk_red[gl_SubgroupID] = v;
  barrier();
  float s = dvk_red[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) s = max(s, dvk_red[i]);
  barrier();
  return s;
#else
  const uint lid = gl_LocalInvocationIndex;
  dvk_red[lid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) dvk_red[lid] = max(dvk_red[lid], dvk_red[lid + s]);
    barrier();
  }
  float r = dvk_red[0];
  barrier();
  return r;
#endif
}
