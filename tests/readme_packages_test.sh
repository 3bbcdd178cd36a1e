#!/usr/bin/env bash
# The package list in README.md ("### Packages" code block) is exactly what .ci/install-deps installs.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
script=$(awk '/^PACKAGES=\(/{on=1; next} on && /^\)/{on=0} on' "$ROOT/.ci/install-deps" | sed 's/#.*//' | tr -s ' \t' '\n' | grep . | sort -u)
readme=$(awk '/^### Packages/{sec=1} sec && /^```/{if (blk) exit; blk=1; next} sec && blk' "$ROOT/README.md" | tr -s ' \t' '\n' | grep . | sort -u)
[[ -n "$script" && -n "$readme" ]] || { echo "FAIL: could not read the lists (script: ${#script} chars, README: ${#readme} chars)"; exit 1; }
if [[ "$script" != "$readme" ]]; then
  echo "FAIL: README.md's package list differs from .ci/install-deps"
  diff <(echo "$script") <(echo "$readme") | sed 's/^</  only in .ci\/install-deps:/; s/^>/  only in README.md:/' | grep only
  exit 1
fi
echo "ok: $(echo "$script" | wc -l) packages, the same in README.md and .ci/install-deps"
