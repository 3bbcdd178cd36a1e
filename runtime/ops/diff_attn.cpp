#include "ops/diff_attn.hpp"

#include <algorithm>
#include <cmath>

namespace diffvk {

namespace {
std::vector<uint32_t> spec(const AttnTiles& t, uint32_t D, KvFormat kv) {
  std::vector<uint32_t> s = attn_spec_constants(t, D);
  s.push_back(kv == KvFormat::q8_0 ? 1 : 0);  // KVQ8
  s.push_back(t.blocks);                      // KB: the key-block core
  s.push_back(t.nsg);                         // NSG: subgroups per workgroup (staged K/V when > 1)
  s.push_back(t.qh);                          // QH: Q in shared memory as halves
  return s;
}

// The shaders of each variant (the same core, attn_core.glsl, with NSM softmaxes, and its epilogue,
// attn_out.glsl). Bindings: 0 q, 1 k, 2 v, 3 subln (others: o), 4 o (others: unused), 5 dynamic position;
// the split kernels add 6 part, 7 stat, 8 arrival counters.
struct AttnShaders {
  const char *prefill, *split;
  const char *prefill_label, *split_label, *prefill_split_label;
};
const AttnShaders& shaders(AttnSoftmax sm, uint32_t half) {
  static const AttnShaders diff{"diff_attn", "diff_attn_split", "diff_attn prefill", "diff_attn split",
                                "diff_attn prefill split"};
  static const AttnShaders single[2] = {
      {"flash_attn", "flash_attn_split", "flash Q1K1", "flash split Q1K1", "flash split Q1K1"},
      {"flash_attn", "flash_attn_split", "flash Q2K2", "flash split Q2K2", "flash split Q2K2"}};
  static const AttnShaders v2{"diff_v2_attn", "diff_v2_attn_split", "diff_v2_attn prefill", "diff_v2_attn split",
                              "diff_v2_attn prefill split"};
  static const AttnShaders plain[3] = {
      {"flash_v2", "flash_v2_split", "plain even", "plain split even", "plain split even"},
      {"flash_v2", "flash_v2_split", "plain odd", "plain split odd", "plain split odd"},
      {"flash_v2", "flash_v2_split", "plain all", "plain split all", "plain split all"}};
  if (sm == AttnSoftmax::v2_plain) return plain[std::min(half, 2u)];
  return sm == AttnSoftmax::single ? single[half ? 1 : 0] : sm == AttnSoftmax::v2 ? v2 : diff;
}
uint32_t nsm(AttnSoftmax sm) { return sm == AttnSoftmax::differential ? 2 : 1; }
}  // namespace

// Keys a call's queries may see: every row of the cache when the position is read at run time (without bound in a
// ring), at most window + S − 1 with a sliding window.
uint64_t DiffAttnKernel::call_keys(const AttnCall& c) {
  const uint64_t end = c.dyn_pos.buffer ? (c.ring ? UINT64_MAX : c.capacity) : uint64_t(c.pos0) + c.S;
  return c.window ? std::min(end, uint64_t(c.window) + c.S - 1) : end;
}

DiffAttnKernel::DiffAttnKernel(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows,
                               AttnSoftmax softmax, KvFormat kv)
    : device_(device),
      softmax_(softmax),
      kv_(kv),
      fp16_(o.fp16),
      subgroup_(o.subgroup),
      D_(D),
      n_rep_(n_rep),
      max_decode_rows_(max_decode_rows) {
  if (softmax != AttnSoftmax::single && softmax != AttnSoftmax::differential && softmax != AttnSoftmax::v2 &&
      softmax != AttnSoftmax::v2_plain)
    throw Error(Status::invalid_argument, "attention: unknown softmax variant");
  if (softmax == AttnSoftmax::v2 && n_rep % 2)
    throw Error(Status::invalid_argument, "attention: DIFF V2 needs an even number of query heads per KV head (n_rep=" +
                                              std::to_string(n_rep) + ")");
  if (D == 0 || D % 2) throw Error(Status::invalid_argument, "attention: D must be even and positive");
  if (n_rep == 0) throw Error(Status::invalid_argument, "attention: n_rep must be positive");
  if (max_decode_rows == 0 || max_decode_rows > 8)
    throw Error(Status::invalid_argument, "attention: decode handles 1..8 query rows per call");
  // Without subgroup operations (KernelOptions::subgroup false: the device's choice, or the self-test's per-op fallback
  // on a device that has them) the tiles are planned as for a device without subgroup arithmetic.
  DeviceCaps caps = device.caps();
  if (!o.subgroup) caps.subgroup_arithmetic_compute = false;
  const uint32_t n = nsm(softmax);
  const std::string kv_problem =
      kv_format_problem(kv, softmax == AttnSoftmax::v2 || softmax == AttnSoftmax::v2_plain ? D : 2 * D);
  if (!kv_problem.empty()) throw Error(Status::invalid_argument, "attention: " + kv_problem);
  const bool dw = softmax == AttnSoftmax::v2 || softmax == AttnSoftmax::v2_plain, pairs = softmax == AttnSoftmax::v2;
  const bool q8 = kv == KvFormat::q8_0;
  prefill_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::prefill, 1, n, dw, pairs, q8);
  decode1_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::decode, 1, n, dw, pairs, q8);
  decodeN_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::decode, max_decode_rows, n, dw, pairs, q8);
  // Staged K/V needs the subgroup variant (the variant without subgroup arithmetic sums across one subgroup's lanes
  // in shared memory, per workgroup).
  if (!o.subgroup) prefill_tiles_ = attn_unstaged(prefill_tiles_, D);
  // On a loop-limited device, tiles whose one block of keys passes an invocation's budget are refused here, when the
  // model loads, not when a prompt first reaches them.
  for (const AttnTiles* t : {&prefill_tiles_, &decode1_tiles_, &decodeN_tiles_})
    (void)attn_max_keys_per_invocation(caps, D, *t, subgroup_);
  const AttnShaders& sh = shaders(softmax, 0);
  const uint32_t push = sizeof(AttnCorePush);
  // Compiled on first record (LazyPipeline): a prefill-only user (a layer, `logits`, a prefill case) never
  // compiles the split-K ones.
  auto lazy = [&](const char* shader, uint32_t bindings, const AttnTiles& t, bool ovec = false) {
    std::vector<uint32_t> constants = spec(t, D, kv);
    if (ovec) constants.push_back(1);  // OVEC (shaders/attn_out.glsl): the epilogue's 16-byte vector stores
    return std::make_unique<LazyPipeline>(device,
                                          PipelineDesc{shader}
                                              .with_bindings(bindings)
                                              .with_push(push)
                                              .with_spec(std::move(constants))
                                              .with_subgroup(o.subgroup)
                                              .with_fp16(fp16_)
                                              .with_subgroup_size(t.subgroup),
                                          false);
  };
  prefill_ = lazy(sh.prefill, 6, prefill_tiles_);
  // CPU drivers: the prefill kernel's epilogue in 16-byte vector stores where o's rows, heads and chunks are aligned
  // (vector_store), a pipeline of its own (the constant folds the element form away: kept beside it, LLVM compiled
  // both, slower than the element form alone). GPUs keep the element stores: their ISA is unchanged.
  if (caps.kind == DeviceKind::cpu && prefill_tiles_.chunk != 0)
    prefill_vec_ = lazy(sh.prefill, 6, prefill_tiles_, true);
  decode1_ = lazy(sh.split, 9, decode1_tiles_);
  if (decodeN_tiles_.br != decode1_tiles_.br) decodeN_ = lazy(sh.split, 9, decodeN_tiles_);
  // The cooperative-matrix prefill: the tuning's policy (attn_uses_coopmat), not for the variant without subgroup
  // operations (KernelOptions::subgroup false asks for the plainest kernels); the tuning's attn_core=coopmat makes a
  // kernel that cannot take it an error.
  std::string why;
  bool coop = attn_uses_coopmat(caps, fp16_, D, n, dw, q8, &coop_tiles_, &why) && device.coopmat();
  if (coop && !o.subgroup) {
    coop = false;
    why = "the variant without subgroup operations was asked for (KernelOptions::subgroup)";
  }
  if (!coop && device.tuning().attn_core == "coopmat")
    throw Error(Status::unsupported, device.tuning().why("attn_core") +
                                         ": no cooperative-matrix prefill attention for D=" + std::to_string(D) +
                                         ", n_rep=" + std::to_string(n_rep) + ": " + why);
  if (coop) {
    coop_max_keys_ = attn_coop_max_keys(caps, D, coop_tiles_);
    coop_ = std::make_unique<LazyPipeline>(device,
                                           PipelineDesc{"diff_attn_coopmat"}
                                               .with_bindings(6)
                                               .with_push(push)
                                               .with_spec(attn_coop_spec_constants(coop_tiles_, D))
                                               .with_subgroup(false)
                                               .with_fp16(true)
                                               .with_subgroup_size(coop_tiles_.pin),
                                           false);
  }
}

// The cooperative-matrix kernel masks causally only: a sliding window takes the scalar kernels.
bool DiffAttnKernel::prefill_uses_coopmat(const AttnCall& c) const {
  return coop_ && c.window == 0 && call_keys(c) <= coop_max_keys_;
}

bool DiffAttnKernel::decode_on_prefill(uint32_t rows, uint64_t keys) const {
  uint32_t len = 0;
  return device_.tuning().attn_decode_prefill && rows <= max_decode_rows_ && scalar_prefill_splits(keys, &len) == 0;
}

std::string DiffAttnKernel::choice(uint32_t rows, uint64_t keys, uint32_t window) const {
  auto core = [](const AttnTiles& t) {
    const std::string c = !t.blocks   ? "per-key core"
                          : t.nsg > 1 ? "staged key blocks x" + std::to_string(t.nsg)
                                      : "key-block core";
    return c + ", " + std::to_string(t.br) + " slots";
  };
  const uint64_t seen = window ? std::min<uint64_t>(keys, uint64_t(window) + rows - 1) : keys;
  if (rows <= max_decode_rows_ && !decode_on_prefill(rows, seen))
    return "split-K decode (" + core(decode_tiles(rows)) + ")";
  if (coop_ && keys <= coop_max_keys_ && window == 0)
    return "diff_attn_coopmat (" + std::to_string(coop_tiles_.cm) + "x" + std::to_string(coop_tiles_.cn) + "x" +
           std::to_string(coop_tiles_.ck) + ", " + std::to_string(coop_tiles_.br) + " slots)";
  uint32_t len = 0;
  if (window ? scalar_prefill_splits(std::min<uint64_t>(keys, uint64_t(window) + rows - 1), &len)
             : prefill_splits_for_keys(keys, &len))
    return "split-K prefill (" + core(decodeN_tiles_) + ")";
  return std::string(rows <= max_decode_rows_ ? "decode on the prefill kernel (" : "prefill (") + core(prefill_tiles_) +
         ")";
}

DiffAttnKernel::~DiffAttnKernel() = default;

const AttnTiles& DiffAttnKernel::decode_tiles(uint32_t S) const { return S <= 1 ? decode1_tiles_ : decodeN_tiles_; }

AttnCorePush DiffAttnKernel::core_push(const AttnCall& c, uint32_t min_split, uint32_t max_split) const {
  const float scale = static_cast<float>(1.0 / std::sqrt(double(D_)));
  // What every variant shares; the variants below differ in qk_off, q_hstride and λ / gain / eps.
  AttnCorePush p;
  p.S = c.S;
  p.pos0 = c.pos0;
  p.H = c.H;
  p.n_rep = n_rep_;
  p.capacity = c.capacity;
  p.q_stride = c.q_stride;
  p.o_stride = c.o_stride;
  p.qk_off = 0;
  p.min_split = min_split;
  p.max_split = max_split;
  p.scale = scale;
  p.lambda = 0.0f;
  p.gain = 1.0f;
  p.eps = 0.0f;
  p.q_hstride = 0;
  if (v2()) return p;  // every query head's softmax; λ is read from q by the epilogue or the merge
  if (plain()) {       // even / odd query heads: every other head of the row (2D apart), from column 0 or D
    p.qk_off = c.half == 1 ? D_ : 0;
    p.q_hstride = c.half == 2 ? 0 : 2 * D_;
    return p;
  }
  if (single()) {  // one half's softmax: Q and K columns from half·D, no λ, no norm
    p.qk_off = c.half * D_;
    return p;
  }
  p.lambda = c.lambda;  // the differential softmax: λ, and the headwise norm's gain and eps
  p.gain = c.gain;
  p.eps = c.eps;
  return p;
}

AttnCorePush DiffAttnKernel::push(const AttnCall& c, uint32_t min_split, uint32_t max_split) const {
  AttnCorePush p = core_push(c, min_split, max_split);
  p.window = c.window;
  p.ring = c.ring ? 1 : 0;
  return p;
}

BufferRange DiffAttnKernel::dyn(const AttnCall& c) const { return c.dyn_pos.buffer ? c.dyn_pos : device_.zero_range(); }

void DiffAttnKernel::validate(const AttnCall& c, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                              BufferRange o) const {
  const uint64_t es = storage_bytes(fp16_), dv = d_wide() ? D_ : 2ull * D_;
  if (single() && c.half > 1) throw Error(Status::invalid_argument, "attention: half must be 0 (Q1/K1) or 1 (Q2/K2)");
  if (plain() && c.half > 2)
    throw Error(Status::invalid_argument, "attention: half must be 0 (even), 1 (odd) or 2 (every head)");
  if (c.S == 0 || c.H == 0 || c.Hkv == 0 || c.H % c.Hkv || c.H / c.Hkv != n_rep_)
    throw Error(Status::invalid_argument, "attention: H=" + std::to_string(c.H) + ", Hkv=" + std::to_string(c.Hkv) +
                                              " does not match this kernel's n_rep=" + std::to_string(n_rep_));
  if (c.ring && c.window == 0)
    throw Error(Status::invalid_argument, "attention: a ring KV cache needs a sliding window (window > 0)");
  if (c.ring && uint64_t(c.window) + c.S - 1 > c.capacity)
    throw Error(Status::invalid_argument,
                "attention: a ring of " + std::to_string(c.capacity) + " rows cannot hold the window of " +
                    std::to_string(c.window) + " keys for " + std::to_string(c.S) +
                    " query rows appended before the call (needs capacity >= window + S - 1 = " +
                    std::to_string(uint64_t(c.window) + c.S - 1) + ")");
  if (c.ring && uint64_t(c.pos0) + c.S > UINT32_MAX)
    throw Error(Status::context_overflow, "attention: positions past 2^32 - 1");
  if (uint64_t(c.pos0) + c.S > c.capacity && !c.dyn_pos.buffer && !c.ring)
    throw Error(Status::context_overflow, "attention: positions up to " + std::to_string(uint64_t(c.pos0) + c.S) +
                                              " exceed the KV cache capacity " + std::to_string(c.capacity));
  // DIFF V2: H query heads and H/2 λ logits in q, H/2 output heads of D in o.
  const uint64_t qw = plain() ? (c.half == 2 ? 1 : 2) * c.H * dv : c.H * dv + (v2() ? c.H / 2 : 0),
                 ow = v2() ? c.H / 2 * dv : c.H * dv;
  if (c.q_stride < qw || c.o_stride < ow)
    throw Error(Status::invalid_argument, v2() ? "attention: row strides smaller than H x D (+ H/2 λ logits in q)"
                                               : "attention: row strides smaller than H x 2D");
  const uint64_t qn = (uint64_t(c.S) - 1) * c.q_stride + qw, on = (uint64_t(c.S) - 1) * c.o_stride + ow;
  const uint64_t kv = kv_cache_bytes(kv_, fp16_, c.Hkv, c.capacity, static_cast<uint32_t>(dv));
  if (q.size < qn * es || o.size < on * es || k.size < kv || v.size < kv ||
      (softmax_ == AttnSoftmax::differential && subln.size < dv * es))
    throw Error(Status::invalid_argument, "attention: a buffer is smaller than the shape needs");
}

void DiffAttnKernel::record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                    BufferRange o, const AttnCall& c, const AttnSplitScratch& sc) const {
  validate(c, q, k, v, subln, o);
  if (prefill_uses_coopmat(c)) {
    const AttnCorePush p = push(c, c.capacity, c.capacity);
    program.dispatch(*coop_,
                     {{q, Access::read},
                      {k, Access::read},
                      {v, Access::read},
                      {subln, Access::read},
                      {o, Access::write},
                      {dyn(c), Access::read}},
                     &p, sizeof p, {(n_rep_ * c.S + coop_tiles_.br - 1) / coop_tiles_.br, c.Hkv, 1},
                     "diff_attn prefill coopmat");
    return;
  }
  uint32_t split_len = 0;
  if (const uint32_t splits = prefill_splits(c, &split_len)) {
    if (!sc.part.buffer || !sc.stat.buffer || !sc.sync.buffer)
      throw Error(Status::invalid_argument, "attention prefill: this device needs split-K scratch and counters for " +
                                                std::to_string(splits) + " splits (prefill_splits)");
    record_split(program, split_pipeline(decodeN_tiles_), decodeN_tiles_, q, k, v, subln, o, sc, c, splits, split_len,
                 shaders(softmax_, c.half).prefill_split_label);
    return;
  }
  const AttnTiles& t = prefill_tiles_;
  const AttnCorePush p = push(c, c.capacity, c.capacity);
  const BufferRange zero = device_.zero_range();
  const bool o3 = softmax_ != AttnSoftmax::differential;  // o at binding 3 (no subln)
  program.dispatch(vector_store(o, subln, c) ? *prefill_vec_ : *prefill_,
                   {{q, Access::read},
                    {k, Access::read},
                    {v, Access::read},
                    o3 ? Arg{o, Access::write} : Arg{subln, Access::read},
                    o3 ? Arg{zero, Access::read} : Arg{o, Access::write},
                    {dyn(c), Access::read}},
                   &p, sizeof p, {attn_row_blocks(c.S, n_rep_, t), c.Hkv, 1}, shaders(softmax_, c.half).prefill_label);
}

// The prefill epilogue's 16-byte vector stores (prefill_vec_, OVEC): whole chunks of 16 bytes (fp16: 8 halves; fp32:
// 4 or 8 floats), and every row (o_stride), head (its V width) and the range itself 16-byte aligned; the norm's
// weights (subln: the differential kernel's) are then read as vectors, so aligned too.
bool DiffAttnKernel::vector_store(BufferRange o, BufferRange subln, const AttnCall& c) const {
  if (!prefill_vec_ || (softmax_ == AttnSoftmax::differential && subln.offset % 16)) return false;
  const uint64_t es = storage_bytes(fp16_), dv = d_wide() ? D_ : 2ull * D_, cw = prefill_tiles_.chunk == 8 ? 8 : 4;
  // Whole 16-byte chunks (then every head, dv wide, starts aligned too), aligned rows and range.
  return dv % cw == 0 && (cw * es) % 16 == 0 && (c.o_stride * es) % 16 == 0 && o.offset % 16 == 0;
}

uint32_t DiffAttnKernel::prefill_splits(const AttnCall& c, uint32_t* split_len) const {
  *split_len = 0;
  if (prefill_uses_coopmat(c)) return 0;  // the cooperative-matrix kernel streams them alone
  return scalar_prefill_splits(call_keys(c), split_len);
}

uint32_t DiffAttnKernel::prefill_splits_for_keys(uint64_t keys, uint32_t* split_len) const {
  *split_len = 0;
  if (coop_ && keys <= coop_max_keys_) return 0;  // the cooperative-matrix kernel streams them alone
  return scalar_prefill_splits(keys, split_len);
}

// A workgroup of the fused prefill streams at most the call's keys (with a window, its first query's window to its
// last query): the call's key count bounds it.
uint32_t DiffAttnKernel::scalar_prefill_splits(uint64_t keys, uint32_t* split_len) const {
  *split_len = 0;
  const DeviceCaps& caps = device_.caps();
  if (keys <= attn_max_keys_per_invocation(caps, D_, prefill_tiles_, subgroup_)) return 0;
  *split_len = attn_max_keys_per_invocation(caps, D_, decodeN_tiles_, subgroup_);
  return static_cast<uint32_t>((keys + *split_len - 1) / *split_len);
}

uint32_t DiffAttnKernel::decode_splits_for_keys(const AttnCall& c, uint64_t keys, uint32_t* split_len) const {
  const AttnTiles& t = decode_tiles(c.S);
  const uint32_t per_split = attn_row_blocks(c.S, n_rep_, t) * c.Hkv;
  return choose_splits(device_.caps(), static_cast<uint32_t>(std::min<uint64_t>(keys, UINT32_MAX)), t.bc, per_split,
                       split_len, attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_));
}

uint32_t DiffAttnKernel::decode_splits(const AttnCall& c, uint32_t* split_len) const {
  AttnCall fixed = c;
  fixed.dyn_pos = {};  // the recorded position
  return decode_splits_for_keys(c, call_keys(fixed), split_len);
}

// Every key of the cache, or of the window (window + S − 1) with one.
uint32_t DiffAttnKernel::decode_splits_for_capacity(const AttnCall& c, uint32_t* split_len) const {
  const uint64_t keys = c.window ? std::min<uint64_t>(uint64_t(c.window) + c.S - 1, c.capacity) : c.capacity;
  return decode_splits_for_keys(c, keys, split_len);
}

// Per split, (query, head) row and softmax: the 2D partial output (DIFF V2: D per query head) and the
// (max, sum) pair, in fp32.
uint64_t DiffAttnKernel::part_bytes(const AttnCall& c, uint32_t D, uint32_t splits, AttnSoftmax sm) {
  return uint64_t(splits) * c.H * c.S * nsm(sm) * (sm == AttnSoftmax::v2 || sm == AttnSoftmax::v2_plain ? 1 : 2) * D *
         4;
}
uint64_t DiffAttnKernel::stat_bytes(const AttnCall& c, uint32_t splits, AttnSoftmax sm) {
  return uint64_t(splits) * c.H * c.S * nsm(sm) * 2 * 4;
}

void DiffAttnKernel::record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                   BufferRange o, const AttnSplitScratch& sc, const AttnCall& c, uint32_t splits,
                                   uint32_t split_len) const {
  validate(c, q, k, v, subln, o);
  if (c.S > max_decode_rows_)
    throw Error(Status::invalid_argument, "attention decode: " + std::to_string(c.S) + " rows > " +
                                              std::to_string(max_decode_rows_) + " (use prefill)");
  const AttnTiles& t = decode_tiles(c.S);
  record_split(program, split_pipeline(t), t, q, k, v, subln, o, sc, c, splits, split_len,
               shaders(softmax_, c.half).split_label);
}

const LazyPipeline& DiffAttnKernel::split_pipeline(const AttnTiles& t) const {
  return (&t == &decode1_tiles_ || !decodeN_) ? *decode1_ : *decodeN_;
}

void DiffAttnKernel::record_split(Program& program, const LazyPipeline& pipe, const AttnTiles& t, BufferRange q,
                                  BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                                  const AttnSplitScratch& sc, const AttnCall& c, uint32_t splits, uint32_t split_len,
                                  const char* label) const {
  const BufferRange &part = sc.part, &stat = sc.stat, &sync = sc.sync;
  const uint64_t keys = call_keys(c);
  if (splits == 0 || split_len == 0 || split_len % t.bc || uint64_t(splits) * split_len < keys)
    throw Error(Status::invalid_argument, "attention: splits do not cover the keys");
  if (split_len > attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_))
    throw Error(Status::invalid_argument, "attention: split of " + std::to_string(split_len) +
                                              " keys exceeds what one invocation may stream on this device");
  if (part.size < part_bytes(c, D_, splits, softmax_) || stat.size < stat_bytes(c, splits, softmax_))
    throw Error(Status::invalid_argument, "attention: split scratch too small");
  if (sync.size < sync_bytes(c))
    throw Error(Status::invalid_argument, "attention: split arrival counters too small (sync_bytes)");
  for (const BufferRange a : {part, stat})
    for (const BufferRange b : {q, k, v, subln, o, sync})
      if (ranges_overlap(a, b))
        throw Error(Status::invalid_argument, "attention: split scratch overlaps another argument");
  if (ranges_overlap(sync, o) || ranges_overlap(part, stat))
    throw Error(Status::invalid_argument, "attention: split scratch overlaps another argument");
  const uint32_t min_split = std::min(kAttnMinSplitKeys, split_len);
  const AttnCorePush p = push(c, min_split, split_len);
  const bool o3 = softmax_ != AttnSoftmax::differential;  // o at binding 3 (no subln)
  program.dispatch(pipe,
                   {{q, Access::read},
                    {k, Access::read},
                    {v, Access::read},
                    o3 ? Arg{o, Access::write} : Arg{subln, Access::read},
                    o3 ? Arg{device_.zero_range(), Access::read} : Arg{o, Access::write},
                    {dyn(c), Access::read},
                    {part, Access::read_write},
                    {stat, Access::read_write},
                    {sync, Access::read_write}},
                   &p, sizeof p, {attn_row_blocks(c.S, n_rep_, t), c.Hkv, splits}, label);
}

}  // namespace diffvk
