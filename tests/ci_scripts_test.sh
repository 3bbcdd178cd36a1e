#!/usr/bin/env bash
# Item 6: .ci/aarch64 exits 3 ("skipped": mirror unreachable) only when nothing failed before
# the network step; after an earlier failure it must exit 1. Runs the script's own unreachable_exit()
# (extracted from the script text) in a subshell with and without a recorded failure.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fn="$(awk '/^unreachable_exit\(\) \{/,/^\}/' "$ROOT/.ci/aarch64")"
[[ -n "$fn" ]] || { echo "FAIL: unreachable_exit() not found in .ci/aarch64"; exit 1; }
log="$(mktemp)"; trap 'rm -f "$log"' EXIT
echo "Could not resolve 'deb.debian.org'" >"$log"
probe() {  # failures... -> exit status of unreachable_exit
  ( MIRROR=http://deb.debian.org/debian; T0=$SECONDS; NET_RE='Could not resolve'; summary=(); failed=("$@")
    eval "$fn"; unreachable_exit "bookworm-backports (apt-get update)" "$log" ) >/dev/null 2>&1
  echo $?
}
rc_clean=$(probe)
rc_failed=$(probe "pass mesa22: ctest rc 8")
echo "unreachable_exit: nothing failed before -> $rc_clean (want 3); a pass failed before -> $rc_failed (want 1)"
[[ $rc_clean -eq 3 && $rc_failed -eq 1 ]] || { echo "FAIL"; exit 1; }

# .ci/run names a failing test, and the start of its output, at the end of the run (a CI report shows its tail):
# failed_tests_digest() on a ctest log with one passed, one failed and one skipped test.
fn="$(awk '/^failed_tests_digest\(\) \{/,/^\}/' "$ROOT/.ci/run")"
[[ -n "$fn" ]] || { echo "FAIL: failed_tests_digest() not found in .ci/run"; exit 1; }
cat >"$log" <<'LOG'
      Start  1: a passing test
  1/3 Test  #1: a passing test ..........   Passed    0.1 sec
      Start  2: selftest: a failing test
  2/3 Test  #2: selftest: a failing test .......***Failed    3.2 sec
tests/bench/test_selftest.cpp:72: ERROR: CHECK( row.pass ) is NOT correct!
      Start  3: a skipped test
  3/3 Test  #3: a skipped test ..........***Skipped    0.1 sec
LOG
digest="$(eval "$fn"; failed_tests_digest "$log" "pass 1")"
echo "$digest"
grep -q "selftest: a failing test" <<<"$digest" && grep -q "CHECK( row.pass ) is NOT correct" <<<"$digest" \
  && ! grep -q "passing test\|skipped test" <<<"$digest" || { echo "FAIL: the digest"; exit 1; }
echo "ok"

# .ci/compile-times fails on a pipeline past 10x the pooled median and 1 s, reruns the run that holds it, and keeps
# each pipeline's faster time: check() (extracted from the script) on synthetic `diffvk selftest --json` files.
fn="$(awk '/^check\(\) \{/,/^\}/' "$ROOT/.ci/compile-times")"
[[ -n "$fn" ]] || { echo "FAIL: check() not found in .ci/compile-times"; exit 1; }
OUT="$(mktemp -d)"; trap 'rm -f "$log"; rm -rf "$OUT"' EXIT
doc() {  # file seconds...: one row, one first use per time, pipeline p<i>
  python3 - "$@" <<'EOF'
import json, sys
path, times = sys.argv[1], [float(t) for t in sys.argv[2:]]
uses = [{"case": f"c{i}", "pipelines": [f"p{i}"], "seconds": t} for i, t in enumerate(times)]
json.dump({"rows": [{"op": "op", "first_uses": uses}]}, open(path, "w"))
EOF
}
doc "$OUT/a.json" 0.2 0.3 0.25 0.2 0.3 4.0   # p5: 16x the median 0.25 s
doc "$OUT/b.json" 0.2
( eval "$fn"; check a b ) >"$log" 2>&1; rc_slow=$?
rerun="$(cat "$OUT/rerun")"
doc "$OUT/a.again.json" 0.2 0.3 0.25 0.2 0.3 1.5   # p5 faster the second time: 6x
( eval "$fn"; check a b ) >>"$log" 2>&1; rc_again=$?
rm -f "$OUT/a.again.json"; doc "$OUT/a.json" 0.2 0.3 0.25 0.2 0.3 2.4   # 9.6x: within the limit
( eval "$fn"; check a b ) >>"$log" 2>&1; rc_ok=$?
doc "$OUT/a.json" 0.02 0.03 0.025 0.02 0.03 0.9   # 36x, but under the 1 s floor
( eval "$fn"; check a b ) >>"$log" 2>&1; rc_floor=$?
echo "compile-times check: 16x -> $rc_slow (want 1, rerun '$rerun'), rerun at 6x -> $rc_again, 9.6x -> $rc_ok, 36x under 1 s -> $rc_floor (want 0)"
[[ $rc_slow -eq 1 && "$rerun" == "a" && $rc_again -eq 0 && $rc_ok -eq 0 && $rc_floor -eq 0 ]] || { cat "$log"; echo "FAIL"; exit 1; }
echo "ok"
