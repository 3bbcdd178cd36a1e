// diffvk_bench: one case table per op (issue 18 item 5, like llama.cpp's test-backend-ops). Each op with
// a table has ONE list of cases (odd shapes, both precisions, each device quirk the op has: forced
// elementwise loads, capped workgroup counts, the shared-memory reduction instead of the subgroup one,
// a forced tile variant, float32 residual-stream arguments, split tables). The same table drives the
// conformance tests (tests/ops/, OpMode::conformance: every case, small shapes) and the benchmark's
// `ops` rows (`diffvk bench --ops`, OpMode::bench: a few representative larger shapes, same code).
//
// OpRunner::run() builds seeded random inputs (rounded to the storage type), poisons every output with
// NaN, records the op into a Program, runs it, checks every output element against the float64
// reference (runtime/reference/) with the docs/maths.md one-kernel tolerances (bench::compare), replays
// it and requires identical bits, and checks that bytes outside the outputs (stride padding) are
// untouched. Only when given an OpTiming, and only after the check passed, it times the program.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/check.hpp"
#include "bench/timing.hpp"
#include "ops/linear.hpp"
#include "ops/linear_quant.hpp"

namespace diffvk::bench {

enum class OpMode { conformance, bench };
enum class OpResidual : uint32_t { none = 0, separate = 1, in_place = 2 };

struct OpCase {
  std::string op;    // "linear", "linear_row", "head_rmsnorm", "silu_mul", "embed", "rope_kv", "kv_shift", "diff_attn", "diff_v2_attn", "attn_probs"
  std::string name;  // unique within the op's table, says every field that is not a default
  bool fp16 = false;  // the storage precision the case needs (the device's precision must match)
  // ---- shape (meaning per op)
  //   linear:       rows x in -> out; x row stride in + x_pad, y (and residual) row stride out + y_pad
  //   linear_row:   one row, in -> out (x holds 2·in values for the silu_mul prologue)
  //   head_rmsnorm: rows x heads sub-heads of width 2·D (in = heads, out = D)
  //   silu_mul:     rows x [gate | up] (2·out wide) -> rows x out
  //   embed:        rows tokens, E = out, vocabulary = in; parts > 1 splits the table by rows (record_part)
  //   rope_kv:      heads H (in), key/value groups Hkv, half width D (out), cache capacity; chunks: the
  //                 (pos0, rows) calls recorded in order into one program (prefill, chunked prefill, decode)
  //   kv_shift:     Hkv, half width D (out), cache capacity; the in rows held, rows [pos0, pos0 + rows) dropped
  //                 (pos0 = keep, rows = discard); the rest moved down, K re-rotated
  uint32_t rows = 1, in = 0, out = 0, x_pad = 0, y_pad = 0, parts = 1;
  //   diff_attn:    heads H (in), Hkv, half width D (out), S = rows query rows at positions pos0 .. pos0 + S - 1
  //                 against the pos0 + S cached keys (cache capacity pos0 + S + 3: spare rows hold 1000, so a
  //                 read past the live length wrecks the result); decode: the split-K kernels + merge
  uint32_t Hkv = 0, capacity = 0;
  std::vector<std::pair<uint32_t, uint32_t>> chunks;
  //   diff_v2_attn: DIFF V2: output heads H (in; 2H query heads), Hkv, head width D (out), S = rows, pos0, the
  //                 cache as for diff_attn; lambda = the standard deviation of the λ logits
  //   attn_probs:   H (in), Hkv, D (out), maps of T = rows positions for heads head0 .. head0 + heads - 1;
  //                 chunks: the (pos0, rows) query chunks recorded in order (rows outside them stay poisoned);
  //                 v2: DIFF V2's layouts and λ rows, lambda = the standard deviation of the λ logits
  uint32_t pos0 = 0;
  double lambda = 0.5;
  bool decode = false;
  uint32_t head0 = 0, heads = 0;
  bool dynamic_pos = false;  // attn_probs: pos0 through the 4-byte dynamic-position buffer
  bool v2 = false;           // attn_probs: DIFF V2 (the maps of query heads 2h, 2h + 1 and λ per query row); kv_shift: D-wide rows
  OpResidual residual = OpResidual::none;
  RowPrologue pro = RowPrologue::none;
  bool x_f32 = false, y_f32 = false;  // Elem::f32 arguments (the model's residual stream / logits)
  // linear_row: the weight format (issue 19): f16 = the storage type; q8_0 / q4_0 = GGUF blocks in the device
  // layout of ops/linear_quant.hpp (QuantRowKernel), checked against the reference on the dequantized weights.
  QuantType weights = QuantType::f16;
  // linear_row / linear over q8_0 / q4_0: the int8 dot-product path (QuantRowPath::int8_dot, forced: QuantRowKernel,
  // LinearKernel::record_quant_path), checked against the reference on the dequantized weights and the
  // int8-rounded activations; skipped without the feature.
  bool int8_dot = false;
  // diff_attn / diff_v2_attn / rope_kv / kv_shift: a Q8_0 KV cache (issue 21 item 4; ops/kv_format.hpp), checked
  // against the reference on the dequantized cache (attention) or on GGUF's Q8_0 of the exact values (append, shift).
  bool kv_q8 = false;
  // ---- device quirks
  int variant = -1;            // linear: a forced tile candidate (record_variant); -1: the kernel's choice
  bool subgroup = true;        // false: the shared-memory reduction even where subgroup arithmetic exists
  bool scalar_loads = false;   // linear / linear_row: never the 16-byte vector loads
  uint32_t wg_limit_x = 0, wg_limit_y = 0;  // capped workgroup counts (grid-stride loops); 0 = the device's
  bool x_misaligned = false;   // linear_row: x at the device's offset alignment when that is < 16 bytes
  uint32_t row_lanes = 0;      // linear_row: forced lanes per lane group (issue 21 item 5; row_lanes clamps it); 0 = the kernel's
  bool max_splits = false;     // diff_attn decode: one tile per split (some splits see only masked keys)
  bool one_split = false;      // diff_attn decode: one split streams every key in one invocation
  uint64_t seed = 1;
};

// The ops that have a table, in report order.
const std::vector<std::string>& table_ops();
// The matmul table (Options::matmul_table), linear cases in both precisions: full = M {1, 8, 64, 512} x
// (K, N) {(768, 768), (768, 2304), (2048, 768), (2048, 2048), (4096, 4096)} x weights {f16, q8_0, q4_0};
// otherwise the one row the default run times (f16 weights, M = 512, K = N = 2048).
// coopmat: also the cooperative-matrix kernel (variant kLinearCoopVariant, fp16) at the f16 shapes with M >= 64
// (the default run: at M = 512, K = N = 2048), path "coopmat" in the JSON.
std::vector<OpCase> matmul_table_cases(bool full, bool coopmat = false);
// The op's table: both precisions (callers run the cases whose fp16 matches their device). Throws
// invalid_argument for an op without a table.
std::vector<OpCase> op_cases(const std::string& op, OpMode mode);

// One diff_attn case (named and seeded like the table's), for tests whose shapes depend on the device
// (the per-invocation key budget) or that only run on request (the large shapes).
OpCase diff_attn_case(bool fp16, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t pos0, double lambda, bool decode,
                      uint64_t seed);

struct OpTiming {
  int warmup = 1, runs = 3;
  bool timestamps = false;
};

struct OpCaseRun {
  std::string skipped;           // non-empty: not run on this device (why)
  Check check;                   // every output element against the float64 reference
  bool replay_identical = false; // the second run gave the same bits
  size_t padding_changed = 0;    // elements outside the outputs (stride padding, cache rows not appended) that changed
  std::string detail;            // the path the op took (tiles, workgroup size)
  bool ok() const { return skipped.empty() && check.ok && replay_identical && padding_changed == 0; }
  std::string summary() const;
  // ---- bench mode (OpTiming given and the check passed)
  bool timed = false;
  Stats us;
  uint64_t bytes = 0;  // bytes the op must move (inputs read once, outputs written once; + residual)
  double flops = 0;    // useful flops
  double gbps() const { return timed && us.median > 0 ? double(bytes) / (us.median * 1e3) : 0; }
  double gflops() const { return timed && us.median > 0 ? flops / (us.median * 1e3) : 0; }
};

// Runs cases on one device; builds each op's kernels once per (op, subgroup) and keeps them.
class OpRunner {
 public:
  explicit OpRunner(Device& device);
  ~OpRunner();
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;
  // A case whose precision differs from the device's comes back skipped.
  OpCaseRun run(const OpCase& c, const OpTiming* timing = nullptr);
  // Test hook (tests/ops/test_tolerances.cpp): a planted fault the check must catch. wrong_value: one
  // expected value is off by 1e-2 x max(1, |value|); no_dispatch: the program records nothing, so the
  // outputs keep their NaN poison.
  enum class Plant { none, wrong_value, no_dispatch };
  void plant_for_testing(Plant p) { plant_ = p; }

  struct Kernels;

 private:
  Device& dev_;
  std::unique_ptr<Kernels> k_;
  Plant plant_ = Plant::none;
};

}  // namespace diffvk::bench
