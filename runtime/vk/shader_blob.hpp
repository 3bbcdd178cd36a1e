// Embedded SPIR-V, generated at build time from shaders/*.comp (see shaders/CMakeLists.txt).
#pragma once
#include <cstddef>
#include <cstdint>

namespace diffvk {

struct ShaderBlob {
  const char* op;         // file name without .comp
  int fp16;               // 1: fp16-storage variant (DVK_FP16=1), 0: fp32 variant
  int subgroup;           // 1: uses subgroup arithmetic (DVK_SUBGROUP=1)
  const uint32_t* words;
  size_t word_count;
  const char* spec_names;  // "0=WG,1=HD,...": the source's `layout(constant_id = i) const ... NAME` declarations
};

// All embedded variants (defined in the generated shader_registry.cpp).
const ShaderBlob* embedded_shaders(size_t* count);

// Adds a table of shaders embedded outside the core library (diffvk_bench's baselines): find_shader
// looks there after the core's own. Idempotent per table; thread-safe; the table must outlive the
// process (generated static arrays). Not part of embedded_shaders_hash (the pipeline-cache key).
void register_shader_table(const ShaderBlob* blobs, size_t count);

// The variant, or nullptr when that op/variant combination was not built (or not registered).
const ShaderBlob* find_shader(const char* op, bool fp16, bool subgroup);

// FNV-1a over every embedded word: part of the pipeline-cache key.
uint64_t embedded_shaders_hash();

}  // namespace diffvk
