#!/usr/bin/env bash
# .ci/check-host-includes passes a build whose include directories all lie in the source tree,
# the build tree or the sysroot, and fails one that names a host directory, whether in a compile command
# or only in a target's include directories (which CMake may drop from the command line).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
W="$(mktemp -d)"; trap 'rm -rf "$W"' EXIT
mkdir -p "$W/b/include-audit"
printf 'CMAKE_SYSROOT:PATH=%s/sysroot\n' "$W" >"$W/b/CMakeCache.txt"
cmds() { printf '[{"directory":"%s/b","command":"g++ %s -c x.cpp","file":"x.cpp"}]\n' "$W" "$1" >"$W/b/compile_commands.json"; }
audit() { printf '%s\n' "$@" >"$W/b/include-audit/t.txt"; }
check() { bash "$ROOT/.ci/check-host-includes" "$W/b" "$ROOT" >"$W/log" 2>&1; echo $?; }
fails=0
want() {  # expected-rc description
  local rc; rc=$(check)
  if [[ $rc -ne $1 ]]; then echo "FAIL: $2: rc $rc, want $1"; cat "$W/log"; fails=$((fails + 1)); else echo "ok: $2 (rc $rc)"; fi
}
cmds "-I$ROOT/include -isystem $W/b/deps/nlohmann/include --sysroot=$W/sysroot"; audit "$ROOT/include" "$W/sysroot/usr/include"
want 0 "source, build and sysroot directories only"
cmds "-I$ROOT/include -isystem /usr/include"
want 1 "-isystem /usr/include in a compile command"
cmds "-I/usr/local/include/foo"
want 1 "-I/usr/local/include/foo (attached form)"
cmds "-I$ROOT/include"; audit "$ROOT/include" "/usr/include"
want 1 "/usr/include only in a target's include directories"
rm -f "$W/b/include-audit/t.txt"
want 2 "no include-audit files"
[[ $fails -eq 0 ]] && echo "all ok"
exit $fails
