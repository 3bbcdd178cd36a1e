// Conformance of the elementwise ops that have no test file of their own: the SwiGLU activation and the
// Gated Memory Unit's gate (shaders/silu_mul.comp: fused [gate | up] rows; separate g and m with their own
// strides and offsets) and the token embedding (shaders/embed.comp: the whole table, tables split by
// rows into parts, ids past the vocabulary embed to zeros), through their case tables
// (bench/cases/silu_mul.cpp, gmu_gate.cpp, embed.cpp) against the float64 reference.
#include <doctest/doctest.h>

#include <set>

#include "op_table.hpp"

using namespace diffvk;

TEST_CASE("silu_mul: case table fp32") { test::run_op_table("silu_mul", Precision::fp32); }
TEST_CASE("silu_mul: case table fp16") { test::run_op_table("silu_mul", Precision::fp16); }
TEST_CASE("gmu_gate: case table fp32") { test::run_op_table("gmu_gate", Precision::fp32); }
TEST_CASE("gmu_gate: case table fp16") { test::run_op_table("gmu_gate", Precision::fp16); }
TEST_CASE("embed: case table fp32") { test::run_op_table("embed", Precision::fp32); }
TEST_CASE("embed: case table fp16") { test::run_op_table("embed", Precision::fp16); }

TEST_CASE("op tables: every op has cases in both precisions and unique names") {
  for (const std::string& op : bench::table_ops())
    for (bench::OpMode mode : {bench::OpMode::conformance, bench::OpMode::bench}) {
      INFO(op << (mode == bench::OpMode::bench ? " bench" : " conformance"));
      const auto cases = bench::op_cases(op, mode);
      size_t fp16 = 0;
      std::set<std::string> names;
      for (const auto& c : cases) {
        CHECK(c->op() == op);
        fp16 += c->fp16;
        names.insert(c->name);
      }
      CHECK(fp16 > 0);
      CHECK(fp16 < cases.size());
      CHECK(names.size() == cases.size());
    }
  CHECK_THROWS(bench::op_cases("no_such_op", bench::OpMode::conformance));
}
