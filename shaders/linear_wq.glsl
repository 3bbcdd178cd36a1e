// The quantized weight loads of the linear shaders that dequantize in registers (linear_reg.comp, linear_vec.comp):
// Q8_0 (WQ = 1) and Q4_0 (WQ = 2) in the struct-of-arrays layout of runtime/ops/linear_quant.hpp (per 32-weight block
// an fp16 scale, in an array of its own, then from byte p.qoff the quants: Q8_0 one int8 per weight, Q4_0 16 bytes a
// block, weight i in the low nibble of byte i and weight i + 16 in the high nibble), q·d or (nibble − 8)·d.
// The includer declares WQ, KVEC (floats per 16-byte vector: 8 in fp16, 4 in fp32), the push block p (in_f, qoff)
// and the weight binding as 4-byte words (wq1) and 8-byte words (wq2).

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
