// diffvk_bench: the case tables (op_cases.hpp). The conformance lists are the shape sweeps the op tests
// ran before issue 18 (odd sizes, padded strides, every residual form, float32 arguments), crossed with
// each quirk the op has; the bench lists are a few model-sized shapes of the same ops.
#include "bench/op_cases.hpp"

#include "diffvk/error.hpp"

namespace diffvk::bench {

namespace {

const char* res_name(OpResidual r) { return r == OpResidual::none ? "" : r == OpResidual::separate ? " +r" : " +=r"; }
const char* pro_name(RowPrologue p) { return p == RowPrologue::none ? "" : p == RowPrologue::rmsnorm ? " rmsnorm" : " silu_mul"; }

// Names every field that is not a default, so a failing case can be found in the table.
std::string describe(const OpCase& c) {
  std::string s = c.fp16 ? "fp16 " : "fp32 ";
  if (c.op == "linear") {
    s += strf("%ux%u->%u", c.rows, c.in, c.out);
    if (c.x_pad || c.y_pad) s += strf(" pad %u/%u", c.x_pad, c.y_pad);
    if (c.weights != QuantType::f16) s += std::string(" ") + quant_type_name(c.weights);
    if (c.int8_dot) s += " int8-dot";
  } else if (c.op == "linear_row") {
    s += strf("%u->%u%s", c.in, c.out, pro_name(c.pro));
    if (c.weights != QuantType::f16) s += std::string(" ") + quant_type_name(c.weights);
    if (c.int8_dot) s += " int8-dot";
  } else if (c.op == "head_rmsnorm") {
    s += strf("rows=%u heads=%u D=%u", c.rows, c.in, c.out);
  } else if (c.op == "silu_mul") {
    s += strf("rows=%u I=%u", c.rows, c.out);
  } else if (c.op == "rope_kv") {
    s += strf("H=%u/%u D=%u capacity=%u", c.in, c.Hkv, c.out, c.capacity);
    for (const auto& [pos0, rows] : c.chunks) s += strf(" [%u+%u]", pos0, rows);
  } else if (c.op == "kv_shift") {
    s += strf("%sHkv=%u D=%u capacity=%u held=%u keep=%u discard=%u", c.v2 ? "v2 " : "", c.Hkv, c.out, c.capacity, c.in, c.pos0, c.rows);
  } else if (c.op == "diff_attn") {
    s += strf("%s H=%u/%u D=%u S=%u pos0=%u lambda=%g", c.decode ? "decode" : "prefill", c.in, c.Hkv, c.out, c.rows, c.pos0, c.lambda);
    if (c.max_splits) s += " max-splits";
    if (c.one_split) s += " one-split";
  } else if (c.op == "diff_v2_attn") {
    s += strf("%s H=%u/%u D=%u S=%u pos0=%u z-std=%g", c.decode ? "decode" : "prefill", c.in, c.Hkv, c.out, c.rows, c.pos0, c.lambda);
    if (c.max_splits) s += " max-splits";
  } else if (c.op == "attn_probs") {
    if (c.v2) s += "v2 ";
    s += strf("H=%u/%u D=%u T=%u heads=%u+%u", c.in, c.Hkv, c.out, c.rows, c.head0, c.heads);
    for (const auto& [pos0, rows] : c.chunks) s += strf(" [%u+%u]", pos0, rows);
    if (c.dynamic_pos) s += " dynamic-pos";
    if (c.v2) s += strf(" z-std=%g", c.lambda);
  } else if (c.op == "embed") {
    s += strf("rows=%u E=%u vocab=%u", c.rows, c.out, c.in);
    if (c.parts > 1) s += strf(" parts=%u", c.parts);
    if (c.weights != QuantType::f16) s += std::string(" ") + quant_type_name(c.weights);
  }
  s += res_name(c.residual);
  if (c.x_f32) s += " x32";
  if (c.y_f32) s += " y32";
  if (c.op == "linear" && c.variant == int(kLinearCoopVariant)) s += " coopmat";
  else if (c.variant >= 0) s += strf(" variant=%d", c.variant);
  if (!c.subgroup) s += " shared-reduction";
  if (c.scalar_loads) s += " scalar-loads";
  if (c.wg_limit_x || c.wg_limit_y) s += strf(" wg-limit=%ux%u", c.wg_limit_x, c.wg_limit_y);
  if (c.x_misaligned) s += " x-misaligned";
  if (c.row_lanes) s += strf(" lanes=%u", c.row_lanes);
  if (c.kv_q8) s += " kv=q8_0";
  return s;
}

struct Builder {
  std::string op;
  std::vector<OpCase> cases;
  uint64_t seed;
  Builder(std::string o, uint64_t s) : op(std::move(o)), seed(s) {}
  // Adds `c` once per precision.
  void add(OpCase c) {
    c.op = op;
    for (bool fp16 : {false, true}) {
      c.fp16 = fp16;
      c.seed = seed++;
      c.name = describe(c);
      cases.push_back(c);
    }
  }
  // Adds `c` in fp16 only (paths that exist only with fp16 storage).
  void add_fp16(OpCase c) {
    c.op = op;
    c.fp16 = true;
    c.seed = seed++;
    c.name = describe(c);
    cases.push_back(c);
  }
};

OpCase lin(uint32_t rows, uint32_t in, uint32_t out, uint32_t xp, uint32_t yp, OpResidual r, bool y32 = false) {
  OpCase c;
  c.rows = rows, c.in = in, c.out = out, c.x_pad = xp, c.y_pad = yp, c.residual = r, c.y_f32 = y32;
  return c;
}

constexpr OpResidual kNone = OpResidual::none, kSep = OpResidual::separate, kInPlace = OpResidual::in_place;

std::vector<OpCase> linear_cases(OpMode mode) {
  Builder b("linear", 5000);
  if (mode == OpMode::bench) {
    b.add(lin(1, 2048, 2048, 0, 0, kNone));
    b.add(lin(8, 2048, 2048, 0, 0, kNone));
    b.add(lin(64, 2048, 2048, 0, 0, kInPlace, true));
    b.add(lin(64, 2048, 5632, 0, 0, kNone));
    b.add(lin(128, 768, 2304, 0, 0, kNone));
    b.add(lin(512, 2048, 2048, 0, 0, kNone));
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {  // issue 19: quantized weights, dequantized in registers
      OpCase m = lin(512, 2048, 2048, 0, 0, kNone);
      m.weights = q;
      b.add(m);
    }
    // Issue 19: the int8 dot-product matmul beside the dequantizing one (skipped without the feature).
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
      for (const OpCase& s : {lin(64, 2048, 2048, 0, 0, kNone), lin(128, 2048, 2048, 0, 0, kNone), lin(64, 5632, 2048, 0, 0, kNone)})
        for (bool i8 : {false, true}) {
          OpCase m = s;
          m.weights = q, m.int8_dot = i8;
          b.add(m);
        }
    return b.cases;
  }
  // Odd shapes, padded strides, every residual form; float32 y / residual (issue 13) on every path
  // (<= 8 rows: matrix-vector; more: both tiles).
  const OpCase shapes[] = {
      lin(1, 16, 8, 0, 0, kNone),          lin(1, 136, 200, 3, 1, kSep),      lin(2, 40, 24, 0, 0, kInPlace),
      lin(2, 64, 8, 5, 0, kNone),          lin(5, 64, 72, 0, 3, kSep),        lin(5, 40, 200, 0, 0, kNone),
      lin(8, 136, 200, 0, 0, kInPlace),    lin(8, 16, 72, 2, 2, kSep),        lin(9, 16, 8, 0, 0, kSep),
      lin(9, 136, 72, 3, 0, kNone),        lin(33, 40, 24, 0, 5, kInPlace),   lin(33, 64, 200, 0, 0, kNone),
      lin(33, 136, 24, 1, 1, kSep),        lin(130, 136, 200, 0, 0, kSep),    lin(130, 16, 8, 0, 0, kNone),
      lin(130, 64, 72, 7, 0, kInPlace),    lin(130, 40, 24, 0, 0, kNone),     lin(17, 48, 37, 0, 0, kSep),
      lin(65, 24, 101, 0, 2, kNone),       lin(70, 37, 40, 1, 0, kSep),
      lin(1, 64, 72, 0, 0, kInPlace, true), lin(5, 40, 24, 0, 3, kSep, true), lin(33, 136, 72, 1, 0, kInPlace, true),
      lin(130, 64, 200, 0, 2, kSep, true), lin(17, 48, 37, 0, 0, kNone, true),
  };
  // The kernel's own path choice.
  for (const OpCase& s : shapes) b.add(s);
  // The matrix-vector path (candidate 0) with the shared-memory tree reduction.
  for (OpCase s : shapes)
    if (s.rows <= kLinearVecMaxRows) {
      s.variant = 0, s.subgroup = false;
      b.add(s);
    }
  // Every tile variant (LinearKernel has 4 candidates on every device: tests/ops/test_linear.cpp checks it),
  // including small row counts through the matrix-matrix shader and a shape spanning several large tiles.
  const OpCase spread[] = {lin(1, 40, 72, 0, 0, kSep), lin(8, 64, 24, 2, 0, kNone), lin(9, 136, 8, 0, 0, kInPlace),
                           lin(130, 40, 200, 0, 1, kNone), lin(200, 64, 140, 3, 0, kSep)};
  for (int v = 0; v < 4; ++v)
    for (OpCase s : spread)
      if (v != 0 || s.rows <= kLinearVecMaxRows) {
        s.variant = v;
        b.add(s);
      }
  // The matrix-matrix tiles with the 4-wide loads turned off.
  for (int v = 1; v < 4; ++v)
    for (OpCase s : shapes)
      if (s.rows > kLinearVecMaxRows) {
        s.variant = v, s.scalar_loads = true;
        b.add(s);
      }
  // Grid-stride loops: workgroup counts capped below the device limit, one case per candidate.
  const OpCase capped[] = {lin(3, 40, 72, 0, 0, kSep), lin(130, 40, 200, 0, 0, kNone), lin(100, 24, 72, 1, 2, kInPlace),
                           lin(100, 40, 200, 0, 0, kSep)};
  for (int v = 0; v < 4; ++v) {
    OpCase s = capped[v];
    s.variant = v, s.wg_limit_x = 2, s.wg_limit_y = 1;
    b.add(s);
  }
  // Quantized weights (issue 19, record_quant: the register-tiled shader with WQ): in = 32·k (k odd
  // too), odd row and column counts, padded strides, every residual form, float32 y, elementwise loads
  // (x misaligned by its stride), a capped grid and a long reduction.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    const OpCase qs[] = {lin(1, 32, 8, 0, 0, kNone),       lin(5, 96, 37, 0, 3, kSep),    lin(17, 160, 72, 8, 0, kInPlace),
                         lin(33, 64, 200, 3, 1, kNone),   lin(130, 224, 24, 0, 0, kSep), lin(65, 352, 101, 0, 2, kNone, true),
                         lin(20, 16384, 24, 0, 0, kNone)};
    for (OpCase s : qs) {
      s.weights = q;
      b.add(s);
    }
    OpCase g = lin(100, 96, 200, 0, 0, kSep);
    g.weights = q, g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add(g);
    OpCase e = lin(33, 64, 72, 0, 0, kNone);
    e.weights = q, e.scalar_loads = true;
    b.add(e);
  }
  // A long reduction (in = 16384) on every path: llvmpipe's loop-iteration budget (quirk loop_iteration_limit)
  // would silently truncate a reduction that needed more iterations per invocation.
  for (int v = 0; v < 4; ++v) {
    OpCase s = lin(v == 0 ? 3 : 20, 16384, 24, 0, 0, kNone);
    s.variant = v;
    b.add(s);
  }
  // Cooperative matrices (issue 20; fp16 only; skipped on devices without a usable shape): partial tiles
  // on every side (rows, out and in not multiples of the matrix or tile sizes), padded strides, every
  // residual form, float32 y, elementwise loads, a capped grid, a long reduction. Seeds come after every
  // other case's, so adding these changed none of them.
  {
    const OpCase cs[] = {lin(1, 40, 72, 0, 0, kSep),       lin(17, 48, 37, 0, 0, kSep),   lin(33, 136, 24, 1, 1, kSep),
                         lin(70, 37, 40, 1, 0, kSep),     lin(130, 64, 200, 0, 2, kSep, true), lin(65, 24, 101, 0, 2, kInPlace),
                         lin(200, 64, 140, 3, 0, kNone),  lin(130, 136, 72, 7, 0, kInPlace, true)};
    for (OpCase s : cs) {
      s.variant = int(kLinearCoopVariant);
      b.add_fp16(s);
    }
    OpCase e = lin(33, 64, 72, 0, 0, kNone);
    e.variant = int(kLinearCoopVariant), e.scalar_loads = true;
    b.add_fp16(e);
    OpCase g = lin(100, 40, 200, 0, 0, kSep);
    g.variant = int(kLinearCoopVariant), g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add_fp16(g);
    OpCase l = lin(20, 16384, 24, 0, 0, kNone);
    l.variant = int(kLinearCoopVariant);
    b.add_fp16(l);
  }
  // Quantized weights through the shared-memory tiles (linear.comp with WQ: W dequantized on the way into
  // shared memory; the GPU prefill path), on every device by variant: partial tiles, padded strides, float32
  // y, a long reduction, elementwise x loads (variant 1) and a capped grid (variant 2).
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
    for (int v = 1; v <= 2; ++v) {
      const OpCase qs[] = {lin(33, 64, 200, 3, 1, kNone), lin(130, 224, 24, 0, 0, kSep), lin(65, 352, 101, 0, 2, kInPlace, true),
                           lin(20, 16384, 24, 0, 0, kNone)};
      for (OpCase c : qs) {
        c.weights = q, c.variant = v;
        b.add(c);
      }
      OpCase e = lin(33, 96, 72, 0, 0, kSep);
      e.weights = q, e.variant = v;
      if (v == 1) e.scalar_loads = true;
      else e.wg_limit_x = 2, e.wg_limit_y = 1;
      b.add(e);
    }
  // The int8 dot-product matmul (issue 19; record_quant_path int8_dot, linear_reg_dot.comp; skipped without
  // shaderIntegerDotProduct), against the reference on the dequantized weights and the int8-rounded
  // activations: 2..70 rows (past one 16-row tile), in = 32·k not a multiple of 256, odd out, padded strides
  // (elementwise x loads), every residual form, float32 y, a capped grid and a long reduction. Seeds after
  // every other case's.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    const OpCase qs[] = {lin(2, 32, 8, 0, 0, kNone),       lin(5, 96, 37, 0, 3, kSep),     lin(17, 160, 72, 8, 0, kInPlace),
                         lin(33, 64, 200, 3, 1, kNone),   lin(70, 224, 41, 0, 0, kSep),   lin(65, 352, 101, 0, 2, kInPlace, true),
                         lin(3, 480, 23, 0, 0, kSep, true), lin(20, 16384, 24, 0, 0, kNone)};
    for (OpCase s : qs) {
      s.weights = q, s.int8_dot = true;
      b.add(s);
    }
    OpCase g = lin(100, 96, 200, 0, 0, kSep);
    g.weights = q, g.int8_dot = true, g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add(g);
    OpCase e = lin(33, 64, 72, 0, 0, kNone);
    e.weights = q, e.int8_dot = true, e.scalar_loads = true;
    b.add(e);
    OpCase n = lin(40, 96, 72, 0, 0, kSep);  // a kernel built without subgroup operations (the register tile unpinned)
    n.weights = q, n.int8_dot = true, n.subgroup = false;
    b.add(n);
  }
  return b.cases;
}

OpCase row(uint32_t in, uint32_t out, RowPrologue p, OpResidual r, bool x32 = false, bool y32 = false) {
  OpCase c;
  c.in = in, c.out = out, c.pro = p, c.residual = r, c.x_f32 = x32, c.y_f32 = y32;
  return c;
}

}  // namespace

std::vector<OpCase> matmul_table_cases(bool full, bool coopmat) {
  Builder b("linear", 7000);
  if (!full) {
    b.add(lin(512, 2048, 2048, 0, 0, kNone));
    if (coopmat) {  // the cooperative-matrix kernel beside the tuning's choice (fp16 only)
      OpCase c = lin(512, 2048, 2048, 0, 0, kNone);
      c.variant = int(kLinearCoopVariant);
      b.add_fp16(c);
    }
    return b.cases;
  }
  const uint32_t kn[][2] = {{768, 768}, {768, 2304}, {2048, 768}, {2048, 2048}, {4096, 4096}};
  for (QuantType q : {QuantType::f16, QuantType::q8_0, QuantType::q4_0})
    for (const auto& s : kn)
      for (uint32_t m : {1u, 8u, 64u, 512u}) {
        OpCase c = lin(m, s[0], s[1], 0, 0, kNone);
        c.weights = q;
        b.add(c);
      }
  // The cooperative-matrix kernel at the f16 shapes past one register tile of rows (its weights are f16 only).
  if (coopmat)
    for (const auto& s : kn)
      for (uint32_t m : {64u, 512u}) {
        OpCase c = lin(m, s[0], s[1], 0, 0, kNone);
        c.variant = int(kLinearCoopVariant);
        b.add_fp16(c);
      }
  return b.cases;
}

namespace {

std::vector<OpCase> linear_row_cases(OpMode mode) {
  Builder b("linear_row", 9100);
  const RowPrologue none = RowPrologue::none, rms = RowPrologue::rmsnorm, silu = RowPrologue::silu_mul;
  if (mode == OpMode::bench) {
    b.add(row(2048, 2048, rms, kNone, true, false));
    b.add(row(2048, 11264, rms, kNone, true, false));
    b.add(row(5632, 2048, silu, kInPlace, false, true));
    b.add(row(2048, 32000, rms, kNone, true, true));
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0})  // issue 19: the same shapes over quantized weights
      for (bool i8 : {false, true}) {  // dequantizing in registers, then int8 dot products (where the device has them)
        OpCase a = row(2048, 11264, rms, kNone, true, false), d = row(5632, 2048, silu, kInPlace, false, true);
        a.weights = d.weights = q;
        a.int8_dot = d.int8_dot = i8;
        b.add(a);
        b.add(d);
      }
    return b.cases;
  }
  const OpCase shapes[] = {
      row(16, 8, none, kNone),        row(256, 200, none, kSep),   row(40, 24, none, kInPlace),
      row(64, 1, none, kNone),        row(136, 13, rms, kNone),    row(256, 832, rms, kNone),
      row(24, 71, rms, kSep),         row(7, 9, none, kSep),       row(13, 5, rms, kNone),
      row(704, 256, silu, kInPlace),  row(88, 41, silu, kNone),    row(9, 17, silu, kSep),
      row(256, 256, rms, kInPlace),   row(1000, 3, none, kNone),
      // float32 x (the residual stream under the norm) and float32 y + residual (the residual add, logits)
      row(256, 200, rms, kSep, true, true), row(136, 13, rms, kNone, true, false), row(40, 24, none, kInPlace, false, true),
      row(704, 256, silu, kInPlace, false, true), row(13, 5, none, kSep, true, true),
  };
  for (bool subgroup : {true, false}) {
    for (OpCase s : shapes)
      for (bool scalar : {false, true}) {
        s.subgroup = subgroup, s.scalar_loads = scalar;
        b.add(s);
      }
    // A grid-stride over the feature groups (fewer workgroups than groups).
    for (OpCase s : {row(256, 200, rms, kSep), row(45, 77, silu, kInPlace)}) {
      s.subgroup = subgroup, s.wg_limit_x = 3, s.wg_limit_y = 1;
      b.add(s);
    }
    // x not 16-byte aligned: the kernel must fall back to elementwise loads by itself.
    OpCase m = row(256, 24, none, kNone);
    m.subgroup = subgroup, m.x_misaligned = true;
    b.add(m);
  }
  // Quantized weights (issue 19): in = 32·k with k odd, out not a multiple of 8 (the last feature group is
  // partial), every prologue and residual form, float32 x / y, both reductions, a capped grid.
  const OpCase qshapes[] = {
      row(32, 5, none, kNone),        row(96, 13, none, kSep),      row(160, 37, none, kInPlace),
      row(224, 71, rms, kNone),       row(96, 13, rms, kSep),       row(352, 9, rms, kInPlace),
      row(96, 21, silu, kNone),       row(160, 13, silu, kInPlace), row(32, 3, silu, kSep),
      row(224, 37, rms, kSep, true, true), row(96, 13, none, kInPlace, false, true), row(160, 11, silu, kInPlace, false, true),
  };
  // Each twice: dequantizing in registers, and the int8 dot-product path (skipped without the feature).
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
    for (bool i8 : {false, true}) {
      for (bool subgroup : {true, false})
        for (OpCase s : qshapes) {
          s.weights = q, s.subgroup = subgroup, s.int8_dot = i8;
          b.add(s);
        }
      OpCase g = row(96, 77, rms, kSep);
      g.weights = q, g.wg_limit_x = 3, g.int8_dot = i8;
      b.add(g);
      OpCase m = row(96, 13, rms, kNone);  // x misaligned: the elementwise-load variant (devices with alignment < 16)
      m.weights = q, m.x_misaligned = true, m.int8_dot = i8;
      b.add(m);
      OpCase l = row(16384, 13, rms, kSep);  // a long reduction
      l.weights = q, l.int8_dot = i8;
      b.add(l);
    }
  // Lane groups (issue 21 item 5: a workgroup split into groups of LG lanes, each on consecutive features),
  // forced on devices whose choice is one group (CPU drivers): odd out, widths with fewer load steps than
  // lanes, every prologue, float32 x / y, both reductions, scalar loads, a capped grid, quantized rows.
  const OpCase lshapes[] = {
      row(16, 13, none, kNone), row(24, 37, rms, kSep), row(40, 9, silu, kInPlace),
      row(256, 21, rms, kSep, true, true), row(64, 71, none, kInPlace, false, true), row(200, 5, silu, kSep),
  };
  for (uint32_t lanes : {1u, 2u, 4u})
    for (bool subgroup : {true, false}) {
      for (OpCase s : lshapes) {
        s.row_lanes = lanes, s.subgroup = subgroup;
        b.add(s);
      }
      OpCase sc = row(24, 19, rms, kSep);
      sc.row_lanes = lanes, sc.subgroup = subgroup, sc.scalar_loads = true;
      b.add(sc);
      OpCase g = row(48, 77, silu, kSep);
      g.row_lanes = lanes, g.subgroup = subgroup, g.wg_limit_x = 3, g.wg_limit_y = 1;
      b.add(g);
      for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
        for (bool i8 : {false, true})
          for (OpCase s : {row(96, 13, rms, kSep), row(64, 37, silu, kInPlace, false, true), row(32, 5, none, kNone)}) {
            s.row_lanes = lanes, s.subgroup = subgroup, s.weights = q, s.int8_dot = i8;
            b.add(s);
          }
    }
  // in = 16384: loop iterations per invocation stay within llvmpipe's budget (quirk loop_iteration_limit).
  b.add(row(16384, 24, rms, kSep));
  OpCase l = row(16384, 24, none, kNone);
  l.scalar_loads = true;
  b.add(l);
  return b.cases;
}

OpCase rows_out(uint32_t rows, uint32_t out, uint32_t in = 0, uint32_t parts = 1) {
  OpCase c;
  c.rows = rows, c.out = out, c.in = in, c.parts = parts;
  return c;
}

// A headwise norm: `heads` heads of width D per row (in = heads, out = D).
OpCase norm(uint32_t heads, uint32_t D, uint32_t rows, bool x32 = false) {
  OpCase c = rows_out(rows, D, heads);
  c.x_f32 = x32;
  return c;
}

std::vector<OpCase> head_rmsnorm_cases(OpMode mode) {
  Builder b("head_rmsnorm", 1234);
  if (mode == OpMode::bench) {
    b.add(norm(16, 64, 1));
    b.add(norm(16, 64, 512));
    b.add(norm(1, 1024, 512, true));  // a block norm over a 2048-wide residual stream
    return b.cases;
  }
  const OpCase shapes[] = {norm(1, 16, 1),   norm(3, 32, 7),  norm(8, 64, 300), norm(5, 128, 33), norm(2, 16, 129),
                           norm(7, 32, 2),   norm(4, 64, 65), norm(1, 128, 300), norm(6, 16, 257),
                           // float32 input (the model's block norms over the residual stream, issue 13)
                           norm(1, 128, 9, true), norm(3, 32, 7, true), norm(1, 16, 1, true)};
  for (bool subgroup : {true, false})
    for (OpCase s : shapes) {
      s.subgroup = subgroup;
      b.add(s);
    }
  return b.cases;
}

std::vector<OpCase> silu_mul_cases(OpMode mode) {
  Builder b("silu_mul", 3300);
  if (mode == OpMode::bench) {
    b.add(rows_out(1, 5632));
    b.add(rows_out(256, 5632));
    return b.cases;
  }
  for (const OpCase& s : {rows_out(1, 1), rows_out(1, 200), rows_out(3, 7), rows_out(17, 64), rows_out(130, 37),
                          rows_out(2, 1000), rows_out(65, 129)})
    b.add(s);
  return b.cases;
}

std::vector<OpCase> embed_cases(OpMode mode) {
  Builder b("embed", 4400);
  if (mode == OpMode::bench) {
    b.add(rows_out(1, 2048, 4096));  // the table size does not change the traffic (only the gathered rows move)
    b.add(rows_out(256, 2048, 4096));
    return b.cases;
  }
  // The tokens include ids past the vocabulary (they embed to zeros); parts > 1: the table split by rows
  // (one dispatch per part, as for a table beyond the binding range).
  for (const OpCase& s : {rows_out(1, 16, 5), rows_out(3, 7, 11), rows_out(17, 64, 100), rows_out(130, 37, 64),
                          rows_out(9, 200, 300, 2), rows_out(33, 24, 257, 3), rows_out(2, 1000, 8, 2)})
    b.add(s);
  // Quantized tables (issue 19): E a multiple of 32, split tables too; against the dequantized values.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
    for (OpCase s : {rows_out(17, 64, 100), rows_out(9, 96, 300, 2), rows_out(33, 32, 257, 3), rows_out(1, 1024, 5)}) {
      s.weights = q;
      b.add(s);
    }
  return b.cases;
}

OpCase rope(uint32_t H, uint32_t Hkv, uint32_t D, uint32_t capacity, std::vector<std::pair<uint32_t, uint32_t>> chunks) {
  OpCase c;
  c.in = H, c.Hkv = Hkv, c.out = D, c.capacity = capacity, c.chunks = std::move(chunks);
  c.rows = 0;
  for (const auto& ch : c.chunks) c.rows += ch.second;
  return c;
}

std::vector<OpCase> rope_kv_cases(OpMode mode) {
  Builder b("rope_kv", 9100);
  if (mode == OpMode::bench) {
    b.add(rope(16, 4, 64, 4096, {{2047, 1}}));   // a decode step
    b.add(rope(16, 4, 64, 4096, {{0, 512}}));    // a prefill chunk
    return b.cases;
  }
  // Cache rows outside [pos0, pos0 + rows) must keep their pre-filled pattern bit for bit.
  const OpCase shapes[] = {
      rope(4, 2, 16, 8, {{0, 5}}),        // prefill from 0, rows after it untouched
      rope(4, 2, 32, 16, {{3, 7}}),       // chunk after a prefix
      rope(8, 1, 16, 50, {{10, 33}}),     // GQA 8:1
      rope(2, 2, 64, 20, {{17, 1}}),      // decode step
      rope(2, 2, 32, 9, {{0, 9}}),        // fills the cache exactly
      rope(8, 1, 64, 12, {{5, 3}}),
      rope(4, 2, 64, 140, {{2, 130}}),    // many rows
      rope(2, 2, 16, 24, {{0, 6}, {6, 4}, {10, 1}, {11, 1}}),  // prefill, chunked prefill, two decode steps
  };
  for (const OpCase& s : shapes) b.add(s);
  // Grid-stride loops: workgroup counts capped below the device limit.
  OpCase capped = rope(8, 1, 32, 40, {{4, 9}});
  capped.wg_limit_x = 1, capped.wg_limit_y = 2;
  b.add(capped);
  // Q8_0 KV cache (issue 21 item 4): rows of 2D = 32 (one block, a padded scale word), 64, 96 (an odd
  // block count), 128; chunked prefill and decode; grid-stride loops.
  for (OpCase s : {rope(4, 2, 16, 8, {{0, 5}}), rope(8, 1, 32, 50, {{10, 33}}), rope(2, 2, 48, 20, {{17, 1}}),
                   rope(4, 2, 64, 24, {{0, 6}, {6, 4}, {10, 1}}), rope(8, 1, 32, 40, {{4, 9}})}) {
    s.kv_q8 = true;
    if (s.chunks.size() == 1 && s.chunks[0].first == 4) s.wg_limit_x = 1, s.wg_limit_y = 2;
    b.add(s);
  }
  return b.cases;
}

OpCase shift(uint32_t Hkv, uint32_t D, uint32_t capacity, uint32_t held, uint32_t keep, uint32_t discard) {
  OpCase c;
  c.Hkv = Hkv, c.out = D, c.capacity = capacity, c.in = held, c.pos0 = keep, c.rows = discard;
  return c;
}

std::vector<OpCase> kv_shift_cases(OpMode mode) {
  Builder b("kv_shift", 9500);
  if (mode == OpMode::bench) {
    b.add(shift(4, 64, 4096, 4096, 4, 2046));  // the shift policy at a full 4096 context: half of what follows keep
    return b.cases;
  }
  // Rows below keep and from held - discard on must keep their pre-filled pattern bit for bit.
  const OpCase shapes[] = {
      shift(1, 8, 40, 40, 4, 18),    // one pass (the 18 moved rows fit in d)
      shift(3, 6, 37, 33, 5, 7),     // odd shapes; 21 moved rows in three ordered passes of <= 7
      shift(2, 16, 64, 64, 0, 1),    // d = 1: 63 passes, keep = 0
      shift(2, 32, 130, 129, 17, 50),
      shift(1, 64, 20, 12, 2, 10),   // nothing moves: the last 10 rows go
  };
  for (const OpCase& s : shapes) b.add(s);
  OpCase capped = shift(4, 16, 50, 45, 3, 20);  // grid-stride loops
  capped.wg_limit_x = 1, capped.wg_limit_y = 2;
  b.add(capped);
  // Q8_0 KV cache: K blocks re-rotated and quantized again, V copied (rows of 32, 96 and 128).
  for (OpCase s : {shift(1, 16, 40, 40, 4, 18), shift(3, 48, 37, 33, 5, 7), shift(2, 64, 64, 64, 0, 1), shift(4, 16, 50, 45, 3, 20)}) {
    s.kv_q8 = true;
    if (s.Hkv == 4) s.wg_limit_x = 1, s.wg_limit_y = 2;
    b.add(s);
  }
  // DIFF V2's caches: rows of D (one head per row), f16/f32 and Q8_0 (D = 32, 64, 96).
  for (OpCase s : {shift(3, 6, 37, 33, 5, 7), shift(2, 16, 64, 64, 0, 1), shift(1, 32, 40, 40, 4, 18), shift(2, 96, 30, 29, 3, 11)}) {
    s.v2 = true;
    b.add(s);
    if (s.out % 32 == 0) {
      s.kv_q8 = true;
      b.add(s);
    }
  }
  return b.cases;
}

OpCase attn(uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t pos0, double lambda, bool decode, bool max_splits = false) {
  OpCase c;
  c.in = H, c.Hkv = Hkv, c.out = D, c.rows = S, c.pos0 = pos0, c.lambda = lambda, c.decode = decode, c.max_splits = max_splits;
  return c;
}

std::vector<OpCase> diff_attn_cases(OpMode mode) {
  Builder b("diff_attn", 100);
  if (mode == OpMode::bench) {
    b.add(attn(16, 4, 64, 1, 2047, 0.5, true));  // a decode step at T = 2048
    b.add(attn(16, 4, 64, 512, 0, 0.5, false));  // a 512-row prefill
    // The Q8_0 KV cache beside the storage type (issue 21 item 4): a decode step at T = 4096, and the prefill.
    OpCase d4k = attn(16, 4, 64, 1, 4095, 0.5, true), p512 = attn(16, 4, 64, 512, 0, 0.5, false);
    b.add(d4k);
    d4k.kv_q8 = p512.kv_q8 = true;
    b.add(d4k);
    b.add(p512);
    return b.cases;
  }
  // Odd S and T, GQA n_rep 1..64, lambda < 0 and > 1, D = 2/6/8/12/16/20/32/64/128 (16-byte, 4-element and
  // element-wise loads).
  const OpCase prefill[] = {
      attn(1, 1, 16, 1, 0, 0.3, false),    attn(2, 2, 32, 7, 0, -0.4, false), attn(4, 2, 16, 33, 0, 1.3, false),
      attn(4, 1, 32, 17, 0, 0.8, false),   attn(8, 1, 16, 9, 0, 0.5, false),  attn(2, 1, 64, 40, 0, 0.6, false),
      attn(2, 2, 128, 19, 0, 0.2, false),  attn(8, 2, 16, 129, 0, 0.7, false),
      attn(1, 1, 128, 900, 0, 0.4, false),  // long: beyond llvmpipe's per-invocation loop budget (quirk loop_iteration_limit)
      // D not a multiple of 8 (fp16) or 4 (fp32): element-wise loads instead of 16-byte chunks
      attn(3, 3, 6, 11, 0, 0.5, false),    attn(4, 1, 12, 13, 0, -0.7, false), attn(2, 1, 20, 9, 0, 0.9, false),
      attn(2, 2, 2, 5, 0, 0.3, false),
      attn(64, 1, 8, 3, 0, 0.6, false),    // GQA n_rep = 64: slots split across workgroups
  };
  const OpCase chunked[] = {  // prefill of S rows after pos0 cached rows
      attn(2, 2, 32, 7, 9, 0.5, false), attn(4, 2, 16, 13, 33, -0.9, false), attn(8, 1, 16, 5, 60, 1.6, false),
      attn(2, 1, 64, 31, 2, 0.4, false),
      attn(2, 1, 64, 20, 1000, 0.5, false),  // a chunk whose queries see > 1000 keys
  };
  const OpCase decode[] = {
      attn(3, 3, 6, 1, 40, 0.5, true),   attn(4, 1, 12, 3, 65, -0.7, true), attn(2, 1, 20, 1, 129, 0.9, true),
      attn(64, 1, 8, 2, 70, 0.6, true),  attn(32, 8, 16, 1, 100, 0.4, true),
      attn(1, 1, 32, 1, 0, 0.3, true),   attn(2, 2, 32, 1, 70, -0.5, true), attn(4, 2, 16, 3, 130, 1.2, true),
      attn(8, 1, 16, 8, 51, 0.6, true),  attn(4, 1, 64, 5, 90, 0.9, true),  attn(2, 2, 128, 2, 40, 0.1, true),
      attn(8, 8, 16, 4, 200, 0.7, true), attn(4, 4, 16, 7, 0, 0.5, true),
      attn(4, 2, 16, 6, 77, 0.8, true, true), attn(1, 1, 64, 8, 33, -0.2, true, true),
      attn(8, 1, 64, 8, 3000, 0.6, true),  // long cache: splits capped per invocation on loop-limited devices
  };
  for (const OpCase& s : prefill) b.add(s);
  for (const OpCase& s : chunked) b.add(s);
  for (const OpCase& s : decode) b.add(s);
  // The shared-memory reduction instead of the subgroup one (where the device has subgroups).
  for (OpCase s : {attn(4, 2, 32, 3, 45, 0.6, true), attn(2, 2, 64, 1, 100, -0.3, true, true), attn(4, 2, 16, 33, 0, 1.3, false),
                   attn(8, 1, 16, 5, 60, 1.6, false), attn(2, 1, 64, 40, 0, 0.6, false)}) {
    s.subgroup = false;
    b.add(s);
  }
  // Q8_0 KV cache (issue 21 item 4; 2D a multiple of 32): prefill, chunks after cached rows, decode, GQA up to
  // 64, D = 16 (one block per row, a padded scale word), 48 (an odd block count), 64, 128. (The loads are the
  // only change: the long, loop-limited cases of the storage type cover the split paths.)
  for (OpCase s : {attn(2, 2, 16, 7, 0, -0.4, false), attn(4, 1, 48, 17, 0, 0.8, false), attn(2, 1, 64, 40, 0, 0.6, false),
                   attn(2, 2, 128, 19, 0, 0.2, false), attn(4, 2, 16, 13, 33, -0.9, false),
                   attn(64, 1, 16, 3, 0, 0.6, false), attn(1, 1, 16, 1, 0, 0.3, true), attn(4, 1, 48, 3, 65, -0.7, true),
                   attn(8, 1, 64, 8, 51, 0.6, true), attn(2, 2, 128, 2, 40, 0.1, true), attn(4, 2, 16, 6, 77, 0.8, true, true)}) {
    s.kv_q8 = true;
    b.add(s);
  }
  OpCase shared = attn(4, 2, 32, 3, 45, 0.6, true);
  shared.kv_q8 = true, shared.subgroup = false;
  b.add(shared);
  return b.cases;
}

// DIFF V2 (docs/maths.md "DIFF V2"): H output heads (2H query heads), Hkv dividing H, head width D; lambda
// is the standard deviation of the λ logits (50: saturated, λ at 0 or 1).
std::vector<OpCase> diff_v2_attn_cases(OpMode mode) {
  Builder b("diff_v2_attn", 300);
  if (mode == OpMode::bench) {
    b.add(attn(4, 1, 64, 1, 2047, 1.0, true));   // a decode step at T = 2048 (8 query heads, 1 KV head)
    b.add(attn(4, 1, 64, 512, 0, 1.0, false));  // a 512-row prefill
    return b.cases;
  }
  // Odd S and T; 1, 2, 4 and 32 pairs per KV head; D = 6/8/16/32/64/128 (element-wise, 4- and 8-element loads).
  const OpCase cases[] = {
      attn(1, 1, 16, 1, 0, 1.0, false),   attn(2, 2, 32, 7, 0, 1.0, false),  attn(4, 2, 16, 33, 0, 1.0, false),
      attn(4, 1, 64, 17, 0, 1.0, false),  attn(2, 1, 128, 19, 0, 1.0, false), attn(3, 3, 6, 11, 0, 1.0, false),
      attn(32, 1, 8, 5, 0, 1.0, false),   attn(2, 2, 16, 9, 0, 50.0, false),   // saturated λ
      attn(1, 1, 64, 900, 0, 1.0, false),  // beyond llvmpipe's per-invocation loop budget: split prefill there
      attn(4, 2, 16, 13, 33, 1.0, false), attn(2, 1, 64, 20, 1000, 1.0, false),  // chunks after cached rows
      attn(2, 1, 16, 1, 40, 1.0, true),   attn(4, 1, 32, 3, 65, 1.0, true),  attn(4, 2, 16, 8, 51, 1.0, true),
      attn(2, 2, 128, 2, 40, 1.0, true),  attn(3, 1, 6, 5, 90, 50.0, true),  attn(32, 1, 8, 2, 70, 1.0, true),
      attn(4, 2, 16, 6, 77, 1.0, true, true), attn(2, 1, 64, 1, 3000, 1.0, true),
  };
  for (const OpCase& c : cases) b.add(c);
  for (OpCase c : {attn(4, 2, 32, 3, 45, 1.0, true), attn(4, 1, 16, 33, 0, 1.0, false)}) {  // shared-memory lane sums
    c.subgroup = false;
    b.add(c);
  }
  // Q8_0 KV cache (D a multiple of 32): prefill, a chunk, decode, 1/2/4 pairs per KV head, saturated λ.
  for (OpCase c : {attn(2, 2, 32, 7, 0, 1.0, false), attn(4, 1, 64, 17, 0, 1.0, false), attn(2, 1, 128, 19, 0, 50.0, false),
                   attn(4, 2, 32, 13, 33, 1.0, false), attn(4, 1, 32, 3, 65, 1.0, true), attn(2, 2, 128, 2, 40, 1.0, true)}) {
    c.kv_q8 = true;
    b.add(c);
  }
  return b.cases;
}

OpCase probs(uint32_t H, uint32_t Hkv, uint32_t D, uint32_t T, uint32_t head0, uint32_t heads,
             std::vector<std::pair<uint32_t, uint32_t>> chunks, bool dynamic) {
  OpCase c;
  c.in = H, c.Hkv = Hkv, c.out = D, c.rows = T, c.head0 = head0, c.heads = heads, c.chunks = std::move(chunks), c.dynamic_pos = dynamic;
  return c;
}

std::vector<OpCase> attn_probs_cases(OpMode mode) {
  Builder b("attn_probs", 7);
  if (mode == OpMode::bench) {  // a debug kernel (diffvk attn-map): the largest map it draws, every head
    b.add(probs(16, 4, 64, 256, 0, 16, {{0, 256}}, false));
    return b.cases;
  }
  b.add(probs(2, 1, 16, 37, 0, 2, {{0, 20}, {20, 17}}, true));  // every row, dynamic positions, GQA
  b.add(probs(4, 2, 32, 9, 1, 2, {{3, 4}}, false));             // a head subset; rows 0-2 and 7-8 untouched
  b.add(probs(2, 2, 8, 100, 1, 1, {{0, 100}}, false));          // more keys than invocations per workgroup
  // DIFF V2 (docs/maths.md "DIFF V2"): the maps of query heads 2h and 2h + 1 and λ per row; H output heads,
  // 1, 2 and 4 pairs per KV head, odd T, D = 16/32/64, λ logits of standard deviation 1 or 50 (saturated λ).
  auto v2 = [&](OpCase c, double z_std) {
    c.v2 = true, c.lambda = z_std;
    b.add(c);
  };
  v2(probs(1, 1, 16, 37, 0, 1, {{0, 20}, {20, 17}}, true), 1.0);    // every row, dynamic positions
  v2(probs(2, 1, 32, 9, 1, 1, {{3, 4}}, false), 1.0);               // 2 pairs per KV head, a head subset, rows untouched
  v2(probs(3, 3, 64, 13, 0, 3, {{0, 12}, {12, 1}}, true), 50.0);    // saturated λ; a one-row chunk (decode)
  v2(probs(4, 1, 16, 101, 0, 4, {{0, 101}}, false), 1.0);           // 4 pairs per KV head, more keys than invocations
  v2(probs(2, 2, 32, 11, 0, 2, {{0, 5}, {5, 6}}, false), 50.0);     // one pair per KV head, chunks
  return b.cases;
}

}  // namespace

OpCase diff_attn_case(bool fp16, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t pos0, double lambda, bool decode,
                      uint64_t seed) {
  OpCase c = attn(H, Hkv, D, S, pos0, lambda, decode);
  c.op = "diff_attn";
  c.fp16 = fp16;
  c.seed = seed;
  c.name = describe(c);
  return c;
}

const std::vector<std::string>& table_ops() {
  static const std::vector<std::string> ops{"linear", "linear_row", "head_rmsnorm", "silu_mul", "embed", "rope_kv", "kv_shift", "diff_attn", "diff_v2_attn",
                                            "attn_probs"};
  return ops;
}

std::vector<OpCase> op_cases(const std::string& op, OpMode mode) {
  if (op == "linear") return linear_cases(mode);
  if (op == "linear_row") return linear_row_cases(mode);
  if (op == "head_rmsnorm") return head_rmsnorm_cases(mode);
  if (op == "silu_mul") return silu_mul_cases(mode);
  if (op == "embed") return embed_cases(mode);
  if (op == "rope_kv") return rope_kv_cases(mode);
  if (op == "kv_shift") return kv_shift_cases(mode);
  if (op == "diff_attn") return diff_attn_cases(mode);
  if (op == "diff_v2_attn") return diff_v2_attn_cases(mode);
  if (op == "attn_probs") return attn_probs_cases(mode);
  std::string known;
  for (const auto& o : table_ops()) known += (known.empty() ? "" : ", ") + o;
  throw Error(Status::invalid_argument, "no case table for op '" + op + "' (ops with a table: " + known + ")");
}

std::string OpCaseRun::summary() const {
  if (!skipped.empty()) return "skipped: " + skipped;
  return strf("%s max_abs=%g max|ref|=%g nmse=%g nonfinite=%zu replay %s, padding changed %zu%s%s", check.ok ? "ok" : "FAILED",
              check.max_abs, check.max_ref, check.nmse, check.nonfinite, replay_identical ? "identical" : "DIFFERS",
              padding_changed, detail.empty() ? "" : ", ", detail.c_str());
}

}  // namespace diffvk::bench
