#!/usr/bin/env bash
# `diffvk quantize` output checked by a reader nobody here wrote (npm's @huggingface/gguf).
# Usage: gguf_reader_test.sh DIFFVK_CLI MODEL_DIR WORK_DIR
# Uses $DIFFVK_GGUF_NODE_MODULES (a node_modules folder holding @huggingface/gguf) when set, else
# WORK_DIR/npm/node_modules, installing the package there with npm on first use. Exit 77 (CTest: skipped,
# never passed) when node, npm or the package is unavailable.
set -euo pipefail
cli="$1"; model="$2"; work="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v node >/dev/null 2>&1 || { echo "SKIP: node not found"; exit 77; }
mods="${DIFFVK_GGUF_NODE_MODULES:-$work/npm/node_modules}"
if [[ ! -f "$mods/@huggingface/gguf/package.json" ]]; then
  if [[ -n "${DIFFVK_GGUF_NODE_MODULES:-}" ]] || ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: @huggingface/gguf not in $mods and npm unavailable"; exit 77
  fi
  mkdir -p "$work/npm"
  if ! timeout 180 npm install --prefix "$work/npm" --no-audit --no-fund --loglevel=error @huggingface/gguf >"$work/npm.log" 2>&1; then
    tail -5 "$work/npm.log"; echo "SKIP: npm install @huggingface/gguf failed (offline?)"; exit 77
  fi
fi
mkdir -p "$work"
for t in f16 q8_0 q4_0; do
  out="$work/model-$t.gguf"
  rm -f "$out"
  "$cli" quantize --type "$t" "$model" "$out"
  "$cli" quantize --list "$out" >"$work/model-$t.json"
  rc=0; node "$here/gguf_reader_check.mjs" "$mods" "$out" "$work/model-$t.json" "$t" || rc=$?
  [[ $rc -eq 0 ]] || exit $rc
done
echo "gguf_reader: all types match"
