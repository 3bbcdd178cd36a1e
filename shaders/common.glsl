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
