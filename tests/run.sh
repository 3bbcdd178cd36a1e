#!/usr/bin/env bash
# The test command:  ./tests/run.sh [extra ctest arguments]     (from any directory)
#   1. .ci/install-deps (installs missing Debian/Ubuntu packages; no-op when all are present)
#   2. configures build/ (Release, tests on) and builds it with all cores
#   3. ctest --test-dir build --output-on-failure -j$(nproc) [your arguments, e.g. -L large, -R rmsnorm]
# Exits with ctest's status. Every GPU test runs under the Khronos validation layer (sync validation
# on); any validation message fails the test. Pick the device with DIFFVK_DEVICE or VK_DRIVER_FILES.
# Extra CMake options: DIFFVK_CMAKE_ARGS="-DDIFFVK_LARGE_TESTS=ON" ./tests/run.sh -L large
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
JOBS="$(nproc 2>/dev/null || echo 2)"

"$ROOT/.ci/install-deps"

if [[ -z "${XDG_RUNTIME_DIR:-}" || ! -d "${XDG_RUNTIME_DIR}" ]]; then
  XDG_RUNTIME_DIR="$(mktemp -d "${TMPDIR:-/tmp}/diffvk-xdg.XXXXXX")"
  chmod 700 "$XDG_RUNTIME_DIR"
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi
export XDG_RUNTIME_DIR

# shellcheck disable=SC2086  # DIFFVK_CMAKE_ARGS is a list of words on purpose
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDIFFVK_BUILD_TESTS=ON ${DIFFVK_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$JOBS"

set +e
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" "$@"
status=$?
set -e
exit "$status"
