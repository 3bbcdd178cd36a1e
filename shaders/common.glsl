// Shared definitions for every diffvk compute shader.
// DVK_FP16=1: tensors are stored as float16_t (arithmetic stays fp32); DVK_FP16=0: float storage.
// DVK_SUBGROUP=1: reductions use subgroup arithmetic; 0: shared-memory tree reductions.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#if DVK_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#if DVK_FP16
#define STYPE float16_t
#define STYPE2 f16vec2
#define STYPE4 f16vec4
#else
#define STYPE float
#define STYPE2 vec2
#define STYPE4 vec4
#endif

// The model's residual stream and logits are float32 in both variants (real activations exceed
// fp16's 65504). Shaders whose binding may hold either type declare a float alias of it and pick it with
// a specialization constant (X32 / Y32); shaders that only ever touch the residual or logits use RTYPE.
#define RTYPE float

// Finite stand-in for -infinity in online softmax: exp(NEG_BIG - m) underflows to 0 without NaN
// from (-inf) - (-inf) when a whole tile is masked.
#define NEG_BIG (-1.0e30)

// A binary16 value held in 32-bit words (quantized blocks' scales), as float. Specialization constant 60 is
// set by the runtime, for every pipeline, only under quirk half_select_crash (runtime/vk/quirks.cpp): LLVM 15's
// AArch64 instruction selection (Mesa 22.3 lavapipe on arm64) aborts with "Cannot select: v4f32 = truncate" on
// unpackHalf2x16 of a per-lane choice of half (a select, or a variable shift, of the word). There the bits are
// converted by hand (about 20 VALU instructions on AMD's ISA); everywhere else the constant folds the hand form
// away before the backend sees it.
layout(constant_id = 60) const bool DVK_HALF_BY_HAND = false;

// The binary16 value in the low 16 bits of h (the high bits ignored), converted exactly by integer operations.
float half_bits(uint h) {
  const uint e = (h >> 10) & 31u, m = h & 1023u;
  const float mag = e == 0u ? float(m) * 5.9604644775390625e-8  // subnormal: m · 2^-24, exact
                  : e == 31u ? uintBitsToFloat(m == 0u ? 0x7f800000u : 0x7fc00000u)
                             : uintBitsToFloat(((e + 112u) << 23) | (m << 13));
  return (h & 0x8000u) != 0u ? -mag : mag;
}

// The binary16 value in the low 16 bits of h.
float half_low(uint h) { return DVK_HALF_BY_HAND ? half_bits(h) : unpackHalf2x16(h).x; }

// The binary16 value at bit `shift` (0 or 16, chosen per lane) of `word`.
float half_at(uint word, uint shift) { return half_low(word >> shift); }
