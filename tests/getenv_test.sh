#!/usr/bin/env bash
# The library reads the environment in one place: runtime/vk/tuning.cpp (read_device_environment: the device,
# validation and tuning variables). platform/ reads only its platform facts (DIFFVK_LOG, XDG_CACHE_HOME, HOME);
# no shipped code reads a test variable (test hooks are seams: platform/platform_test_hooks.hpp).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fail=0
got="$(grep -rln --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.c' 'getenv *(' \
         "$ROOT/runtime" "$ROOT/include" | sed "s|^$ROOT/||" | sort)"
[[ "$got" == "runtime/vk/tuning.cpp" ]] || { echo "FAIL: getenv outside runtime/vk/tuning.cpp:"; echo "$got"; fail=1; }
[[ "$(grep -c 'getenv *(' "$ROOT/runtime/vk/tuning.cpp")" == 1 ]] ||
  { echo "FAIL: tuning.cpp must call getenv once"; fail=1; }
vars="$(grep -rhoE 'getenv\("[A-Z_]+"\)' "$ROOT/platform" | sort -u | tr '\n' ' ')"
[[ "$vars" == 'getenv("DIFFVK_LOG") getenv("HOME") getenv("XDG_CACHE_HOME") ' ]] ||
  { echo "FAIL: platform/ reads other variables: $vars"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok: one environment reader"
exit $fail
