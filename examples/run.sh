#!/usr/bin/env bash
# The main command:  ./examples/run.sh [diffvk subcommand and arguments]     (from any directory)
#   installs missing packages (.ci/install-deps), configures + builds build/ (CLI target only), then runs
#   build/examples/diffvk with your arguments. No arguments = the main job: `diffvk bench` on the
#   default Vulkan device.  Examples:
#     ./examples/run.sh                       # benchmark on the default device
#     ./examples/run.sh info                  # list devices and their capabilities
#     ./examples/run.sh bench --device 1 --precision fp32
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
CLI="$BUILD/examples/diffvk"

"$ROOT/.ci/install-deps" >&2

if [[ -z "${XDG_RUNTIME_DIR:-}" || ! -d "${XDG_RUNTIME_DIR}" ]]; then
  # Mesa wants one; a private, per-user directory that is reused between runs.
  XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/diffvk-xdg-$(id -u)"
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
fi
export XDG_RUNTIME_DIR

{
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target diffvk_cli
} >&2

if [[ $# -eq 0 ]]; then
  set -- bench
fi
exec "$CLI" "$@"
