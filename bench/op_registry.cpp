// diffvk_bench: the ops that have a case table, one line each, in report order. A new op: its case file
// bench/cases/<op>.cpp (parameters, case class, table: `OpCases <op>_cases(OpMode)`) and one line here.
#include "diffvk/error.hpp"
#include "bench/op_run_impl.hpp"

#define DIFFVK_OP_TABLES(OP) \
  OP(linear)                 \
  OP(linear_row)             \
  OP(linear_row_rope)        \
  OP(head_rmsnorm)           \
  OP(silu_mul)               \
  OP(conv1d_state)           \
  OP(selective_scan)         \
  OP(gmu_gate)               \
  OP(layer_norm)             \
  OP(embed)                  \
  OP(rope_kv)                \
  OP(kv_shift)               \
  OP(diff_attn)              \
  OP(diff_v2_attn)           \
  OP(attn_probs)             \
  OP(sample)

namespace diffvk::bench {

#define DIFFVK_DECLARE_TABLE(op) OpCases op##_cases(OpMode mode);
DIFFVK_OP_TABLES(DIFFVK_DECLARE_TABLE)
#undef DIFFVK_DECLARE_TABLE
// The ops whose pipelines take a model's sizes as specialization constants (model_shape_cases).
OpCases diff_attn_model_cases(const ModelShape& shape);
OpCases diff_v2_attn_model_cases(const ModelShape& shape);
OpCases selective_scan_model_cases(const ModelShape& shape);

namespace {

struct OpTable {
  std::string op;
  OpCases (*cases)(OpMode);
};

const std::vector<OpTable>& tables() {
#define DIFFVK_TABLE_ENTRY(op) {#op, op##_cases},
  static const std::vector<OpTable> t{DIFFVK_OP_TABLES(DIFFVK_TABLE_ENTRY)};
#undef DIFFVK_TABLE_ENTRY
  return t;
}

}  // namespace

const std::vector<std::string>& table_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const OpTable& t : tables()) v.push_back(t.op);
    return v;
  }();
  return ops;
}

OpCases op_cases(const std::string& op, OpMode mode) {
  for (const OpTable& t : tables())
    if (t.op == op) return t.cases(mode);
  std::string known;
  for (const auto& o : table_ops()) known += (known.empty() ? "" : ", ") + o;
  throw Error(Status::invalid_argument, "no case table for op '" + op + "' (ops with a table: " + known + ")");
}

OpCases model_shape_cases(const std::string& op, const ModelShape& shape) {
  if (op == "diff_attn" && (shape.kind == "v1" || shape.kind == "phi4flash")) return diff_attn_model_cases(shape);
  if (op == "diff_v2_attn" && shape.kind == "v2") return diff_v2_attn_model_cases(shape);
  if (op == "selective_scan" && shape.kind == "phi4flash") return selective_scan_model_cases(shape);
  return {};
}

}  // namespace diffvk::bench
