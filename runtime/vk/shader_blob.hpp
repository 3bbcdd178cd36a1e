// Embedded SPIR-V, generated at build time from the variant table shaders/variants.cmake (see
// shaders/CMakeLists.txt).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace diffvk {

struct ShaderBlob {
  const char* op;  // the table row's name (shaders/variants.cmake)
  int fp16;        // 1: fp16-storage variant (DVK_FP16=1), 0: fp32 variant
  int subgroup;    // 1: uses subgroup arithmetic (DVK_SUBGROUP=1)
  const uint32_t* words;
  size_t word_count;
  const char* spec_names;  // "0=WG,1=HD,...": the source's `layout(constant_id = i) const ... NAME` declarations
};

// All embedded variants (defined in the generated shader_registry.cpp).
const ShaderBlob* embedded_shaders(size_t* count);
// The bench registry's variants (generated bench_shader_registry.cpp): linked into diffvk_bench only.
const ShaderBlob* bench_embedded_shaders(size_t* count);

// One variant of the table shaders/variants.cmake (a row expanded by precision and subgroup): every variant of
// both registries, core and bench, also those whose words are not in this library. Generated, in
// shader_registry.cpp; public as diffvk::shader_variants() (diffvk/shader_stats.hpp).
struct ShaderVariantRow {
  const char* op;           // the row's name: what find_shader takes
  int fp16;                 // DVK_FP16
  int subgroup;             // DVK_SUBGROUP
  const char* registry;     // "core" (embedded_shaders) or "bench" (diffvk_bench's table)
  int prebuilt;             // 1: committed SPIR-V words (shaders/coopmat/spv), 0: glslc at build time
  const char* source;       // "shaders/linear_row.comp"
  const char* defines;      // the row's -D defines besides DVK_FP16 / DVK_SUBGROUP, "A=1 B=2"; "" for none
  const char* spec_names;   // as ShaderBlob::spec_names
  const char* description;  // one line
  size_t word_count;        // the core's variants; 0 for the bench's (in libdiffvk_bench)
};
const ShaderVariantRow* shader_variant_rows(size_t* count);

// Adds a table of shaders embedded outside the core library (diffvk_bench's baselines): find_shader
// looks there after the core's own. Idempotent per table; thread-safe; the table must outlive the
// process (generated static arrays). Not part of embedded_shaders_hash (the pipeline-cache key).
void register_shader_table(const ShaderBlob* blobs, size_t count);

// The variant, or nullptr when that op/variant combination was not built (or not registered).
const ShaderBlob* find_shader(const char* op, bool fp16, bool subgroup);

// The names of a spec_names string ("i=NAME,..."), indexed by constant_id ("" where unnamed).
std::vector<std::string> spec_name_list(const char* spec_names);

// FNV-1a over every embedded word: part of the pipeline-cache key.
uint64_t embedded_shaders_hash();

}  // namespace diffvk
