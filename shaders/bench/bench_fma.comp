#version 450
// Peak FMA-rate probe of `diffvk bench` (the device's arithmetic ceiling). Each invocation runs CHAINS
// (2, 4, 8 or 16) independent vec4 chains acc = fma(acc, m, c), ITERS times, so 4 * CHAINS FMAs per
// iteration are in flight and the latency of one chain is hidden. The host tries several CHAINS and
// keeps the best: a GPU hides latency with 16 chains in registers, while a CPU driver (lavapipe runs 8
// invocations per AVX register, one register per lane) spills beyond a few chains. The arithmetic type follows the variant: fp32 = vec4, fp16 =
// f16vec4 (GL_EXT_shader_explicit_arithmetic_types_float16; only used where shaderFloat16 is enabled).
// m and c come from push constants, so nothing folds at compile time. The host passes m = 1, c = 1;
// lane k of chain j starts at 4j + k, so it ends at 4j + k + ITERS exactly (fp16 is exact up to 2048,
// so ITERS <= 1984 there); each invocation writes the fp32 sum of its L = 4 * CHAINS lanes,
// L * (L - 1) / 2 + L * ITERS,
// which the host checks for every invocation before it times anything (a silently shortened loop, or
// a chain the compiler dropped, gives a different value).
#extension GL_EXT_control_flow_attributes : require
#if DVK_FP16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define FTYPE float16_t
#define VTYPE f16vec4
#else
#define FTYPE float
#define VTYPE vec4
#endif
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint ITERS = 1024;
layout(constant_id = 2) const uint CHAINS = 16;  // 2, 4, 8 or 16 (a constant after specialization: the ifs fold)
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) writeonly buffer Out { float result[]; };

layout(push_constant) uniform Params {
  float m;        // multiplier (1.0)
  float c;        // addend (1.0)
  uint groups_x;  // workgroups per grid row
} p;

void main() {
  const VTYPE m = VTYPE(FTYPE(p.m)), c = VTYPE(FTYPE(p.c));
  const VTYPE lane = VTYPE(0, 1, 2, 3);  // distinct lanes: no chain is a splat a compiler could scalarize
  VTYPE a0 = lane + FTYPE(0), a1 = lane + FTYPE(4), a2 = lane + FTYPE(8), a3 = lane + FTYPE(12),
        a4 = lane + FTYPE(16), a5 = lane + FTYPE(20), a6 = lane + FTYPE(24), a7 = lane + FTYPE(28),
        a8 = lane + FTYPE(32), a9 = lane + FTYPE(36), a10 = lane + FTYPE(40),
        a11 = lane + FTYPE(44), a12 = lane + FTYPE(48), a13 = lane + FTYPE(52),
        a14 = lane + FTYPE(56), a15 = lane + FTYPE(60);
  // 8 steps per loop iteration (ITERS a multiple of 8): the loop's own overhead (a counter, a branch, and
  // on lavapipe its exec-mask and iteration-budget bookkeeping) would otherwise cost as much as the FMAs.
  for (uint i = 0; i < ITERS / 8; ++i) [[unroll]] for (uint u = 0; u < 8; ++u) {
    a0 = fma(a0, m, c);
    a1 = fma(a1, m, c);
    if (CHAINS >= 4) {
      a2 = fma(a2, m, c);
      a3 = fma(a3, m, c);
    }
    if (CHAINS >= 8) {
      a4 = fma(a4, m, c);
      a5 = fma(a5, m, c);
      a6 = fma(a6, m, c);
      a7 = fma(a7, m, c);
    }
    if (CHAINS >= 16) {
      a8 = fma(a8, m, c);
      a9 = fma(a9, m, c);
      a10 = fma(a10, m, c);
      a11 = fma(a11, m, c);
      a12 = fma(a12, m, c);
      a13 = fma(a13, m, c);
      a14 = fma(a14, m, c);
      a15 = fma(a15, m, c);
    }
  }
  vec4 s = vec4(a0) + vec4(a1);
  if (CHAINS >= 4) s += vec4(a2) + vec4(a3);
  if (CHAINS >= 8) s += vec4(a4) + vec4(a5) + vec4(a6) + vec4(a7);
  if (CHAINS >= 16)
    s += vec4(a8) + vec4(a9) + vec4(a10) + vec4(a11) + vec4(a12) + vec4(a13) + vec4(a14) + vec4(a15);
  const uint group = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
  result[group * WG + gl_LocalInvocationIndex] = s.x + s.y + s.z + s.w;
}
