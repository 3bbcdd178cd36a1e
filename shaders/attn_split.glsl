// Split-K partial states of the attention core (attn_core.glsl), for decode and for long prefills
// on loop-limited devices. Workgroup z of gl_NumWorkGroups.z handles keys
// [z*len, (z+1)*len), len = split_length(splits) computed from the LIVE key count (pos0 + dyn + S),
// so a program recorded once for the whole cache does only the work of the current length: splits
// that start past the live keys return at once and the merge never reads them.
//   part[((z*H + h)*S + i)*NSM*2D + t*2D + col]   (fp32, unnormalised, softmax t)
//   stat[((z*H + h)*S + i)*2*NSM + 2t + {0: m, 1: l}]
// A live split that sees no key of a slot writes m = NEG_BIG (finite), l = 0, O = 0.
// DIFF V2 (DVK_V2): the rows are output heads (H/2 of them), query heads 2h, 2h+1 their softmaxes t = 0, 1.
layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(std430, binding = 4) writeonly buffer Stat { float stat[]; };

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  const uint split = gl_WorkGroupID.z;
  const uint len = split_length(gl_NumWorkGroups.z);
  const uint begin = split * len;
  if (begin >= call_keys()) return;  // uniform: the whole workgroup leaves
  const uint end = min(block_end(), begin + len);
  attend(begin, max(begin, end));
  const uint l0 = lane();
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    if (!slot_valid(r)) continue;
#if DVK_V2 && DVK_V2_PAIRS
    // DIFF V2: query heads 2h and 2h+1 are softmaxes 0 and 1 of output head h (the merge's NSM = 2 layout).
    const uint row = (split * (p.H / 2) + slot_head(r) / 2) * p.S + slot_query(r);
    [[unroll]] for (uint t0 = 0; t0 < 1; ++t0) {
      const uint k = r, t = slot_head(r) % 2, NW = 2;
#else
    const uint row = (split * p.H + slot_head(r)) * p.S + slot_query(r);
    [[unroll]] for (uint t = 0; t < NSM; ++t) {
      const uint k = t * RB + r, NW = NSM;
#endif
      const uint base = (row * NW + t) * DV;
      [[unroll]] for (uint i = 0; i < NVV; ++i) {
        const uint vi = l0 + i * L;
        [[unroll]] for (uint c = 0; c < VPC; ++c)
          [[unroll]] for (uint e = 0; e < 4; ++e) {
            const uint x = vi * CW + c * 4 + e;
            if (vi < NVT && x < DV) part[base + x] = acc[(k * NVV + i) * VPC + c][e];
          }
      }
      if (l0 == 0) {
        stat[row * 2 * NW + 2 * t] = m_run[k];
        stat[row * 2 * NW + 2 * t + 1] = l_run[k];
      }
    }
  }
}
