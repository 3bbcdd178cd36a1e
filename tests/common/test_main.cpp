#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "gpu_test.hpp"

namespace {
// Counts the test cases that ran and those that reported themselves skipped (test::skip).
struct SkipListener : doctest::IReporter {
  explicit SkipListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {
    ++diffvk::test::g_cases_run;
    diffvk::test::g_skip_current = false;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& st) override {
    if (diffvk::test::g_skip_current && st.numAssertsFailedCurrentTest == 0 && st.testCaseSuccess)
      ++diffvk::test::g_cases_skipped;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("diffvk-skips", 1, SkipListener);
}  // namespace

int main(int argc, char** argv) {
  // Validation (with synchronization validation) for everything this process and its children run.
  setenv("DIFFVK_VALIDATION", "1", 1);
  setenv("XDG_RUNTIME_DIR", "/tmp", 0);
  // The cache directory base in the build tree (tests/CMakeLists.txt), for this process and the CLIs it starts: the
  // pipeline caches and self-test verdicts the tests write never land in, or replace, the user's own. Tests of the
  // default's rules set and restore the variable themselves.
  setenv("XDG_CACHE_HOME", DIFFVK_TEST_CACHE_HOME, 1);
  // No self-test at load in the CLI runs the tests start (its runner is registered there): each configuration would
  // test every op first. tests/bench/test_selftest.cpp sets the mode it tests.
  setenv("DIFFVK_SELFTEST", "off", 0);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int rc = context.run();
  if (diffvk::test::validation_message_count() > 0) {
    std::fprintf(stderr, "diffvk tests: %d Vulkan validation message(s) -- failing\n",
                 diffvk::test::validation_message_count());
    return rc ? rc : 1;
  }
  // Every test case that ran was skipped (CTest runs one case per process): exit 77, which CTest reports
  // as "Skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt) instead of "Passed".
  if (rc == 0 && diffvk::test::g_cases_run > 0 && diffvk::test::g_cases_skipped == diffvk::test::g_cases_run) {
    std::fprintf(stderr, "diffvk tests: %d test case(s) skipped on this device\n", diffvk::test::g_cases_skipped);
    return diffvk::test::kSkipExitCode;
  }
  return rc;
}
