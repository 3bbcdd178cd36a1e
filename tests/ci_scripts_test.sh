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
echo "ok"
