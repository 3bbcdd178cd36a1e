// OpSDot / OpSUDot (SPV_KHR_integer_dot_product) on 4x8-bit packed operands (PackedVectorFormat4x8Bit = 0),
// declared through GL_EXT_spirv_intrinsics: glslang 11.13 (Debian 12) has no GL_EXT_integer_dot_product.
// Including this file puts the DotProduct capabilities into the module: only shaders built on devices with
// the shaderIntegerDotProduct feature may include it (linear_row_dot*.comp, linear_reg_dot.comp).
// The including .comp enables GL_EXT_spirv_intrinsics.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int sudot4x8(uint a, uint b, spirv_literal int fmt);
