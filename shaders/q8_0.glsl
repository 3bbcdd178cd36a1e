// GGUF Q8_0's quantization on the device (docs/maths.md "Q8_0 KV cache"): per block of 32 values,
// d = amax / 127 and q = round-half-away(x / d), the same rule as ggml's quantize_row_q8_0_ref (x · (1/d) in fp32:
// GPU division is not correctly rounded, so the tests accept the other side of a boundary within 1e-3 of it).
// Shared by rope_kv.comp (the append), kv_shift.comp (re-rotation) and linear_row.comp (int8 activations).

float round_half_away(float v) {  // C's roundf, exactly (v - trunc(v) is exact in fp32)
  const float t = trunc(v);
  return abs(v - t) >= 0.5 ? t + sign(v) : t;
}
// 1/d of a block whose scale is d (0 for an all-zero block, whose quants are then all 0).
float q8_inverse(float d) { return d != 0.0 ? 1.0 / d : 0.0; }
// Four values quantized with 1/d = id: int8 in one word, element 0 in the low byte.
uint q8_pack4(vec4 v, float id) {
  uint packed = 0u;
  for (uint i = 0; i < 4; ++i) packed |= (uint(int(clamp(round_half_away(v[i] * id), -127.0, 127.0))) & 0xffu) << (8u * i);
  return packed;
}
