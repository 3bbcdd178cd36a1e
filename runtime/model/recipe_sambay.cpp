// SambaY's blocks (recipe_sambay.hpp), built on the one recipe's linear, norm and attention op.
#include "model/recipe_sambay.hpp"

#include <algorithm>

#include "diffvk/error.hpp"

namespace diffvk {

namespace {
void check_rows(const Forward& f, const char* block) {
  if (f.row)
    throw Error(Status::internal, std::string(block) + ": SambaY blocks have no one-row fused path (Forward::row)");
}
// A one-row pass (decode, YOCO's last row) runs its linears on the one-row kernel (no prologue: SambaY's norms are
// LayerNorms with bias, which it has no fused form of), not on the matmul's tiles.
const RowLinear* one_row(const Forward& f) {
  static const RowLinear plain{};
  return f.rows == 1 ? &plain : nullptr;
}
}  // namespace

TensorRef add_mamba_block(Forward& f, TensorRef x, const MambaShape& s, const MambaBlock& w, bool memory,
                          const std::string& memory_name) {
  check_rows(f, "mamba block");
  const std::string& P = w.pre.prefix;
  const uint32_t T = f.rows, C = s.C, S = s.S, R = s.R;
  const ModelKernels& k = f.k;
  if (!k.conv || !k.scan || !k.layer_norm)
    throw Error(Status::internal, "mamba block: the model built no SambaY kernels (build_sambay_kernels)");
  const TensorRef h = add_norm(f, P + "mamba_norm.out", x, w.pre.w, w.pre.b, s.E, s.eps);
  const TensorRef xz = f.g.tensor(P + "mamba.xz", TensorRole::activation, f.storage(), {T, 2ull * C});
  add_linear(f, "in_proj", h, w.in_proj, xz, false, one_row(f));
  // u = silu(conv1d(x) + b) over the first C columns of [x | z], the state carrying the last K − 1 inputs.
  const TensorRef u = f.g.tensor(P + "mamba.u", TensorRole::activation, f.storage(), {T, C});
  const Conv1dStateKernel* conv = k.conv.get();
  const TensorRef cw = w.conv_w, cb = w.conv_b, cs = w.conv_state;
  f.g.add("conv1d", {xz, cw, cb, cs}, {u, cs}, [=](Program& p, const GraphBinding& b) {
    Conv1dStateParams cp;
    cp.T = T;
    cp.C = C;
    cp.x_stride = 2 * C;
    cp.x_offset = 0;
    cp.silu = true;
    conv->record(p, cp, b[xz], b[cw], b[cb], b[cs], b[u]);
  });
  f.g.kernel("conv1d_state");
  // [dt_low | B | Cm] = u·x_projᵀ; delta_raw = dt_low·dt_projᵀ + dt_b (the scan applies softplus).
  const TensorRef dbc = f.g.tensor(P + "mamba.x_proj", TensorRole::activation, f.storage(), {T, R + 2ull * S});
  add_linear(f, "x_proj", u, w.x_proj, dbc, false, one_row(f));
  const TensorRef delta = f.g.tensor(P + "mamba.delta_raw", TensorRole::activation, f.storage(), {T, C});
  add_linear(f, "dt_proj", dbc, w.dt_proj, delta, false, one_row(f), R + 2 * S);
  // The selective scan with the D skip, gated by silu(z) (the last C columns of [x | z]).
  SelectiveScanParams sp;
  sp.T = T;
  sp.C = C;
  sp.S = S;
  sp.bc_stride = R + 2 * S;
  sp.b_offset = R;
  sp.c_offset = R + S;
  sp.z_stride = 2 * C;
  sp.z_offset = C;
  const uint64_t scratch_bytes = selective_scan_scratch_bytes(sp);
  const TensorRef scratch = scratch_bytes ? f.g.scratch(P + "mamba.scan_scratch", scratch_bytes) : TensorRef{};
  const TensorRef y = f.g.tensor(P + "mamba.y", TensorRole::activation, f.storage(), {T, C});
  const TensorRef m = memory ? f.g.tensor(memory_name, TensorRole::activation, f.storage(), {T, C}) : TensorRef{};
  const TensorRef A = w.A_log, D = w.D, hs = w.scan_state;
  std::vector<TensorRef> reads{u, delta, A, dbc, D, xz, hs}, writes{y, hs};
  if (m.valid()) writes.push_back(m);
  if (scratch.valid()) {
    reads.push_back(scratch);
    writes.push_back(scratch);
  }
  const SelectiveScanKernel* scan = k.scan.get();
  f.g.add("selective_scan", reads, writes, [=](Program& p, const GraphBinding& b) {
    SelectiveScanBuffers sb;
    sb.u = b[u];
    sb.delta_raw = b[delta];
    sb.A_log = b[A];
    sb.bc = b[dbc];
    sb.D = b[D];
    sb.z = b[xz];
    sb.h = b[hs];
    sb.y = b[y];
    if (m.valid()) sb.y_pre = b[m];
    if (scratch.valid()) sb.scratch = b[scratch];
    scan->record(p, sp, sb);
  });
  f.g.kernel(SelectiveScanKernel::choice(sp));
  add_linear(f, "out_proj", y, w.out_proj, x, true, one_row(f));
  return m;
}

void add_gmu_block(Forward& f, TensorRef x, const MambaShape& s, const GmuBlock& w, TensorRef memory) {
  check_rows(f, "GMU block");
  const std::string& P = w.pre.prefix;
  const uint32_t T = f.rows, C = s.C;
  if (!memory.valid()) throw Error(Status::internal, "GMU block: no memory tensor (the memory layer comes first)");
  const TensorRef h = add_norm(f, P + "gmu_norm.out", x, w.pre.w, w.pre.b, s.E, s.eps);
  const TensorRef g = f.g.tensor(P + "gmu.in", TensorRole::activation, f.storage(), {T, C});
  add_linear(f, "in_proj", h, w.in_proj, g, false, one_row(f));
  const TensorRef a = f.g.tensor(P + "gmu.gated", TensorRole::activation, f.storage(), {T, C});
  const SiluMulKernel* silu = f.k.silu.get();
  f.g.add("gmu_gate", {g, memory}, {a}, [=](Program& p, const GraphBinding& b) {
    GmuGateParams gp;
    gp.rows = T;
    gp.I = C;
    gp.g_stride = C;
    gp.g_off = 0;
    gp.m_stride = C;
    gp.m_off = 0;
    silu->record_gmu(p, b[g], b[memory], b[a], gp);
  });
  f.g.kernel("silu_mul gmu");
  add_linear(f, "out_proj", a, w.out_proj, x, true, one_row(f));
}

namespace {
// The rows a sliding layer appends and attends at once: its piece, or the whole pass.
uint32_t piece_rows(const SambaAttnBlock& w, uint32_t rows) { return w.piece && w.piece < rows ? w.piece : rows; }

// The block's norm and projection: the query rows (a new tensor prefix + "q", written by the append where the layer
// has keys) and, unless the layer is a cross-decoder one, the fused [q | k | v] rows.
std::pair<TensorRef, TensorRef> add_sambay_projection(Forward& f, TensorRef x, const AttnShape& s,
                                                      const SambaAttnBlock& w, float eps) {
  check_rows(f, "attention block");
  const std::string& P = w.pre.prefix;
  const uint32_t T = f.rows, E = s.E, qw = sambay_q_width(s);
  const bool cross = w.kind == SambaAttnKind::cross, sliding = w.kind == SambaAttnKind::sliding;
  const uint32_t most = piece_rows(w, s.chunk);
  if (sliding && (w.window == 0 || uint64_t(s.capacity) < uint64_t(w.window) + most - 1))
    throw Error(Status::internal, "attention block " + P + ": a ring of " + std::to_string(s.capacity) +
                                      " rows cannot hold a window of " + std::to_string(w.window) + " and " +
                                      std::to_string(most) + "-row pieces");
  const TensorRef h = add_norm(f, P + "attn_norm.out", x, w.pre.w, w.pre.b, E, eps);
  const uint32_t qkvw = cross ? qw : sambay_qkv_width(s);
  if (w.wqkv.out != qkvw)
    throw Error(Status::internal, "attention block " + P + ": Wqkv has " + std::to_string(w.wqkv.out) +
                                      " rows, the shape needs " + std::to_string(qkvw));
  const TensorRef q = f.g.tensor(P + "q", TensorRole::activation, f.storage(), {T, qw});
  if (cross) {  // queries only: the keys and values are the shared cache's
    add_linear(f, "Wq", h, w.wqkv, q, false, one_row(f));
    return {q, TensorRef{}};
  }
  const TensorRef qkv = f.g.tensor(P + "qkv", TensorRole::activation, f.storage(), {T, qkvw});
  add_linear(f, "Wqkv", h, w.wqkv, qkv, false, one_row(f));
  return {q, qkv};
}

// Rows row0 … row0 + rows − 1 of qkv: q into q's rows, K/V appended as they are (no RoPE) at position
// Forward::pos + row0 + i (full: that row; sliding: that row mod the ring).
void add_sambay_append(Forward& f, const AttnShape& s, const SambaAttnBlock& w, TensorRef qkv, TensorRef q,
                       uint32_t row0, uint32_t rows) {
  const bool sliding = w.kind == SambaAttnKind::sliding;
  const RopeKvKernel* append = &f.k.rope_for(f.kv);
  RopeKvParams rp = rope_kv_params(f, s);
  rp.rows = rows;
  rp.pos0 = row0;
  rp.ring = sliding ? 1 : 0;
  rp.rope = 0;
  const uint64_t es = elem_type_bytes(f.storage()), qw = f.g.at(q).shape[1], qkvw = f.g.at(qkv).shape[1];
  const bool whole = row0 == 0 && rows == f.rows;
  const TensorRef kc = w.k_cache, vc = w.v_cache, pos = f.pos;
  f.g.add("kv_append", {qkv, pos, kc, vc}, {q, kc, vc}, [=](Program& p, const GraphBinding& b) {
    const BufferRange in = whole ? b[qkv] : b[qkv].sub(row0 * qkvw * es, rows * qkvw * es),
                      out = whole ? b[q] : b[q].sub(row0 * qw * es, rows * qw * es);
    append->record(p, in, BufferRange{}, out, b[kc], b[vc], rp, b[pos]);
  });
  f.g.kernel(sliding ? "rope_kv (no rotation, ring)" : "rope_kv (no rotation)");
}

AttnOp sambay_attn_op(const AttnShape& s, const SambaAttnBlock& w) {
  const bool sliding = w.kind == SambaAttnKind::sliding;
  AttnOp op;
  op.lambda = w.lambda;
  op.lambda_init = w.lambda_init;
  op.q_stride = op.o_stride = sambay_q_width(s);
  op.window = sliding ? w.window : 0;
  op.ring = sliding;
  return op;
}
}  // namespace

uint32_t sambay_piece_rows(uint32_t chunk, uint32_t most, const std::vector<uint64_t>& row_bytes, uint64_t align) {
  for (uint32_t p = std::min(chunk, most); p >= 1 && align; --p)
    if (std::all_of(row_bytes.begin(), row_bytes.end(), [&](uint64_t b) { return (p * b) % align == 0; })) return p;
  return chunk;
}

TensorRef add_sambay_qkv(Forward& f, TensorRef x, const AttnShape& s, const SambaAttnBlock& w, float eps) {
  const auto [q, qkv] = add_sambay_projection(f, x, s, w, eps);
  if (qkv.valid()) add_sambay_append(f, s, w, qkv, q, 0, f.rows);
  return q;
}

void add_sambay_attention_out(Forward& f, TensorRef x, TensorRef q, const AttnShape& s, const SambaAttnBlock& w) {
  check_rows(f, "attention block");
  const TensorRef o = add_attention_op(f, w.pre.prefix, q, w.k_cache, w.v_cache, w.subln, s, sambay_attn_op(s, w));
  add_linear(f, "out_proj", o, w.wo, x, true, one_row(f));
}

void add_sambay_attention_block(Forward& f, TensorRef x, const AttnShape& s, const SambaAttnBlock& w, float eps) {
  const uint32_t piece = piece_rows(w, f.rows);
  if (w.kind != SambaAttnKind::sliding || piece == f.rows) {
    add_sambay_attention_out(f, x, add_sambay_qkv(f, x, s, w, eps), s, w);
    return;
  }
  // A sliding layer in pieces: each piece's keys are appended just before its queries attend, so that the ring
  // holds the window of the piece's first row (window + piece − 1 rows).
  const auto [q, qkv] = add_sambay_projection(f, x, s, w, eps);
  AttnOp op = sambay_attn_op(s, w);
  op.out = f.g.tensor(w.pre.prefix + "attn.out", TensorRole::activation, f.storage(), {f.rows, op.o_stride});
  for (uint32_t r0 = 0; r0 < f.rows; r0 += piece) {
    op.row0 = r0;
    op.rows = std::min(piece, f.rows - r0);
    add_sambay_append(f, s, w, qkv, q, op.row0, op.rows);
    add_attention_op(f, w.pre.prefix, q, w.k_cache, w.v_cache, w.subln, s, op);
  }
  add_linear(f, "out_proj", op.out, w.wo, x, true, one_row(f));
}

TensorRef add_last_row(Forward& f, TensorRef t, const std::string& name) {
  const GraphTensor& gt = f.g.at(t);
  if (gt.shape.size() != 2 || gt.shape[0] != f.rows)
    throw Error(Status::internal, "last row: '" + gt.name + "' is not a matrix of the pass's rows");
  const uint64_t width = gt.shape[1], es = elem_type_bytes(gt.dtype), rows = f.rows;
  const TensorRef y = f.g.tensor(name, TensorRole::activation, gt.dtype, {1, width});
  f.g.add("last row", {t}, {y}, [=](Program& p, const GraphBinding& b) {
    p.copy(b[t].sub((rows - 1) * width * es, width * es), b[y], "last row");
  });
  f.g.kernel("copy");
  return y;
}

}  // namespace diffvk
