// The quantized weight loads of the linear shaders that dequantize in registers (linear_reg.comp, linear_vec.comp):
// Q8_0 (WQ = 1) and Q4_0 (WQ = 2) in the struct-of-arrays layout of runtime/ops/linear_quant.hpp (per 32-weight block
// an fp16 scale, in an array of its own, then from byte p.qoff the quants: Q8_0 one int8 per weight, Q4_0 16 bytes a
// block, weight i in the low nibble of byte i and weight i + 16 in the high nibble), q·d or (nibble − 8)·d.
// The includer declares WQ, KVEC (floats per 16-byte vector: 8 in fp16, 4 in fp32), the push block p (in_f, qoff)
// and the weight binding as 4-byte words (wq1), 8-byte words (wq2) and the storage type (w: the fp16 scales).

// The dequantized weight n·in + k (WQ != 0), elementwise (the k tail, VEC == 0).
float wq_at(uint n, uint k) {
  const uint si = n * (p.in_f / 32) + k / 32;
  const float d = half_at(wq1[si / 2], (si % 2) * 16u);
  if (WQ == 1) {
    const uint b = p.qoff + n * p.in_f + k;
    return float(bitfieldExtract(int(wq1[b / 4]), int(8 * (b % 4)), 8)) * d;
  }
  const uint b = p.qoff + n * (p.in_f / 2) + (k / 32) * 16 + k % 16;
  return float(int((wq1[b / 4] >> (8 * (b % 4) + ((k % 32) >= 16 ? 4 : 0))) & 15u) - 8) * d;
}

// KV dequantized weights n·in + k … k + KV − 1 (WQ != 0, k a multiple of KV, inside one block): one
// 8-byte (KV = 8) or 4-byte (KV = 4) load of quants and one of the scale.
void wq_vec(uint n, uint k, out float f[KVEC]) {
  const uint si = n * (p.in_f / 32) + k / 32;
  const float d = half_at(wq1[si / 2], (si % 2) * 16u);
  uint wd[2];
  const uint b = WQ == 1 ? p.qoff + n * p.in_f + k : p.qoff + n * (p.in_f / 2) + (k / 32) * 16 + k % 16;
  if (KVEC == 8) {
    const uvec2 v = wq2[b / 8];
    wd[0] = v.x;
    wd[1] = v.y;
  } else {
    wd[0] = wq1[b / 4];
    wd[1] = 0u;
  }
  // Q4_0: (q − 8)·d as q·d − 8·d, the same value: every product of a 4-bit q and an fp16 scale is exact in fp32, so
  // neither form rounds. The nibbles go into the bytes of their word first (two instructions per four weights), so
  // that each converts with one instruction (AMD's v_cvt_f32_ubyteN): radv raven 584 → 536 VALU instructions per
  // linear_vec iteration, gfx1100 568 → 460.
  const int sh = (k % 32) >= 16 ? 4 : 0;
  const float d8 = -8.0 * d;
  if (WQ == 2) {  // each word's four nibbles moved into its four bytes, each byte converted on its own
    wd[0] = (wd[0] >> sh) & 0x0f0f0f0fu;
    wd[1] = (wd[1] >> sh) & 0x0f0f0f0fu;
  }
  [[unroll]] for (uint i = 0; i < KVEC; ++i) {
    if (WQ == 1) f[i] = float(bitfieldExtract(int(wd[i / 4]), int(8 * (i % 4)), 8)) * d;
    else f[i] = float((wd[i / 4] >> (8 * (i % 4))) & 255u) * d + d8;
  }
}

// The matrix-vector loop's form of wq_vec (linear_vec.comp): the weight row's offsets computed once per workgroup
// (wq_row_scale: its first block's scale index; wq_row_quant: its quants' first KVEC-byte vector), the lane's
// offsets once per vector (wq_lane), so that a weight vector costs two address additions and its two loads. Then per
// weight, every product exact in fp32:
// - Q8_0: the signed byte converted and one multiply, q·d (radv raven: v_cvt_f32_i32 with a sign-extending byte
//   select; gfx1100, which has no byte selects, adds a bitfield extract: 405 VALU instructions per iteration there,
//   393 as (q XOR 0x80)·d − 128·d, which costs raven 16 more);
// - Q4_0: the nibble moved into the low half of its byte (two word operations per four weights), the byte converted
//   (AMD's v_cvt_f32_ubyteN) and one fma, (q − 8)·d = fma(q, d, −8·d) (raven: v_mad_f32).
// radv, per iteration of 32 weights x 8 rows, before → after: raven Q8_0 468 → 409 VALU instructions, Q4_0 536 → 438;
// gfx1100 Q8_0 452 → 405, Q4_0 460 → 406.
// The row's offsets are multiples of the vector (in_f a multiple of 32, qoff of 16).
uint wq_row_scale(uint n) { return n * (p.in_f / 32); }
uint wq_row_quant(uint n) { return (p.qoff + (WQ == 1 ? n * p.in_f : n * (p.in_f / 2))) / KVEC; }

// The lane's part of vector kv's offsets: .x its block (scale) offset, .y its quant vector offset, .z the nibble
// shift (Q4_0: weights 16 … 31 of a block are the high nibbles).
uvec3 wq_lane(uint kv) {
  const uint per_block = 32 / KVEC;  // vectors per block
  const uint kb = kv / per_block;
  if (WQ == 1) return uvec3(kb, kv, 0u);
  const uint half_vecs = per_block / 2;  // vectors per 16 weights: a block's 16 bytes hold two of them
  return uvec3(kb, kb * (16 / KVEC) + kv % half_vecs, (kv % per_block) >= half_vecs ? 4u : 0u);
}

float wq_scale(uint si) {
#if DVK_FP16
  return float(w[si]);  // the binding's 16-bit view (16-bit storage is required in fp16)
#else
  return half_at(wq1[si / 2], (si % 2) * 16u);
#endif
}

void wq_vec_at(uint row_scale, uint row_quant, uvec3 lane, out float f[KVEC]) {
  const float d = wq_scale(row_scale + lane.x);
  uint wd[2];
  if (KVEC == 8) {
    const uvec2 v = wq2[row_quant + lane.y];
    wd[0] = v.x;
    wd[1] = v.y;
  } else {
    wd[0] = wq1[row_quant + lane.y];
    wd[1] = 0u;
  }
  if (WQ == 1) {
    [[unroll]] for (uint i = 0; i < KVEC; ++i) f[i] = float(bitfieldExtract(int(wd[i / 4]), int(8 * (i % 4)), 8)) * d;
  } else {
    // −8·d negated through its sign bit: written as a product with d, NIR factors q·d − 8·d into (q − 8)·d, two
    // instructions where GCN's v_mad_f32 is one.
    const float off = uintBitsToFloat(floatBitsToUint(d) ^ 0x80000000u) * 8.0;
    [[unroll]] for (uint j = 0; j < 2; ++j) wd[j] = (wd[j] >> lane.z) & 0x0f0f0f0fu;
    [[unroll]] for (uint i = 0; i < KVEC; ++i) f[i] = fma(float((wd[i / 4] >> (8 * (i % 4))) & 255u), d, off);
  }
}
