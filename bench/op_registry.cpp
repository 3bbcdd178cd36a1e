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

}  // namespace diffvk::bench
