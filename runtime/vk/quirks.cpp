// Device quirks: named flags with a one-line reason each (in the spirit of ncnn's bug database).
// A quirk is matched on vendor id, driver id and driver version; the runtime consults it by name.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "diffvk/error.hpp"
#include "vk/instance.hpp"

namespace diffvk {

namespace {
// The driver runs in this process: lavapipe's JIT targets the host's architecture.
#if defined(__aarch64__)
constexpr bool kHostIsAarch64 = true;
#else
constexpr bool kHostIsAarch64 = false;
#endif

// The LLVM major version in a llvmpipe device name ("llvmpipe (LLVM 15.0.6, 128 bits)"); 0 when absent.
int llvm_major(const std::string& name) {
  const size_t at = name.find("LLVM ");
  return at == std::string::npos ? 0 : std::atoi(name.c_str() + at + 5);
}

struct QuirkRule {
  Quirk quirk;
  bool (*applies)(const DeviceCaps&);
};

const QuirkRule kRules[] = {
    {{"broken_fp16_storage",
      "Mesa < 23 lavapipe on aarch64 advertises 16-bit storage but its JIT aborts on fp16 loads"},
     [](const DeviceCaps& c) {
       return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE && !c.fp16_arithmetic && c.storage_16bit;
     }},
    {{"half_select_crash",
      "LLVM 15's AArch64 instruction selection (Mesa 22.3 lavapipe on arm64) aborts the process (\"Cannot select: "
      "v4f32 = truncate\") on unpackHalf2x16 of a per-lane choice of half; the quantized scales' binary16 bits are "
      "converted by hand (specialization constant 60 of every pipeline, shaders/common.glsl)"},
     [](const DeviceCaps& c) {
       const int llvm = llvm_major(c.name);
       return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE && kHostIsAarch64 && llvm != 0 && llvm <= 15;
     }},
    {{"loop_iteration_limit",
      "llvmpipe silently ends every loop of an invocation after 65535 iterations in total; attention caps keys per "
      "invocation"},
     [](const DeviceCaps& c) { return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE; }},
    {{"long_unrolled_compile",
      "NVIDIA's compiler (driver 580) took 25-32 s per linear.comp pipeline whose k step unrolls to 1024 FMAs (3-5 s "
      "at 512); "
      "the matmul loops over k in bodies of 8 steps"},
     [](const DeviceCaps& c) { return c.driver_id == VK_DRIVER_ID_NVIDIA_PROPRIETARY; }},
    {{"coopmat_emulated",
      "CPU drivers (lavapipe) run cooperative matrices element by element: llama.cpp's coopmat matmul runs 5x slower "
      "than its "
      "scalar one on Mesa 26 lavapipe; the matmul keeps the register-tiled path and prefill attention its scalar "
      "kernel "
      "(tuning coopmat=on or attn_core=coopmat forces coopmat, for tests)"},
     [](const DeviceCaps& c) { return c.kind == DeviceKind::cpu && c.coopmat_m != 0; }},
    {{"coopmat_wide_subgroup_crash",
      "Mesa 26.1 lavapipe with 512-bit vectors (subgroups of 16: AVX-512 hosts, or LP_NATIVE_VECTOR_WIDTH=512) crashes "
      "in "
      "vkCreateComputePipelines on a cooperative-matrix shader (its 8x8x8 shape works at subgroups of 8); cooperative "
      "matrices are not used there"},
     [](const DeviceCaps& c) {
       return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE && c.coopmat_m != 0 && c.subgroup_size > 8;
     }},
    {{"per_key_attention",
      "CPU drivers (Mesa 22.3 gallivm) turn the key-block attention core's broadcast reads of shared memory into "
      "per-lane "
      "loops; attention streams one key at a time with Q in registers (tuning attn_core=blocks forces the block core, "
      "for tests)"},
     [](const DeviceCaps& c) { return c.kind == DeviceKind::cpu; }},
    {{"no_kv_staging",
      "CPU drivers: shared memory is ordinary memory and a barrier a coroutine switch, so staging K/V blocks in shared "
      "memory for several subgroups (Br x Bc prefill) adds copies and saves no DRAM reads (tuning attn_core=staged "
      "forces it)"},
     [](const DeviceCaps& c) { return c.kind == DeviceKind::cpu; }},
    {{"row_lane_pairs",
      "LLVM <= 15 lavapipe (Mesa 22.3): the one-row kernels run faster with two lanes per feature than one (the 134M "
      "model's decode on x86-64: f16 +19-27%, Q8_0 +7-12%, Q4_0 +5-10%); Mesa 26.1's LLVM 19 runs them as fast or "
      "faster with one, and four or eight are slower on both (BENCHMARKS.md \"Lanes per feature of the one-row "
      "kernels\")"},
     [](const DeviceCaps& c) {
       const int llvm = llvm_major(c.name);
       return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE && llvm != 0 && llvm <= 15;
     }},
    {{"no_compute_unit_count",
      "the driver exposes no SM/CU count; split-K decode uses a default of 16 parallel splits"},
     [](const DeviceCaps& c) { return c.compute_units == 0; }},
};
}  // namespace

void apply_quirks(DeviceCaps& caps) {
  caps.quirks.clear();
  for (const auto& r : kRules)
    if (r.applies(caps)) caps.quirks.push_back(r.quirk);
  if (caps.has_quirk("coopmat_wide_subgroup_crash")) {  // the driver's shapes stay listed, but none is used
    caps.coopmat_m = caps.coopmat_n = caps.coopmat_k = 0;
    caps.coopmat_note =
        "quirk coopmat_wide_subgroup_crash: lavapipe crashes compiling cooperative matrices at subgroups of " +
        std::to_string(caps.subgroup_size);
    drop_quirk(caps, "coopmat_emulated");
  }
}

std::vector<const char*> quirk_names() {
  std::vector<const char*> out;
  for (const auto& r : kRules) out.push_back(r.quirk.name);
  return out;
}

void drop_quirk(DeviceCaps& caps, const char* name) {
  caps.quirks.erase(std::remove_if(caps.quirks.begin(), caps.quirks.end(),
                                   [name](const Quirk& q) { return std::strcmp(q.name, name) == 0; }),
                    caps.quirks.end());
}

void force_quirk(DeviceCaps& caps, const std::string& name) {
  if (caps.has_quirk(name.c_str())) return;
  for (const auto& r : kRules)
    if (name == r.quirk.name) {
      caps.quirks.push_back(r.quirk);
      return;
    }
  std::string known;
  for (const auto& r : kRules) known += std::string(known.empty() ? "" : ", ") + r.quirk.name;
  throw Error(Status::invalid_argument, "unknown device quirk '" + name + "' (known: " + known + ")");
}

}  // namespace diffvk
