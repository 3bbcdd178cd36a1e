// Split-K attention in ONE dispatch, for decode and for long prefills on loop-limited devices. Workgroup z
// of gl_NumWorkGroups.z handles keys [b + z*len, b + (z+1)*len), b = call_begin() (0, or the first key the sliding
// window lets the call's first query see), len = split_length(splits) computed from the LIVE key count (pos0 + dyn
// + S − b), so a program recorded once for the whole cache does only the work of the
// current length: splits that start past the live keys return at once.
// Each live split writes its partial state (fp32, unnormalised):
//   part[((z*H + h)*S + i)*NSM*DV + t*DV + col]   (softmax t)
//   stat[((z*H + h)*S + i)*2*NSM + 2t + {0: m, 1: l}]
// A live split that sees no key of a slot writes m = NEG_BIG (finite), l = 0, O = 0.
// DIFF V2 (DVK_V2 with pairs): the rows are output heads (H/2 of them), query heads 2h, 2h+1 their
// softmaxes t = 0, 1.
// Then it counts itself in arrivals[tile] (one uint per (row block, group) tile of the grid: each
// invocation once, or the workgroup once without subgroup arithmetic); the LAST live split of the tile to
// arrive merges every live split into its registers,
//   M = max_z m_z,  l = sum_z l_z exp(m_z − M),  acc = sum_z O_z exp(m_z − M)     (per slot and softmax)
// runs the fused kernel's epilogue (attn_out.glsl) and sets the counter back to 0 for the next dispatch
// (the host zeroes the counters once). Maxima are finite, so exp(m_z − M) is 0 for an empty split and
// nothing is NaN. Visibility: the partials are `coherent`; every invocation's memoryBarrierBuffer() orders
// its stores before its count, and the last workgroup's one orders its loads after.
// Bindings: those of the fused kernel (0 q, 1 k, 2 v, 3/4 epilogue, 5 position), then 6 part, 7 stat,
// 8 arrivals.
layout(std430, binding = 6) coherent buffer Part { float part[]; };
// The same buffer by vec4, for V_WHOLE (attn_core.glsl): pb and each lane's chunks are then multiples of 4, and one
// vec4 access replaces four scalar ones (on llvmpipe each per-lane access is a masked scalar loop per element, most
// of this kernel's compile).
layout(std430, binding = 6) coherent buffer Part4 { vec4 part4[]; };
layout(std430, binding = 7) coherent buffer Stat { float stat[]; };
layout(std430, binding = 8) coherent buffer Arrivals { uint arrivals[]; };

#if !DVK_SUBGROUP
shared uint s_arrived;
#endif

// Where softmax t of slot r of split z keeps its state: part[pb .. pb + DV), stat[sb], stat[sb + 1].
void state_at(uint z, uint r, uint t, out uint pb, out uint sb) {
#if DVK_V2 && DVK_V2_PAIRS
  const uint row = (z * (p.H / 2) + slot_head(r) / 2) * p.S + slot_query(r);
  const uint tt = slot_head(r) % 2, NW = 2;
#else
  const uint row = (z * p.H + slot_head(r)) * p.S + slot_query(r);
  const uint tt = t, NW = NSM;
#endif
  pb = (row * NW + tt) * DV;
  sb = row * 2 * NW + 2 * tt;
}

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  const uint splits = gl_NumWorkGroups.z, split = gl_WorkGroupID.z;
  const uint len = split_length(splits);
  if (split * len >= call_keys()) return;  // uniform: the whole workgroup leaves
  const uint begin = max(call_begin() + split * len, block_begin());  // a sliding window starts later
  const uint end = min(block_end(), call_begin() + split * len + len);
  attend(begin, max(begin, end));
  const uint l0 = lane();
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    if (!slot_valid(r)) continue;
    [[unroll]] for (uint t = 0; t < NSM; ++t) {
      const uint k = t * RB + r;
      uint pb, sb;
      state_at(split, r, t, pb, sb);
      [[unroll]] for (uint i = 0; i < NVV; ++i) {
        const uint vi = l0 + i * L;
        [[unroll]] for (uint c = 0; c < VPC; ++c)
          if (V_WHOLE) {
            if (FULL_V || vi < NVT) part4[(pb + vi * CW) / 4 + c] = acc[(k * NVV + i) * VPC + c];
          } else {
            [[unroll]] for (uint e = 0; e < 4; ++e) {
              const uint x = vi * CW + c * 4 + e;
              if (vi < NVT && x < DV) part[pb + x] = acc[(k * NVV + i) * VPC + c][e];
            }
          }
      }
      if (l0 == 0) {
        stat[sb] = m_run[k];
        stat[sb + 1] = l_run[k];
      }
    }
  }
  memoryBarrierBuffer();  // this invocation's stores before its count
  const uint tile = g_group * gl_NumWorkGroups.x + g_block;
  const uint live = min(splits, (call_keys() + len - 1) / len);
#if DVK_SUBGROUP
  // Every invocation counts itself (no workgroup barrier: on llvmpipe one turns the whole shader into
  // coroutines and the key loop's registers into memory, 1.9x slower decode); the workgroup (one subgroup)
  // whose invocation brings the count to live·L is the last, and learns it through a subgroup sum.
  const bool last_in = atomicAdd(arrivals[tile], 1u) + 1u == live * L;
  if (subgroupAdd(last_in ? 1u : 0u) == 0u) return;  // uniform: not the last live split of this tile
#else
  barrier();  // every invocation's stores and fence before the one count (this variant has barriers anyway)
  if (l0 == 0) s_arrived = atomicAdd(arrivals[tile], 1u);
  barrier();
  if (s_arrived + 1u != live) return;  // uniform: not the last live split of this tile
#endif
  if (l0 == 0) arrivals[tile] = 0u;    // every live split has counted: ready for the next dispatch
  memoryBarrierBuffer();
  // The split loops are outermost and every loop inside them has a constant trip count: NIR unrolls only
  // loops without a loop inside, and a rolled slot loop would index the register arrays dynamically and
  // send them (and the key loop's accumulators) to memory on llvmpipe.
  [[unroll]] for (uint k = 0; k < NST; ++k) m_run[k] = NEG_BIG;
  for (uint z = 0; z < live; ++z)
    [[unroll]] for (uint r = 0; r < RB; ++r)
      [[unroll]] for (uint t = 0; t < NSM; ++t) {
        uint pb, sb;
        state_at(z, r, t, pb, sb);
        if (slot_valid(r)) m_run[t * RB + r] = max(m_run[t * RB + r], stat[sb]);
      }
  [[unroll]] for (uint k = 0; k < NST; ++k) l_run[k] = 0.0;
  [[unroll]] for (uint i = 0; i < NST * NVV * VPC; ++i) acc[i] = vec4(0.0);
  for (uint z = 0; z < live; ++z)
    [[unroll]] for (uint r = 0; r < RB; ++r)
      [[unroll]] for (uint t = 0; t < NSM; ++t) {
        const uint k = t * RB + r;
        uint pb, sb;
        state_at(z, r, t, pb, sb);
        if (!slot_valid(r)) continue;
        const float w = exp(stat[sb] - m_run[k]);
        l_run[k] += stat[sb + 1] * w;
        [[unroll]] for (uint i = 0; i < NVV; ++i) {
          const uint vi = l0 + i * L;
          [[unroll]] for (uint c = 0; c < VPC; ++c)
            if (V_WHOLE) {
              if (FULL_V || vi < NVT) acc[(k * NVV + i) * VPC + c] += w * part4[(pb + vi * CW) / 4 + c];
            } else {
              [[unroll]] for (uint e = 0; e < 4; ++e) {
                const uint x = vi * CW + c * 4 + e;
                if (vi < NVT && x < DV) acc[(k * NVV + i) * VPC + c][e] += w * part[pb + x];
              }
            }
        }
      }
  write_out();
}
