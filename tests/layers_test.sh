#!/usr/bin/env bash
# The repository's runtime/ respects the layer arrows (.ci/check-layers exits 0), and the
# check is not blind: a scratch tree with one include against the arrows per rule makes it exit 1. The same for
# examples/, which may include only public headers and their own files.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/.ci/check-layers" "$ROOT" || { echo "FAIL: the repository has layer violations"; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
plant() {  # file include -> exit status of the check on a tree holding just that file
  rm -rf "$tmp/t"; mkdir -p "$tmp/t/platform" "$tmp/t/runtime/vk" "$tmp/t/runtime/$(dirname "$1")"
  printf '#include "%s"\n' "$2" >"$tmp/t/runtime/$1"
  bash "$ROOT/.ci/check-layers" "$tmp/t" >/dev/null; echo $?
}
fail=0
expect() { local got; got=$(plant "$2" "$3"); [[ $got -eq $1 ]] || { echo "FAIL: runtime/$2 including \"$3\": exit $got, want $1"; fail=1; }; }
expect 1 ops/a.cpp model/model_kernels.hpp   # upward
expect 1 vk/a.cpp io/half.hpp                # sibling
expect 1 model/a.cpp bench/bench.hpp         # upward into the benchmark module
expect 0 model/a.cpp ops/linear.hpp          # downward
expect 1 bench/a.cpp model/model_kernels.hpp # the benchmark's seam: nothing of model/ (the public API instead)
expect 0 bench/a.cpp ops/linear.hpp          # the seam: the op layer
expect 0 bench/a.cpp vk/program.hpp          # the seam: what an op's interface takes (BENCH_SEAM)
expect 1 bench/a.cpp vk/instance.hpp         # a vk/ header outside BENCH_SEAM
expect 1 bench/a.cpp platform.hpp            # platform internals
expect 1 bench/a.cpp capi/c_api_internal.hpp # the C ABI's internals outside bench/c_api.cpp
expect 0 bench/c_api.cpp capi/c_api_internal.hpp # the benchmark's C entry point
expect 0 io/a.cpp diffvk/error.hpp           # public headers of a lower layer
expect 1 ops/a.cpp diffvk/model.hpp          # a public header of a higher layer
expect 1 vk/a.cpp diffvk/diffvk_bench.h      # the benchmark's public header from the core
expect 1 ops/a.cpp diffvk/unknown.hpp        # a public header the check does not place
expect 0 bench/a.cpp reference/diff_attn_ref.hpp  # the benchmark's check uses the float64 reference
expect 1 model/a.cpp reference/diff_attn_ref.hpp  # the core never includes it
expect 1 reference/a.cpp ops/linear.hpp      # the reference has no GPU code
expect 1 tokenizer/a.cpp model/checkpoint.hpp # A tokenizer file including a model header
expect 1 tokenizer/a.cpp ops/linear.hpp      # siblings of rank 2 (ops, graph, tokenizer)
expect 1 ops/a.cpp graph/graph.hpp           # siblings: ops and graph do not include each other
expect 0 model/a.cpp graph/graph.hpp         # the recipes (model) build graphs
expect 1 model/a.cpp capi/c_api_guard.hpp    # upward into the C ABI
expect 1 model/a.cpp diffvk/diffvk.h         # the C ABI's public header from the model
expect 0 capi/a.cpp tokenizer/tokenizer_impl.hpp # the C ABI uses the tokenizers
expect 1 tokenizer/a.cpp diffvk/model.hpp    # a public header of a higher layer
# examples/: public headers and the example's own files only
plant_example() {  # file include [file of the same tree] -> exit status of the check
  rm -rf "$tmp/t"; mkdir -p "$tmp/t/platform" "$tmp/t/runtime/vk" "$tmp/t/include/diffvk" "$tmp/t/examples/$(dirname "$1")" \
                            "$tmp/t/examples/other"
  : >"$tmp/t/examples/cli/own.hpp"; : >"$tmp/t/examples/other/theirs.hpp"; : >"$tmp/t/runtime/vk/gpu.hpp"
  printf '#include "%s"\n' "$2" >"$tmp/t/examples/$1"
  bash "$ROOT/.ci/check-layers" "$tmp/t" >/dev/null; echo $?
}
expect_example() { local got; got=$(plant_example "$2" "$3"); [[ $got -eq $1 ]] || { echo "FAIL: examples/$2 including \"$3\": exit $got, want $1"; fail=1; }; }
expect_example 1 cli/a.cpp io/npy.hpp          # a runtime/ header
expect_example 1 cli/a.cpp platform.hpp        # the platform header
expect_example 1 cli/a.cpp vk/gpu.hpp          # a runtime/ header that exists
expect_example 1 cli/a.cpp ../other/theirs.hpp # another example's file
expect_example 1 cli/a.cpp diffvk/unknown.hpp  # not a public header
expect_example 0 cli/a.cpp diffvk/model.hpp    # a public header
expect_example 0 cli/a.cpp own.hpp             # the example's own file
[[ $fail -eq 0 ]] && echo "ok: planted violations are caught"
exit $fail
