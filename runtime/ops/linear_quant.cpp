// Quantized one-row linear (ops/linear_quant.hpp).
#include "ops/linear_quant.hpp"

#include <cstring>

#include "platform.hpp"

namespace diffvk {

namespace {
int type_index(QuantType t) { return t == QuantType::q8_0 ? 0 : t == QuantType::q4_0 ? 1 : -1; }
}  // namespace

QuantLayout quant_layout(QuantType type, uint64_t rows, uint64_t in) {
  if (type_index(type) < 0)
    throw Error(Status::invalid_argument,
                std::string("quantized weight: format ") + quant_type_name(type) + " is not block-quantized");
  if (in == 0 || in % kQuantBlockWeights != 0)
    throw Error(Status::invalid_argument,
                "quantized weight: input width " + std::to_string(in) + " is not a positive multiple of 32");
  return QuantLayout{type, rows, in};
}

void split_quant_rows(QuantType type, uint64_t in, uint64_t rows, const uint8_t* blocks, uint8_t* scales,
                      uint8_t* quants) {
  const uint64_t nb = in / kQuantBlockWeights, bb = quant_block_bytes(type), qb = bb - 2;
  for (uint64_t b = 0; b < rows * nb; ++b) {
    std::memcpy(scales + b * 2, blocks + b * bb, 2);
    std::memcpy(quants + b * qb, blocks + b * bb + 2, qb);
  }
}

std::vector<uint8_t> pack_quant_matrix(QuantType type, uint64_t rows, uint64_t in, const uint8_t* blocks) {
  const QuantLayout l = quant_layout(type, rows, in);
  std::vector<uint8_t> out(l.bytes(), 0);
  split_quant_rows(type, in, rows, blocks, out.data(), out.data() + l.quant_offset());
  return out;
}

const char* quant_row_path_name(QuantRowPath p) { return p == QuantRowPath::int8_dot ? "int8_dot" : "dequant"; }

namespace {
// The rule both quantized kernels share: int8 where the device accelerates 4x8-bit dot products, else dequantized
// weights; a forced int8 path needs shaderIntegerDotProduct. `what` names the kernel in the error, int8/dequant
// describe its two paths in the reason.
QuantRowChoice choose_int8_or_dequant(const DeviceCaps& c, const QuantRowPath* force, const char* what,
                                      const char* int8, const char* dequant) {
  if (force) {
    if (*force == QuantRowPath::int8_dot && !c.integer_dot_product)
      throw Error(Status::unsupported,
                  std::string(what) + " needs shaderIntegerDotProduct, which '" + c.name + "' lacks");
    return {*force, std::string("forced by the caller")};
  }
  if (c.int8_dot_accelerated) return {QuantRowPath::int8_dot, std::string(int8) + " (the device accelerates them)"};
  return {QuantRowPath::dequant,
          std::string(dequant) + (c.integer_dot_product ? " (the device's 4x8-bit dot products are not accelerated)"
                                                        : " (the device has no integer dot products)")};
}
}  // namespace

QuantRowChoice choose_quant_row_path(const DeviceCaps& c, const QuantRowPath* force) {
  return choose_int8_or_dequant(c, force, "linear_row: the int8 dot-product path",
                                "int8 activations and 4x8-bit integer dot products",
                                "weights dequantized in registers");
}

// Not yet measured on a device that accelerates them (none here): the same rule as the one-row path.
QuantRowChoice choose_quant_matmul_path(const DeviceCaps& c, const QuantRowPath* force) {
  return choose_int8_or_dequant(c, force, "linear: the int8 dot-product matmul",
                                "int8 activations per block of 32 and 4x8-bit integer dot products, register tile",
                                "weights dequantized in the matmul");
}

QuantRowKernel::QuantRowKernel(Device& device, KernelOptions o, const std::vector<QuantType>& types,
                               const QuantRowPath* force)
    : device_(device), choice_(choose_quant_row_path(device.caps(), force)), fp16_(o.fp16) {
  platform::log(platform::LogLevel::info,
                std::string("linear_row (quantized): ") + quant_row_path_name(choice_.path) + ": " + choice_.reason);
  const char* shader = choice_.path == QuantRowPath::int8_dot ? "linear_row_dot" : "linear_row";
  // The dense one-row kernel's geometry (LinearKernel): one subgroup (at least 8 invocations), 8 features.
  const DeviceCaps& c = device.caps();
  const RowGeometry rg = row_geometry(c);
  geo_ = rg;
  tuned_lanes_ = force_lanes_ = device.tuning().row_lanes;  // the tuning's row_lanes (0: the kernel's choice)
  const uint32_t one_sg = o.subgroup && rg.one_sg;
  const uint32_t n32 = o.fp16 ? 2 : 1;
  for (QuantType t : types) {
    const int ti = type_index(t);
    if (ti < 0)
      throw Error(Status::invalid_argument, std::string("linear_row: no quantized kernel for ") + quant_type_name(t));
    types_[ti] = true;
  }
  const char* rope_shader = choice_.path == QuantRowPath::int8_dot ? "linear_row_dot_rope" : "linear_row_rope";
  const uint32_t vec0 = c.min_storage_buffer_offset_alignment < 16 ? 0 : 1, wg = rg.wg, nf = rg.nf;
  const bool built[2] = {types_[0], types_[1]};
  // QM (spec constant 9): Q4_0 nibbles read in place (the tuning's q4_in_place), on the dequantizing path.
  const uint32_t q4_in_place = device.tuning().q4_in_place && choice_.path != QuantRowPath::int8_dot ? 1u : 0u;
  // One pipeline set per lane-group size (LG, spec constant 8; 0 = one group), compiled on first record
  // (LazyPipeline); the sets are declared on first use.
  sets_ = std::make_unique<RowLaneSets<Pipes>>([&device, o, rg, one_sg, n32, wg, nf, vec0, shader, rope_shader, built,
                                                q4_in_place](Pipes& s, uint32_t lg) {
    const uint32_t spec_lg = lg >= wg ? 0u : lg;
    auto lazy = [&](PipelineDesc d) { return std::make_unique<LazyPipeline>(device, std::move(d), false); };
    for (int ti = 0; ti < 2; ++ti) {
      if (!built[ti]) continue;
      const uint32_t wq = uint32_t(ti + 1), qm = wq == 2 ? q4_in_place : 0u;
      for (uint32_t vec = vec0; vec < 2; ++vec)
        for (uint32_t pro = 0; pro < 3; ++pro)
          for (uint32_t x32 = 0; x32 < (pro == 2 ? 1 : n32); ++x32)
            for (uint32_t y32 = 0; y32 < n32; ++y32)
              s.row[vec][ti][pro][x32][y32] = lazy(kernel_desc(shader, o)
                                                       .with_bindings(6)
                                                       .with_push(kLinearRowPushBytes)
                                                       .with_spec({wg, nf, vec, pro, x32, y32, wq, one_sg, spec_lg, qm})
                                                       .with_subgroup_size(o.subgroup ? rg.pin : 0u));
      for (uint32_t vec = vec0; vec < 2; ++vec)
        for (uint32_t pro = 0; pro < 2; ++pro)
          for (uint32_t x32 = 0; x32 < n32; ++x32)
            s.rope[vec][ti][pro][x32] = lazy(kernel_desc(rope_shader, o)
                                                 .with_bindings(9)
                                                 .with_push(sizeof(LinearRowRopePush))
                                                 .with_spec({wg, nf, vec, pro, x32, 0u, wq, one_sg, spec_lg, qm})
                                                 .with_subgroup_size(o.subgroup ? rg.pin : 0u));
    }
  });
  sets_->get(rg.wg);
}

uint32_t QuantRowKernel::lanes_for(QuantType, uint32_t in, bool rope) const {
  const uint32_t per_step = 32;  // weights per lane step: one block in every path (linear_row.comp)
  return row_lanes(geo_, in / per_step, rope, force_lanes_);
}

std::string QuantRowKernel::row_choice(QuantType type, uint32_t in, bool rope) const {
  const char* shader = choice_.path == QuantRowPath::int8_dot ? "linear_row_dot" : "linear_row";
  return std::string(shader) + (rope ? " rope " : " ") + quant_type_name(type) + " (" +
         std::to_string(lanes_for(type, in, rope)) + " lanes per group)";
}

void QuantRowKernel::declare_row_widths(const std::vector<uint32_t>& ins) const {
  for (QuantType t : {QuantType::q8_0, QuantType::q4_0})
    if (has(t))
      for (uint32_t in : ins) {
        if (in == 0) continue;
        sets_->get(lanes_for(t, in, false));
        sets_->get(lanes_for(t, in, true));
      }
}

bool QuantRowKernel::has(QuantType t) const {
  const int ti = type_index(t);
  return ti >= 0 && types_[ti];
}

void QuantRowKernel::record(Program& program, QuantType type, BufferRange x, BufferRange w, BufferRange y,
                            const LinearRowParams& p, BufferRange residual, BufferRange norm_w,
                            BufferRange bias) const {
  if (!has(type))
    throw Error(Status::invalid_argument,
                std::string("linear_row: this kernel has no pipelines for ") + quant_type_name(type));
  const QuantLayout l = quant_layout(type, p.out, p.in);
  const bool in_place = check_linear_row_args("linear_row (quantized)", x, w, l.bytes(), y, p, residual, norm_w, fp16_);
  check_linear_bias("linear_row (quantized)", bias, p.out, y);
  const bool has_res = residual.buffer != VK_NULL_HANDLE, has_norm = p.pro == RowPrologue::rmsnorm;
  if (w.offset % 16 != 0)
    throw Error(Status::invalid_argument, "linear_row (quantized): the weight must start 16-byte aligned");
  const uint32_t vec = x.offset % 16 == 0 && (!has_norm || norm_w.offset % 16 == 0) ? 1 : 0;
  const Pipes& set = sets_->get(lanes_for(type, p.in, false));
  if (!set.row[vec][type_index(type)][0][0][0])
    throw Error(Status::invalid_argument,
                "linear_row (quantized): x and the norm weight must start 16-byte aligned on this device");
  std::vector<Arg> args{{x, Access::read}, {w, Access::read}, {y, in_place ? Access::read_write : Access::write}};
  args.push_back({has_res ? residual : x, Access::read});  // dummies: x's range, already declared read
  args.push_back({has_norm ? norm_w : x, Access::read});
  args.push_back({bias.buffer != VK_NULL_HANDLE ? bias : x, Access::read});
  const LinearRowPush push = linear_row_push(p, linear_epilogue_flags(residual, bias), uint32_t(l.quant_offset() / 16));
  uint32_t lim = device_.caps().max_workgroup_count[0];
  if (test_limit_) lim = std::min(lim, test_limit_);
  const std::array<uint32_t, 3> groups{std::max(1u, std::min((p.out + geo_.nf - 1) / geo_.nf, lim)), 1, 1};
  static const char* const labels[2][2][3] = {
      {{"linear_row q8_0", "linear_row q8_0+rmsnorm", "linear_row q8_0+silu_mul"},
       {"linear_row q4_0", "linear_row q4_0+rmsnorm", "linear_row q4_0+silu_mul"}},
      {{"linear_row q8_0 int8", "linear_row q8_0 int8+rmsnorm", "linear_row q8_0 int8+silu_mul"},
       {"linear_row q4_0 int8", "linear_row q4_0 int8+rmsnorm", "linear_row q4_0 int8+silu_mul"}}};
  const uint32_t pro = static_cast<uint32_t>(p.pro), x32 = fp16_ && p.x_elem == Elem::f32,
                 y32 = fp16_ && p.y_elem == Elem::f32;
  const int ti = type_index(type);
  program.dispatch(*set.row[vec][ti][pro][x32][y32], std::move(args), &push, sizeof push, groups,
                   labels[choice_.path == QuantRowPath::int8_dot][ti][pro]);
}

void QuantRowKernel::record_rope(Program& program, QuantType type, BufferRange x, BufferRange w, BufferRange q_out,
                                 const LinearRowParams& p, BufferRange norm_w, const RowRope& r) const {
  if (!has(type))
    throw Error(Status::invalid_argument,
                std::string("linear_row_rope: this kernel has no pipelines for ") + quant_type_name(type));
  const QuantLayout l = quant_layout(type, p.out, p.in);
  std::vector<Arg> args =
      row_rope_args("linear_row_rope (quantized)", x, w, l.bytes(), q_out, p, norm_w, r, fp16_, geo_.nf);
  const bool has_norm = p.pro == RowPrologue::rmsnorm;
  if (w.offset % 16 != 0)
    throw Error(Status::invalid_argument, "linear_row_rope (quantized): the weight must start 16-byte aligned");
  const uint32_t vec = x.offset % 16 == 0 && (!has_norm || norm_w.offset % 16 == 0) ? 1 : 0;
  const int ti = type_index(type);
  const Pipes& set = sets_->get(lanes_for(type, p.in, true));
  if (!set.rope[vec][ti][0][0])
    throw Error(Status::invalid_argument,
                "linear_row_rope (quantized): x and the norm weight must start 16-byte aligned on this device");
  const LinearRowRopePush push = linear_row_rope_push(p, r, uint32_t(l.quant_offset() / 16));
  uint32_t lim = device_.caps().max_workgroup_count[0];
  if (test_limit_) lim = std::min(lim, test_limit_);
  const std::array<uint32_t, 3> groups{std::max(1u, std::min((p.out + geo_.nf - 1) / geo_.nf, lim)), 1, 1};
  static const char* const labels[2][2] = {{"linear_row q8_0+rope_kv", "linear_row q8_0+rmsnorm+rope_kv"},
                                           {"linear_row q4_0+rope_kv", "linear_row q4_0+rmsnorm+rope_kv"}};
  const uint32_t x32 = fp16_ && p.x_elem == Elem::f32;
  program.dispatch(*set.rope[vec][ti][has_norm ? 1 : 0][x32], std::move(args), &push, sizeof push, groups,
                   labels[ti][has_norm ? 1 : 0]);
}

}  // namespace diffvk
