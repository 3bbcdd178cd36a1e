// Conformance of shaders/head_rmsnorm.comp against the float64 reference through the op's case table
// (both precisions, both reduction paths, odd shapes, outputs poisoned before each run), and a planted
// wrong gain that the comparison must catch.
#include <doctest/doctest.h>

#include <random>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "op_table.hpp"

using namespace diffvk;

// Every shape, precision and reduction path (subgroup, shared memory) comes from the op's one case
// table (bench/cases/head_rmsnorm.cpp), float32 input (the block norms) included.
TEST_CASE("head_rmsnorm: case table fp32") { test::run_op_table("head_rmsnorm", Precision::fp32); }
TEST_CASE("head_rmsnorm: case table fp16") { test::run_op_table("head_rmsnorm", Precision::fp16); }

TEST_CASE("head_rmsnorm: a wrong result is caught (the test can fail)") {
  // Same comparison as above on a deliberately wrong gain: must be far outside tolerance.
  std::mt19937_64 rng(7);
  auto x = test::random_vector(rng, 2 * 3 * 32);
  auto w = test::random_vector(rng, 32, 0.5, 1.5);
  auto good = ref::head_rmsnorm(x, 2, 3, 16, w, ref::lambda_init(2));
  auto bad = ref::head_rmsnorm(x, 2, 3, 16, w, ref::lambda_init(3));
  CHECK_FALSE(test::within_spec(test::compare(bad, good), false));
  CHECK_FALSE(test::within_spec(test::compare(bad, good), true));
  std::vector<double> nan_out(good.size(), std::nan(""));
  CHECK_FALSE(test::within_spec(test::compare(nan_out, good), true));
}
