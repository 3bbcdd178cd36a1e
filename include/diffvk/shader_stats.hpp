// diffvk — the pipelines the runtime builds and the driver's statistics of each (`diffvk shader-stats`).
// Public so that tools need no runtime-internal header (vk/gpu.hpp, model/model_kernels.hpp): the library
// opens the device, builds the kernels and collects; the caller only prints.
//
// shader_stats() builds every production pipeline the runtime would build on the selected device (a model's
// kernels, and/or the kernels of the given attention shapes) with the specialization constants the tuning
// functions pick for that device, and reads the driver's pipeline-executable statistics
// (VK_KHR_pipeline_executable_properties: registers, spills, shared memory, occupancy, ...). The device is
// opened in statistics-only mode: nothing is allocated, mapped, recorded or submitted, so this runs on null
// devices (radv with RADV_FORCE_FAMILY).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/device.hpp"

namespace diffvk {

struct ShaderStatsOptions {
  ContextOptions context;  // device selection, precision, validation
  std::string model_dir;   // the pipelines of this model (config.json only; no weights are read); "" = none
  // Attention shapes: any non-empty list asks for them. Defaults when another list is given:
  // D 64,128; H 32; Hkv 8. Pairs with H % Hkv != 0 are skipped (a note says so); D must be even.
  std::vector<uint32_t> d, heads, kv_heads;
  std::vector<uint32_t> t;  // context lengths: recorded in the shapes only (no pipeline depends on T)
  // Weight formats of the model's linears ("f16", "q8_0", "q4_0"): the model's kernels also build the
  // quantized pipelines of each block format listed (as a model loaded with those weights does).
  std::vector<std::string> weights;
  bool shapes_requested() const { return !d.empty() || !heads.empty() || !kv_heads.empty() || !t.empty(); }
  // Also read each pipeline's internal representations (the driver's IR and disassembly, where it gives them)
  // and measure its main loop (ShaderPipeline::isa, ::loop).
  bool isa = false;
};

// The main loop of a pipeline's disassembly (radv/ACO text: `BBn:` labels, `s_cbranch_* BBn` / `s_branch BBn`):
// the innermost backward-branch loop that holds (nearly, >= 90%) the most FMAs. Counts per iteration:
// instructions, VALU instructions (v_*), FMAs (v_fma*/v_fmac*/v_pk_fma* count 1 each, packed ones 2;
// v_mac_f32/v_mad_f32 1; v_wmma_*_MxNxK M·N·K / lanes), LDS loads (ds_load*/ds_read*), memory loads
// (buffer_load*/global_load*/s_buffer_load*/s_load*). found = false when the text has no loop.
struct ShaderLoop {
  bool found = false;
  uint32_t instructions = 0, valu = 0, lds_loads = 0, memory_loads = 0;
  double fma = 0;
};
ShaderLoop isa_main_loop(const std::string& disassembly, uint32_t lanes);

// ShaderStatistic and ShaderExecutable (the driver's statistics of one pipeline executable) are in
// diffvk/device.hpp: the device layer fills them, this report only collects them.

// One distinct pipeline (shader name + specialization constants) and every group that created it.
struct ShaderPipeline {
  std::string name;                 // SPIR-V variant, e.g. "diff_attn_fp16"
  std::string op;                   // shaders/<op>.comp
  std::vector<std::string> groups;  // "model DIR" / "D=.. H=.. Hkv=.." labels, in creation order
  struct Spec {
    std::string name;  // from the shader's `layout(constant_id = i)` declaration; "" when unknown
    uint32_t value = 0;
  };
  std::vector<Spec> spec;  // constant_id 0..n-1
  std::array<uint32_t, 3> workgroup{1, 1, 1};
  double compile_seconds = 0;  // the driver's vkCreateComputePipelines wall time (CPU drivers compile at first use)
  std::vector<ShaderExecutable> executables;  // empty when statistics are unavailable
  // ShaderStatsOptions::isa: the driver's text representations (name, e.g. "Assembly", and text) per executable,
  // and the main loop of the first executable's disassembly (a representation named like "*assembl*").
  struct Representation {
    uint32_t executable = 0;
    std::string name, description, text;
  };
  std::vector<Representation> isa;
  ShaderLoop loop;
};

// One group of kernels: a model's (E and I set) or one attention shape (T the requested lengths).
struct ShaderStatsShape {
  std::string group;
  bool model = false;
  uint32_t D = 0, H = 0, Hkv = 0;
  uint32_t E = 0, I = 0;    // model groups only
  std::vector<uint32_t> T;  // shape groups only
};

struct ShaderStatsReport {
  DeviceCaps device;
  bool fp16 = false;  // fp16 storage variants
  bool subgroup_arithmetic = false;
  bool statistics_available = false;  // VK_KHR_pipeline_executable_properties with pipelineExecutableInfo
  std::vector<ShaderStatsShape> shapes;
  std::vector<std::string> notes;         // skipped (H, Hkv) pairs
  std::vector<ShaderPipeline> pipelines;  // distinct, in creation order
};

// Throws Error(invalid_argument) for an odd D or when no (H, Hkv) pair is valid, and what device
// creation and config reading throw.
ShaderStatsReport shader_stats(const ShaderStatsOptions& options);

// One SPIR-V variant that the library can build a pipeline from: a row of the variant table
// (shaders/variants.cmake) at one precision and subgroup setting. Read from the table compiled into the
// library: no device.
struct ShaderVariant {
  std::string name;               // the pipeline name: op + "_fp16" / "_fp32" + "_sg" for the subgroup variant
  std::string op;                 // the table row (what kernels ask for)
  std::string source;             // "shaders/linear_row.comp"
  std::string defines;            // the row's glslc defines besides DVK_FP16 / DVK_SUBGROUP, "A=1 B=2"; "" for none
  bool fp16 = false;              // DVK_FP16
  bool subgroup = false;          // DVK_SUBGROUP: uses subgroup arithmetic
  std::string registry;           // "core" (libdiffvk) or "bench" (libdiffvk_bench: the benchmark's shaders)
  bool prebuilt = false;          // committed SPIR-V words (shaders/coopmat/spv) rather than glslc at build time
  std::vector<std::string> spec;  // specialization constant names by constant_id ("" where unnamed)
  std::string description;
  size_t words = 0;  // SPIR-V words (core variants; 0 for the bench's)
};

// Every variant of both registries, in the table's registry order.
std::vector<ShaderVariant> shader_variants();

}  // namespace diffvk
